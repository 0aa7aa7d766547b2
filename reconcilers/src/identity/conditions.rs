//! Status conditions written by the graph, with the fixed point kept: a condition whose status,
//! reason and message are already observed is not rewritten, and `lastTransitionTime` changes
//! only when the status changes (Kubernetes convention; a new reason or message alone keeps the
//! observed time).
//!
//! A write is computed in two steps so that only the objects that actually change depend on the
//! clock: [`merge`] decides, without time, whether a write is needed and leaves the transition
//! times it cannot know as `null`; [`stamp`] fills them with `now`.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A condition the graph wants on an object (without its time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wanted {
    pub(crate) type_: &'static str,
    pub(crate) status: bool,
    pub(crate) reason: String,
    pub(crate) message: String,
}

/// A status write the graph wants: the whole `conditions` list (conditions of other types kept
/// as observed, since lists are compared and written whole) and, for kinds that have it,
/// `status.observedGeneration`. Condition times still `null` are stamped with `now`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusWrite {
    /// The full conditions list to write.
    pub conditions: Vec<Value>,
    /// `status.observedGeneration` to write, when the kind has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

fn status_text(status: bool) -> &'static str {
    if status { "True" } else { "False" }
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
    let mut out: Vec<Value> = observed.to_vec();
    let mut changed = generation.is_some() && generation != observed_generation;
    for w in wanted {
        let status = status_text(w.status);
        let index = out
            .iter()
            .position(|c| c.get("type").and_then(Value::as_str) == Some(w.type_));
        let current = index.and_then(|i| out.get(i));
        let field = |name: &str| current.and_then(|c| c.get(name)).and_then(Value::as_str);
        let same = field("status") == Some(status)
            && field("reason") == Some(w.reason.as_str())
            && field("message") == Some(w.message.as_str())
            && (generation.is_none()
                || current
                    .and_then(|c| c.get("observedGeneration"))
                    .and_then(Value::as_i64)
                    == generation);
        if same {
            continue;
        }
        changed = true;
        let time = match current {
            Some(c) if field("status") == Some(status) => {
                c.get("lastTransitionTime").cloned().unwrap_or(Value::Null)
            }
            _ => Value::Null,
        };
        let mut cond = Map::new();
        cond.insert("type".into(), json!(w.type_));
        cond.insert("status".into(), json!(status));
        cond.insert("reason".into(), json!(w.reason));
        cond.insert("message".into(), json!(w.message));
        cond.insert("lastTransitionTime".into(), time);
        if let Some(g) = generation {
            cond.insert("observedGeneration".into(), json!(g));
        }
        match index.and_then(|i| out.get_mut(i)) {
            Some(slot) => *slot = Value::Object(cond),
            None => out.push(Value::Object(cond)),
        }
    }
    changed.then_some(StatusWrite {
        conditions: out,
        observed_generation: generation,
    })
}

/// `now` as Kubernetes writes a `metav1.Time`: RFC 3339 in UTC, whole seconds.
pub(crate) fn kube_time(now: Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The `status` object of a write, with every `null` transition time set to `now`.
pub(crate) fn stamp(write: &StatusWrite, now: Timestamp) -> Value {
    let time = kube_time(now);
    let conditions: Vec<Value> = write
        .conditions
        .iter()
        .map(|c| {
            let mut c = c.clone();
            if let Some(t) = c.get_mut("lastTransitionTime")
                && t.is_null()
            {
                *t = Value::String(time.clone());
            }
            c
        })
        .collect();
    let mut status = Map::new();
    status.insert("conditions".into(), Value::Array(conditions));
    if let Some(g) = write.observed_generation {
        status.insert("observedGeneration".into(), json!(g));
    }
    Value::Object(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(status: bool, reason: &str) -> Wanted {
        Wanted {
            type_: "Ready",
            status,
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
    fn a_new_status_waits_for_a_time_and_keeps_other_conditions() {
        let other = json!({"type": "Other", "status": "True"});
        let observed = vec![
            other.clone(),
            json!({"type": "Ready", "status": "True", "reason": "R", "message": "m",
                "lastTransitionTime": "2027-01-01T00:00:00Z"}),
        ];
        let w = merge(&observed, &[ready(false, "X")], None, None).unwrap();
        assert_eq!(w.conditions[0], other);
        assert_eq!(w.conditions[1]["lastTransitionTime"], Value::Null);
        let status = stamp(&w, t("2027-02-03T04:05:06.789Z"));
        assert_eq!(
            status["conditions"][1]["lastTransitionTime"],
            "2027-02-03T04:05:06Z"
        );
        assert_eq!(status["conditions"][1]["status"], "False");
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
