//! Shapes of `TalosOperation` the start check did not read: `kind: node` with no action (which
//! a lenient reader may default), and an `action` on a kind other than `node` (`kind: reboot,
//! action: reset`, which a reader keyed on the action may run as a reset). Both are refused,
//! naming `spec.action`, on create and on an update that writes them, whoever asks.

use ichor_controller::admission::fixtures::{OPERATOR, ROOT, operation};
use serde_json::{Value, json};

use ichor_controller::admission::operations::KIND as OPERATION;

use crate::admission::Fakes;

/// Every right there is: the refusal is about the shape, not the caller.
fn all_rights() -> Fakes {
    Fakes::granting(&[
        ("start", "talosoperations/node-reset"),
        ("start", "talosoperations/node-shutdown"),
        ("start", "talosoperations/shutdown"),
    ])
}

#[tokio::test]
async fn a_node_operation_without_an_action_is_refused() {
    for who in [&OPERATOR, &ROOT] {
        let f = all_rights();
        let bare = operation("node", None);
        assert_eq!(
            f.decide(OPERATION, "CREATE", who, bare.clone(), Value::Null).await,
            Err("spec.action: an operation of kind \"node\" needs an action; set one of reset, shutdown, reboot"
                .to_owned())
        );
        let refusal = f
            .decide(OPERATION, "UPDATE", who, bare, operation("node", Some("reboot")))
            .await;
        assert!(refusal.is_err_and(|e| e.starts_with("spec.action: ")));
    }
}

#[tokio::test]
async fn an_action_on_a_kind_other_than_node_is_refused() {
    for (kind, action) in [
        ("reboot", "reset"),
        ("upgrade", "shutdown"),
        ("config", "reboot"),
        ("shutdown", "reset"),
        ("reboot", ""),
    ] {
        let f = all_rights();
        let mut op = operation(kind, None);
        op["spec"]["action"] = json!(action);
        assert_eq!(
            f.decide(OPERATION, "CREATE", &OPERATOR, op.clone(), Value::Null)
                .await,
            Err(format!(
                "spec.action: only an operation of kind \"node\" takes an action; remove it from this \
                 {kind:?} operation"
            )),
            "{kind} {action}"
        );
        assert!(
            f.decide(OPERATION, "UPDATE", &ROOT, op, operation(kind, None))
                .await
                .is_err_and(|e| e.starts_with("spec.action: ")),
            "{kind} {action}"
        );
    }
}

#[tokio::test]
async fn an_operation_stored_in_a_refused_shape_is_checked_when_edited_or_resumed() {
    let f = all_rights();
    // A `node` operation with no action, stored before that shape was refused, paused.
    let mut stored = operation("node", None);
    stored["spec"]["paused"] = json!(true);
    // Resumed as it stands.
    let mut resumed = stored.clone();
    resumed["spec"]["paused"] = json!(false);
    assert!(
        f.decide(OPERATION, "UPDATE", &ROOT, resumed, stored.clone())
            .await
            .is_err_and(|e| e.starts_with("spec.action: ")),
    );
    // Edited (its machines) with the kind and action left as they are.
    let mut edited = stored.clone();
    edited["spec"]["machines"] = json!(["cp-1"]);
    assert!(
        f.decide(OPERATION, "UPDATE", &OPERATOR, edited, stored.clone())
            .await
            .is_err_and(|e| e.starts_with("spec.action: ")),
    );
    // Labels and finalizers stay free, so such an operation can still be cleaned up.
    let mut relabelled = stored.clone();
    relabelled["metadata"]["labels"] = json!({"team": "infra"});
    assert_eq!(
        f.decide(OPERATION, "UPDATE", &OPERATOR, relabelled, stored).await,
        Ok(())
    );
}
