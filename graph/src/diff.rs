//! Desired objects and effects against observed objects: the actions, each with its reason.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::object::{Object, ObjectKey};
use crate::world::World;

/// A request for something the graph cannot do purely (generate a key, issue a certificate).
///
/// `id` is its stable identity (e.g. `"generate-rsa-key k-20270101"`): the graph keeps
/// requesting the same id until it observes the result, then stops, so a satisfied effect
/// disappears by itself. An [`Action::Effect`] is emitted when an id starts being requested.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectRequest {
    /// The stable identity of the request.
    pub id: String,
    /// The request's typed content, as JSON.
    pub request: Value,
}

impl EffectRequest {
    /// Builds a request from any serializable value.
    ///
    /// # Errors
    /// When `request` cannot be represented as JSON (e.g. a map with non-string keys).
    pub fn new<T: Serialize>(id: impl Into<String>, request: &T) -> Result<Self, serde_json::Error> {
        Ok(Self {
            id: id.into(),
            request: serde_json::to_value(request)?,
        })
    }
}

/// What an emitting node produces: the objects it wants to exist (partial: only the owned
/// fields) and the effects it requests. Register such a node with
/// [`crate::GraphBuilder::emit`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Desired {
    /// Desired objects, each holding only the fields this controller owns.
    #[serde(default)]
    pub objects: Vec<Object>,
    /// Requested effects.
    #[serde(default)]
    pub effects: Vec<EffectRequest>,
}

/// Which observed objects this controller owns, and so may delete when no node desires them.
///
/// An observed object is owned when `value.metadata.labels[label] == manager`. Nodes that own a
/// whole object put that label into the desired object themselves; the engine never adds it,
/// so it never deletes an object it only contributes fields to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership {
    /// The label key, e.g. `app.kubernetes.io/managed-by`.
    pub label: String,
    /// The label value naming this controller.
    pub manager: String,
}

impl Default for Ownership {
    /// `app.kubernetes.io/managed-by=ichor`.
    fn default() -> Self {
        Self::new("app.kubernetes.io/managed-by", "ichor")
    }
}

impl Ownership {
    /// Ownership by the given label and value.
    pub fn new(label: impl Into<String>, manager: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            manager: manager.into(),
        }
    }

    /// Whether this controller owns the observed object.
    pub fn owns(&self, observed: &Object) -> bool {
        observed
            .value
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(|l| l.get(&self.label))
            .and_then(Value::as_str)
            == Some(self.manager.as_str())
    }
}

/// Why a node instance produced what it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "cause", content = "inputs")]
pub enum Cause {
    /// The node instance was evaluated for the first time.
    Initial,
    /// These inputs (named by their upstream node) changed since the last evaluation.
    InputsChanged(Vec<String>),
    /// The node instance went away (its object was deleted).
    Removed,
    /// The desired value did not change, but the observed object differs from it.
    Drift,
    /// An object owned by this controller that no node desires.
    Orphan,
}

/// The reason attached to every action: which node (and instance) and which change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    /// The node that desires (or stopped desiring) the object; `None` for orphans.
    pub node: Option<String>,
    /// The instance key, for a node family.
    pub instance: Option<ObjectKey>,
    /// What changed.
    pub cause: Cause,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.node, &self.instance) {
            (Some(n), Some(i)) => write!(f, "{n}[{i}]: ")?,
            (Some(n), None) => write!(f, "{n}: ")?,
            (None, _) => {}
        }
        match &self.cause {
            Cause::Initial => f.write_str("initial"),
            Cause::InputsChanged(inputs) => write!(f, "input {} changed", inputs.join(", ")),
            Cause::Removed => f.write_str("instance removed"),
            Cause::Drift => f.write_str("observed differs from desired"),
            Cause::Orphan => f.write_str("owned by this controller but desired by no node"),
        }
    }
}

/// One decision of the graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "action")]
pub enum Action {
    /// Apply the owned fields of this object (server-side apply).
    Apply {
        /// The desired, partial object.
        object: Object,
        /// Why.
        reason: Reason,
    },
    /// Delete this owned object.
    Delete {
        /// The object to delete.
        key: ObjectKey,
        /// Why.
        reason: Reason,
    },
    /// Perform this effect.
    Effect {
        /// The request.
        request: EffectRequest,
        /// Why.
        reason: Reason,
    },
}

impl Action {
    /// The reason of the action.
    pub fn reason(&self) -> &Reason {
        match self {
            Action::Apply { reason, .. } | Action::Delete { reason, .. } | Action::Effect { reason, .. } => {
                reason
            }
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Apply { object, reason } => write!(f, "apply {} ({reason})", object.key()),
            Action::Delete { key, reason } => write!(f, "delete {key} ({reason})"),
            Action::Effect { request, reason } => write!(f, "effect {} ({reason})", request.id),
        }
    }
}

