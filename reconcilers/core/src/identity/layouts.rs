//! Which credentials layouts the running issuer pods understand, and the `IchorInstallation`
//! condition [`CREDENTIALS_LAYOUT_UNDERSTOOD`] (docs/credentials-sharding.md, "Rollback"): an
//! issuer of a release before the per-user layout reads the legacy Secret alone, so while the
//! phase is `migrating` or `returning`, or the legacy Secret is gone, it would lose the sessions
//! of moved users and could read stale legacy copies. The controller cannot stop such a pod; it
//! says so, naming it. Pure.

use std::collections::BTreeMap;

use ichor_graph::{Object, ObjectKey};
use ichor_renderers::auth::credentials::CREDENTIALS_SECRET_NAME;
use ichor_renderers::contract::{
    CREDENTIALS_LAYOUT_UNDERSTOOD, CREDENTIALS_LAYOUTS_ANNOTATION, ISSUER_DEPLOYMENT, ISSUER_POD_SELECTOR,
    LAYOUT_PER_USER,
};
use ichor_renderers::trust::NAMESPACE;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::conditions::{Status, Wanted};
use super::migration::Phase;

/// Whether an object's annotations list [`LAYOUT_PER_USER`] in [`CREDENTIALS_LAYOUTS_ANNOTATION`].
pub(crate) fn lists_per_user(annotations: Option<&Value>) -> bool {
    annotations
        .and_then(|a| a.get(CREDENTIALS_LAYOUTS_ANNOTATION))
        .and_then(Value::as_str)
        .is_some_and(|v| v.split(',').any(|l| l.trim() == LAYOUT_PER_USER))
}

/// The labels of [`ISSUER_POD_SELECTOR`], as a map.
pub(crate) fn issuer_pod_labels() -> BTreeMap<&'static str, &'static str> {
    ISSUER_POD_SELECTOR
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .collect()
}

/// Whether every issuer replica, running or terminating, understands the per-user layout:
/// `None` when so, else why not (a sentence naming the object in the way).
///
/// The Deployment must have observed its latest spec (`status.observedGeneration ==
/// metadata.generation`: no rollout to another template is still to start), its template must
/// list `per-user` in [`CREDENTIALS_LAYOUTS_ANNOTATION`], and it must select pods by exactly
/// [`ISSUER_POD_SELECTOR`] (the pods the controller watches); every such pod, terminating ones
/// included (one serves for its `preStop` delay), must carry the annotation too, and the pods
/// seen must be at least as many as the Deployment's `status.replicas` (a list of pods the
/// controller may not read is treated as empty, and must not pass for "no old pod").
pub fn issuer_blocker(deployment: &Option<Object>, pods: &BTreeMap<ObjectKey, Object>) -> Option<String> {
    let name = format!("Deployment {NAMESPACE}/{ISSUER_DEPLOYMENT}");
    let Some(d) = deployment else {
        return Some(format!("{name} is not observed"));
    };
    let v = &d.value;
    let generation = v.pointer("/metadata/generation").and_then(Value::as_i64);
    let observed = v.pointer("/status/observedGeneration").and_then(Value::as_i64);
    if generation.is_none() || generation != observed {
        return Some(format!(
            "{name} has not observed its latest spec (generation {}, observedGeneration {}): a rollout may be pending",
            generation.map_or("none".to_owned(), |g| g.to_string()),
            observed.map_or("none".to_owned(), |g| g.to_string()),
        ));
    }
    if !lists_per_user(v.pointer("/spec/template/metadata/annotations")) {
        return Some(format!(
            "the pod template of {name} does not list {LAYOUT_PER_USER} in {CREDENTIALS_LAYOUTS_ANNOTATION}"
        ));
    }
    let wanted = issuer_pod_labels();
    let selector = v.pointer("/spec/selector");
    let match_labels: BTreeMap<&str, &str> = selector
        .and_then(|s| s.get("matchLabels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
                .collect()
        })
        .unwrap_or_default();
    let expressions = selector
        .and_then(|s| s.get("matchExpressions"))
        .and_then(Value::as_array)
        .is_some_and(|e| !e.is_empty());
    if match_labels != wanted || expressions {
        return Some(format!(
            "{name} selects its pods by another selector than {ISSUER_POD_SELECTOR}, the one the controller watches"
        ));
    }
    // Fewer pods seen than the Deployment counts (a refused or lagging list of pods, which the
    // watch treats as empty): what is not seen cannot be vouched for.
    let running = issuer_pods(pods)
        .filter(|p| {
            p.value
                .pointer("/metadata/deletionTimestamp")
                .is_none_or(Value::is_null)
        })
        .count();
    if let Some(replicas) = v.pointer("/status/replicas").and_then(Value::as_u64)
        && (running as u64) < replicas
    {
        return Some(format!(
            "the controller sees {running} of the {replicas} pods of {name}: it may not list them, or its view lags"
        ));
    }
    unaware_issuer_pod(pods)
        .map(|pod| format!("{pod} does not list {LAYOUT_PER_USER} in {CREDENTIALS_LAYOUTS_ANNOTATION}"))
}

