//! Status conditions written by the graph, with the fixed point kept: a condition whose status,
//! reason and message are already observed is not rewritten, and `lastTransitionTime` changes
//! only when the status changes (Kubernetes convention; a new reason or message alone keeps the
//! observed time).
//!
//! # Who stamps `lastTransitionTime`: the applier
//!
//! No node of the graph reads the clock for a status write, so a tick never recomputes the
//! conditions of every user and machine. [`merge`] decides, without time, whether a write is
//! needed, and the write it returns follows this contract:
//!
//! - a condition whose status is unchanged is exactly the observed one (its `lastTransitionTime`
//!   kept), with the new reason, message and `observedGeneration`;
//! - a condition whose status changed, or that is new, carries **no** `lastTransitionTime`
//!   field at all: the applier sets it to the time it writes the status
//!   ([`stamp_transition_times`] does it on a desired status object).
//!
//! Once the stamped write is observed, [`merge`] finds every wanted condition already there and
//! returns `None`: the desired status disappears, which is the fixed point (the diff compares
//! lists whole, so a desired list without the times could never equal the observed one).

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The field the applier stamps (see the module documentation).
pub const LAST_TRANSITION_TIME: &str = "lastTransitionTime";

/// A condition's `status`: Kubernetes' `True`, `False` or `Unknown` (the controller cannot tell
/// yet, and says why in the reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    True,
    False,
    Unknown,
}

impl From<bool> for Status {
    fn from(known: bool) -> Self {
        if known { Status::True } else { Status::False }
    }
}

impl Status {
    /// The status a `status` field's text names, `None` for any other text.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "True" => Some(Status::True),
            "False" => Some(Status::False),
            "Unknown" => Some(Status::Unknown),
            _ => None,
        }
    }

    /// The `status` field's text.
    pub(crate) fn text(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }
}

/// A condition the graph wants on an object (without its time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wanted {
    pub(crate) type_: &'static str,
    pub(crate) status: Status,
    pub(crate) reason: String,
    pub(crate) message: String,
}

/// A status write the graph wants: the whole `conditions` list (conditions of other types kept
/// as observed, since lists are compared and written whole) and, for kinds that have it,
/// `status.observedGeneration`.
///
/// **Contract with the applier:** a condition without a `lastTransitionTime` field changed its
/// status (or is new); the applier sets that field to the time of the write, in the
/// `metav1.Time` format ([`kube_time`]), and writes every other condition as given. A condition
/// that has the field keeps it (the status did not change). See [`stamp_transition_times`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusWrite {
    /// The full conditions list to write.
    pub conditions: Vec<Value>,
    /// `status.observedGeneration` to write, when the kind has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl StatusWrite {
    /// The `status` object of the write as the graph desires it (transition times of changed
    /// conditions left for the applier).
    pub fn status(&self) -> Value {
        let mut status = Map::new();
        status.insert("conditions".into(), Value::Array(self.conditions.clone()));
        if let Some(g) = self.observed_generation {
            status.insert("observedGeneration".into(), json!(g));
        }
        Value::Object(status)
    }

    /// [`StatusWrite::status`], consuming the write (its conditions are moved, not copied).
    pub fn into_status(self) -> Value {
        let mut status = Map::new();
        status.insert("conditions".into(), Value::Array(self.conditions));
        if let Some(g) = self.observed_generation {
            status.insert("observedGeneration".into(), json!(g));
        }
        Value::Object(status)
    }
}

fn str_field<'a>(c: Option<&'a Value>, name: &str) -> Option<&'a str> {
    c.and_then(|c| c.get(name)).and_then(Value::as_str)
}

/// The write needed to make `observed` carry `wanted`, or `None` when nothing differs.
///
/// `generation`, when given, is written as each wanted condition's `observedGeneration` and as
/// `status.observedGeneration` (`observed_generation` is the one currently observed).
pub(crate) fn merge(
    observed: &[Value],
    wanted: &[Wanted],
    generation: Option<i64>,
    observed_generation: Option<i64>,
) -> Option<StatusWrite> {
    let find = |type_: &str| {
        observed
            .iter()
            .position(|c| c.get("type").and_then(Value::as_str) == Some(type_))
    };
    // Most evaluations find everything observed: decide that without copying anything.
    let generation_differs = generation.is_some() && generation != observed_generation;
    let same = |w: &Wanted, current: Option<&Value>| {
        str_field(current, "status") == Some(w.status.text())
            && str_field(current, "reason") == Some(w.reason.as_str())
            && str_field(current, "message") == Some(w.message.as_str())
            && (generation.is_none()
                || current
                    .and_then(|c| c.get("observedGeneration"))
                    .and_then(Value::as_i64)
                    == generation)
    };
    if !generation_differs
        && wanted
            .iter()
            .all(|w| same(w, find(w.type_).and_then(|i| observed.get(i))))
    {
        return None;
    }
    let mut out: Vec<Value> = observed.to_vec();
    for w in wanted {
        let status = w.status.text();
        let index = find(w.type_);
        let current = index.and_then(|i| observed.get(i));
        if same(w, current) {
            continue;
        }
        let mut cond = Map::new();
        cond.insert("type".into(), json!(w.type_));
        cond.insert("status".into(), json!(status));
        cond.insert("reason".into(), json!(w.reason));
        cond.insert("message".into(), json!(w.message));
        // The status is unchanged: keep the observed time. Otherwise leave it to the applier.
        if str_field(current, "status") == Some(status)
            && let Some(t) = current.and_then(|c| c.get(LAST_TRANSITION_TIME))
        {
            cond.insert(LAST_TRANSITION_TIME.into(), t.clone());
        }
        if let Some(g) = generation {
            cond.insert("observedGeneration".into(), json!(g));
        }
        match index.and_then(|i| out.get_mut(i)) {
            Some(slot) => *slot = Value::Object(cond),
            None => out.push(Value::Object(cond)),
        }
    }
    Some(StatusWrite {
        conditions: out,
        observed_generation: generation,
    })
}