/// Whether every field present in `desired` has an equal value in `observed`.
///
/// Objects recurse (extra fields in `observed`, set by other field managers, are ignored);
/// arrays and scalars are compared whole. So a controller never fights another field manager.
pub fn owned_fields_match(desired: &Value, observed: &Value) -> bool {
    match (desired, observed) {
        (Value::Object(d), Value::Object(o)) => d
            .iter()
            .all(|(k, dv)| o.get(k).is_some_and(|ov| owned_fields_match(dv, ov))),
        (d, o) => d == o,
    }
}

/// The action for one key: apply when the desired fields are not all observed, delete when an
/// owned object is no longer desired, nothing otherwise.
pub(crate) fn diff_one(
    desired: Option<(&Object, &Reason)>,
    observed: Option<&Object>,
    key: &ObjectKey,
    ownership: &Ownership,
    no_longer_desired: impl FnOnce() -> Reason,
) -> Option<Action> {
    match (desired, observed) {
        (Some((d, reason)), Some(o)) => (!owned_fields_match(&d.value, &o.value)).then(|| Action::Apply {
            object: d.clone(),
            reason: reason.clone(),
        }),
        (Some((d, reason)), None) => Some(Action::Apply {
            object: d.clone(),
            reason: reason.clone(),
        }),
        (None, Some(o)) => ownership.owns(o).then(|| Action::Delete {
            key: key.clone(),
            reason: no_longer_desired(),
        }),
        (None, None) => None,
    }
}

/// The full diff of desired objects against the observed World.
///
/// Apply where an object's owned fields differ from (or are missing in) the World; delete every
/// owned object of the World that is not desired (reason [`Cause::Orphan`]). Actions come in key
/// order, applies and deletes interleaved. The [`crate::Graph`] computes the same diff
/// incrementally; this function is the reference and the periodic full check.
pub fn diff<'a>(
    desired: impl IntoIterator<Item = (&'a Object, &'a Reason)>,
    observed: &World,
    ownership: &Ownership,
) -> Vec<Action> {
    let desired: std::collections::BTreeMap<ObjectKey, (&Object, &Reason)> =
        desired.into_iter().map(|(o, r)| (o.key(), (o, r))).collect();
    let mut keys: std::collections::BTreeSet<ObjectKey> = desired.keys().cloned().collect();
    keys.extend(observed.iter().filter(|o| ownership.owns(o)).map(Object::key));
    keys.iter()
        .filter_map(|k| {
            diff_one(desired.get(k).copied(), observed.get(k), k, ownership, || {
                Reason {
                    node: None,
                    instance: None,
                    cause: Cause::Orphan,
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;
    use serde_json::json;

    fn reason() -> Reason {
        Reason {
            node: Some("n".into()),
            instance: None,
            cause: Cause::Initial,
        }
    }

    #[test]
    fn ignores_fields_set_by_other_managers() {
        let desired = json!({"spec": {"a": 1, "list": [1, 2]}});
        let observed = json!({"spec": {"a": 1, "b": 2, "list": [1, 2]}, "status": {"x": true}});
        assert!(owned_fields_match(&desired, &observed));
    }

    #[test]
    fn compares_arrays_whole_and_scalars_exactly() {
        assert!(!owned_fields_match(&json!({"l": [1]}), &json!({"l": [1, 2]})));
        assert!(!owned_fields_match(&json!({"a": 1}), &json!({"a": 2})));
        assert!(!owned_fields_match(&json!({"a": {"b": 1}}), &json!({"a": 5})));
        assert!(!owned_fields_match(&json!({"a": null}), &json!({})));
    }

    #[test]
    fn applies_missing_and_differing_objects_and_deletes_only_owned_orphans() {
        let own = Ownership::default();
        let mut w = World::new();
        let label = json!({"metadata": {"labels": {"app.kubernetes.io/managed-by": "ichor"}}});
        w.apply(Event::Applied(Object::new(
            "CM",
            "ns",
            "same",
            json!({"d": 1, "extra": 2}),
        )));
        w.apply(Event::Applied(Object::new(
            "CM",
            "ns",
            "differs",
            json!({"d": 2}),
        )));
        w.apply(Event::Applied(Object::new("CM", "ns", "owned-orphan", label)));
        w.apply(Event::Applied(Object::new(
            "CM",
            "ns",
            "foreign",
            json!({"d": 1}),
        )));
        let desired = [
            Object::new("CM", "ns", "same", json!({"d": 1})),
            Object::new("CM", "ns", "differs", json!({"d": 1})),
            Object::new("CM", "ns", "missing", json!({"d": 1})),
        ];
        let r = reason();
        let actions = diff(desired.iter().map(|o| (o, &r)), &w, &own);
        let summary: Vec<String> = actions.iter().map(ToString::to_string).collect();
        assert_eq!(
            summary,
            vec![
                "apply CM ns/differs (n: initial)",
                "apply CM ns/missing (n: initial)",
                "delete CM ns/owned-orphan (owned by this controller but desired by no node)",
            ]
        );
    }
}