/// What the issuer pods understand: why they do not all allow the switch
/// ([`issuer_blocker`]) and the first pod of a release before the per-user layout
/// ([`unaware_issuer_pod`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issuers {
    /// Why the switch to `migrating` must wait for the issuers, `None` when it need not.
    pub blocker: Option<String>,
    /// The first issuer pod that does not list the per-user layout.
    pub unaware: Option<String>,
}

/// The issuer Deployment and its pods → [`Issuers`].
pub fn issuers(deployment: &Option<Object>, pods: &BTreeMap<ObjectKey, Object>) -> Issuers {
    Issuers {
        blocker: issuer_blocker(deployment, pods),
        unaware: unaware_issuer_pod(pods),
    }
}

/// The issuer pods among `pods`: in the issuer's namespace, carrying every label of
/// [`ISSUER_POD_SELECTOR`].
fn issuer_pods(pods: &BTreeMap<ObjectKey, Object>) -> impl Iterator<Item = &Object> {
    let wanted = issuer_pod_labels();
    pods.values()
        .filter(|p| p.namespace == NAMESPACE)
        .filter(move |p| {
            wanted.iter().all(|(k, val)| {
                p.value
                    .pointer("/metadata/labels")
                    .and_then(|l| l.get(k))
                    .and_then(Value::as_str)
                    == Some(val)
            })
        })
}

/// The first issuer pod (by name) that does not list [`LAYOUT_PER_USER`], running or
/// terminating (a terminating pod serves for its `preStop` delay), as `issuer pod
/// <namespace>/<name>` (with ` (terminating)`); `None` when every one lists it. A pod is an
/// issuer pod when it carries every label of [`ISSUER_POD_SELECTOR`] in the issuer's namespace.
pub fn unaware_issuer_pod(pods: &BTreeMap<ObjectKey, Object>) -> Option<String> {
    let mut unaware: Vec<&Object> = issuer_pods(pods)
        .filter(|p| !lists_per_user(p.value.pointer("/metadata/annotations")))
        .collect();
    unaware.sort_by(|a, b| a.name.cmp(&b.name));
    unaware.first().map(|p| {
        let terminating = p
            .value
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null());
        format!(
            "issuer pod {NAMESPACE}/{}{}",
            p.name,
            if terminating { " (terminating)" } else { "" }
        )
    })
}