/// `now` as Kubernetes writes a `metav1.Time`: RFC 3339 in UTC, whole seconds.
pub fn kube_time(now: Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The applier's half of the contract: sets `lastTransitionTime` to `now` on every condition of
/// `status.conditions` in a desired object's value that has none. Returns how many it stamped.
pub fn stamp_transition_times(value: &mut Value, now: Timestamp) -> usize {
    let Some(conditions) = value
        .get_mut("status")
        .and_then(|s| s.get_mut("conditions"))
        .and_then(Value::as_array_mut)
    else {
        return 0;
    };
    let mut time: Option<String> = None;
    let mut stamped = 0;
    for c in conditions.iter_mut().filter_map(Value::as_object_mut) {
        if !c.contains_key(LAST_TRANSITION_TIME) {
            let t = time.get_or_insert_with(|| kube_time(now)).clone();
            c.insert(LAST_TRANSITION_TIME.into(), Value::String(t));
            stamped += 1;
        }
    }
    stamped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(status: bool, reason: &str) -> Wanted {
        Wanted {
            type_: "Ready",
            status: status.into(),
            reason: reason.into(),
            message: "m".into(),
        }
    }

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn an_equal_condition_is_not_rewritten() {
        let observed = vec![
            json!({"type": "Ready", "status": "True", "reason": "R", "message": "m",
            "lastTransitionTime": "2027-01-01T00:00:00Z"}),
        ];
        assert_eq!(merge(&observed, &[ready(true, "R")], None, None), None);
    }

    #[test]
    fn a_new_status_carries_no_time_and_keeps_other_conditions() {
        let other = json!({"type": "Other", "status": "True"});
        let observed = vec![
            other.clone(),
            json!({"type": "Ready", "status": "True", "reason": "R", "message": "m",
                "lastTransitionTime": "2027-01-01T00:00:00Z"}),
        ];
        let w = merge(&observed, &[ready(false, "X")], None, None).unwrap();
        assert_eq!(w.conditions[0], other);
        assert_eq!(w.conditions[1].get(LAST_TRANSITION_TIME), None);
        assert_eq!(w.conditions[1]["status"], "False");
    }

    #[test]
    fn a_new_condition_carries_no_time() {
        let w = merge(&[], &[ready(true, "R")], Some(1), None).unwrap();
        assert_eq!(w.conditions[0].get(LAST_TRANSITION_TIME), None);
        assert_eq!(w.status()["observedGeneration"], 1);
    }

    #[test]
    fn the_applier_stamps_only_conditions_without_a_time_and_the_write_then_settles() {
        let observed = vec![
            json!({"type": "Ready", "status": "True", "reason": "R", "message": "m",
                "lastTransitionTime": "2027-01-01T00:00:00Z"}),
        ];
        let wanted = [
            ready(false, "X"),
            Wanted {
                type_: "Other",
                ..ready(true, "R")
            },
        ];
        let w = merge(&observed, &wanted, None, None).unwrap();
        let mut desired = json!({ "status": w.status() });
        assert_eq!(
            stamp_transition_times(&mut desired, t("2027-02-03T04:05:06.789Z")),
            2
        );
        assert_eq!(
            desired["status"]["conditions"][0][LAST_TRANSITION_TIME],
            "2027-02-03T04:05:06Z"
        );
        // Stamping twice changes nothing: a stamped condition keeps its time.
        assert_eq!(stamp_transition_times(&mut desired, t("2028-01-01T00:00:00Z")), 0);
        let written = desired["status"]["conditions"].as_array().cloned().unwrap();
        assert_eq!(merge(&written, &wanted, None, None), None);
    }

    #[test]
    fn a_new_reason_with_the_same_status_keeps_the_observed_time() {
        let observed = vec![
            json!({"type": "Ready", "status": "False", "reason": "A", "message": "m",
            "lastTransitionTime": "2027-01-01T00:00:00Z"}),
        ];
        let w = merge(&observed, &[ready(false, "B")], None, None).unwrap();
        assert_eq!(w.conditions[0]["lastTransitionTime"], "2027-01-01T00:00:00Z");
        assert_eq!(w.conditions[0]["reason"], "B");
    }

    #[test]
    fn a_new_generation_is_a_write() {
        let observed = vec![
            json!({"type": "Ready", "status": "True", "reason": "R", "message": "m",
            "lastTransitionTime": "2027-01-01T00:00:00Z", "observedGeneration": 1}),
        ];
        assert_eq!(merge(&observed, &[ready(true, "R")], Some(1), Some(1)), None);
        let w = merge(&observed, &[ready(true, "R")], Some(2), Some(1)).unwrap();
        assert_eq!(w.conditions[0]["observedGeneration"], 2);
        assert_eq!(w.conditions[0]["lastTransitionTime"], "2027-01-01T00:00:00Z");
    }
}
