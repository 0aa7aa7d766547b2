//! Status writes rebased on a fresh read after a conflict: pure functions, no client.
//!
//! The graph computed a status write from the object it observed. When the API server refuses
//! that write (409: the object changed meanwhile), the applier reads the object again and
//! writes the graph's *changes* on top of what is there now: a desired condition equal to the
//! one the graph observed is not a change (the graph kept it as observed), so the fresh one is
//! kept; every other desired condition replaces the fresh condition of its type (keeping the
//! fresh `lastTransitionTime` when the fresh status already equals the desired one).

use serde_json::{Map, Value};

use ichor_reconcile::identity::conditions::LAST_TRANSITION_TIME;

fn conditions(status: Option<&Value>) -> &[Value] {
    status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn type_of(c: &Value) -> Option<&str> {
    c.get("type").and_then(Value::as_str)
}

/// The status to write after a conflict: `desired` (the graph's write, transition times
/// stamped) rebased from `old` (the status the graph saw) onto `fresh` (the status read after
/// the conflict). Fields of `desired` other than `conditions` (`observedGeneration`) are the
/// graph's and are written as desired; other fields of `fresh` are not part of the write.
pub fn rebase_status(old: Option<&Value>, desired: &Value, fresh: Option<&Value>) -> Value {
    let old_conditions = conditions(old);
    let mut out: Vec<Value> = conditions(fresh).to_vec();
    for d in conditions(Some(desired)) {
        if old_conditions.contains(d) {
            continue;
        }
        let Some(type_) = type_of(d) else { continue };
        let mut cond = d.clone();
        match out.iter_mut().find(|c| type_of(c) == Some(type_)) {
            Some(slot) => {
                if slot.get("status") == cond.get("status")
                    && let (Some(t), Some(map)) =
                        (slot.get(LAST_TRANSITION_TIME).cloned(), cond.as_object_mut())
                {
                    map.insert(LAST_TRANSITION_TIME.into(), t);
                }
                *slot = cond;
            }
            None => out.push(cond),
        }
    }
    let mut status: Map<String, Value> = desired.as_object().cloned().unwrap_or_default();
    status.insert("conditions".into(), Value::Array(out));
    Value::Object(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cond(type_: &str, status: &str, reason: &str, time: &str) -> Value {
        json!({"type": type_, "status": status, "reason": reason, "message": "m", LAST_TRANSITION_TIME: time})
    }

    #[test]
    fn a_condition_written_by_someone_else_meanwhile_survives_the_rebase() {
        let old =
            json!({"conditions": [cond("Other", "True", "A", "t0"), cond("Ready", "False", "X", "t0")]});
        let desired =
            json!({"conditions": [cond("Other", "True", "A", "t0"), cond("Ready", "True", "R", "t2")]});
        let fresh =
            json!({"conditions": [cond("Other", "False", "B", "t1"), cond("Ready", "False", "X", "t0")]});
        let out = rebase_status(Some(&old), &desired, Some(&fresh));
        assert_eq!(
            out,
            json!({"conditions": [cond("Other", "False", "B", "t1"), cond("Ready", "True", "R", "t2")]})
        );
    }

    #[test]
    fn a_fresh_condition_already_at_the_desired_status_keeps_its_transition_time() {
        let desired = json!({"conditions": [cond("Ready", "True", "R", "t2")], "observedGeneration": 3});
        let fresh = json!({"conditions": [cond("Ready", "True", "Other", "t1")]});
        let out = rebase_status(None, &desired, Some(&fresh));
        assert_eq!(
            out,
            json!({"conditions": [cond("Ready", "True", "R", "t1")], "observedGeneration": 3})
        );
    }
}