/// The [`CREDENTIALS_LAYOUT_UNDERSTOOD`] condition for the legacy Secret's phase and the first
/// issuer pod that does not list the per-user layout ([`unaware_issuer_pod`]).
///
/// False only when such a pod runs while the per-user layout is in use (`migrating`,
/// `returning`, or the legacy Secret gone); in phase `legacy` (or before it is written) every
/// entry is in the legacy Secret, which every release reads, so it is True.
pub(crate) fn layout_condition(phase: &Phase, unaware: Option<&str>) -> Wanted {
    let secret = format!("{NAMESPACE}/{CREDENTIALS_SECRET_NAME}");
    let in_use = match phase {
        Phase::Migrating => Some(format!("the phase of {secret} is migrating")),
        Phase::Returning => Some(format!("the phase of {secret} is returning")),
        Phase::Absent => Some(format!(
            "{secret} is gone (every entry is in its user's own Secret)"
        )),
        Phase::Unannotated | Phase::Legacy | Phase::Unknown(_) => None,
    };
    match (in_use, unaware) {
        (Some(in_use), Some(pod)) => Wanted {
            type_: CREDENTIALS_LAYOUT_UNDERSTOOD,
            status: Status::False,
            reason: "IssuerReleaseTooOld".to_owned(),
            message: format!(
                "{pod} does not list {LAYOUT_PER_USER} in {CREDENTIALS_LAYOUTS_ANNOTATION}: it is of a release \
                 before the per-user layout, which must not run while {in_use}; it reads the legacy Secret \
                 alone, so it loses the sessions of users whose entry moved and can read stale copies. Roll \
                 Deployment {NAMESPACE}/{ISSUER_DEPLOYMENT} forward to this release; to go back to an earlier \
                 release, first set spec.users.credentialsLayout: legacy and wait for the phase legacy"
            ),
        },
        (Some(in_use), None) => Wanted {
            type_: CREDENTIALS_LAYOUT_UNDERSTOOD,
            status: Status::True,
            reason: "EveryIssuerUnderstands".to_owned(),
            message: format!(
                "{in_use}, and every issuer pod lists {LAYOUT_PER_USER} in {CREDENTIALS_LAYOUTS_ANNOTATION}"
            ),
        },
        (None, _) => Wanted {
            type_: CREDENTIALS_LAYOUT_UNDERSTOOD,
            status: Status::True,
            reason: "LegacyLayout".to_owned(),
            message: format!("every entry is in {secret}, which issuers of every release read"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, layouts: Option<&str>, terminating: bool, issuer: bool) -> (ObjectKey, Object) {
        let component = if issuer { "issuer" } else { "ui-static" };
        let mut meta = json!({"name": name,
            "labels": {"app.kubernetes.io/name": "ichor", "app.kubernetes.io/component": component}});
        if let Some(l) = layouts {
            meta["annotations"] = json!({CREDENTIALS_LAYOUTS_ANNOTATION: l});
        }
        if terminating {
            meta["deletionTimestamp"] = json!("2027-01-01T00:00:00Z");
        }
        let o = Object::new("Pod", NAMESPACE, name, json!({"metadata": meta}));
        (o.key(), o)
    }

    fn pods(list: &[(ObjectKey, Object)]) -> BTreeMap<ObjectKey, Object> {
        list.iter().cloned().collect()
    }

    #[test]
    fn the_first_issuer_pod_without_per_user_is_named_terminating_ones_included() {
        let new = pod("ichor-issuer-b", Some("legacy,per-user"), false, true);
        let old = pod("ichor-issuer-z", Some("legacy"), true, true);
        let other = pod("ichor-issuer-a", None, false, false);
        assert_eq!(unaware_issuer_pod(&pods(&[new.clone(), other.clone()])), None);
        assert_eq!(
            unaware_issuer_pod(&pods(&[new, old, other])).as_deref(),
            Some("issuer pod ichor-system/ichor-issuer-z (terminating)")
        );
        let bare = pod("ichor-issuer-c", None, false, true);
        assert_eq!(
            unaware_issuer_pod(&pods(&[bare])).as_deref(),
            Some("issuer pod ichor-system/ichor-issuer-c")
        );
    }

    #[test]
    fn an_old_issuer_is_false_only_while_the_per_user_layout_is_in_use() {
        let pod = Some("issuer pod ichor-system/ichor-issuer-old");
        for phase in [Phase::Migrating, Phase::Returning, Phase::Absent] {
            let c = layout_condition(&phase, pod);
            assert_eq!(c.status, Status::False, "{phase:?}");
            assert_eq!(c.reason, "IssuerReleaseTooOld");
            assert!(
                c.message.contains("ichor-system/ichor-issuer-old"),
                "{}",
                c.message
            );
            assert!(c.message.contains("must not run"), "{}", c.message);
            assert!(c.message.contains("credentialsLayout: legacy"), "{}", c.message);
            assert_eq!(layout_condition(&phase, None).status, Status::True, "{phase:?}");
        }
        assert!(
            layout_condition(&Phase::Migrating, pod)
                .message
                .contains("is migrating")
        );
        assert!(layout_condition(&Phase::Absent, pod).message.contains("is gone"));
        for phase in [Phase::Legacy, Phase::Unannotated, Phase::Unknown("x".into())] {
            let c = layout_condition(&phase, pod);
            assert_eq!(c.status, Status::True, "{phase:?}");
            assert_eq!(c.reason, "LegacyLayout");
        }
    }
}
