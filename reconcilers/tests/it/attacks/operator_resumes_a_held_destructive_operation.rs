//! Resuming a destructive operation an admin created paused: the admin held the start right and
//! chose to hold the operation; un-pausing it starts the reset as surely as creating it would.
//! Resuming (`spec.paused` true to false) a destructive operation needs the same `start` right;
//! pausing needs none.

use ichor_controller::admission::fixtures::{OPERATOR, ROOT, operation};
use serde_json::{Value, json};

use ichor_controller::admission::operations::KIND as OPERATION;

use crate::admission::Fakes;

fn held_reset(paused: Value) -> Value {
    let mut op = operation("node", Some("reset"));
    op["spec"]["machines"] = json!(["cp-1"]);
    op["spec"]["paused"] = paused;
    op
}

#[tokio::test]
async fn an_operator_may_not_resume_a_reset_an_admin_holds() {
    let f = Fakes::none();
    for resumed in [json!(false), Value::Null] {
        let mut new = held_reset(resumed);
        if new["spec"]["paused"].is_null() {
            new["spec"].as_object_mut().unwrap().remove("paused");
        }
        let refusal = f
            .decide(OPERATION, "UPDATE", &OPERATOR, new, held_reset(json!(true)))
            .await
            .unwrap_err();
        assert_eq!(
            refusal,
            "spec.paused: resuming a node \"reset\" operation needs verb \"start\" on \
             talosoperations/node-reset in namespace \"ichor-system\", which user \"ichor:olga\" does not hold"
        );
    }
}

#[tokio::test]
async fn an_operator_may_not_change_what_a_held_restore_restores_from() {
    // A field identity does not model (which snapshot an etcd restore uses) is still what the
    // operation does.
    let f = Fakes::none();
    let restore = |snapshot: &str| {
        let mut op = operation("etcd-restore", None);
        op["spec"]["paused"] = json!(true);
        op["spec"]["snapshot"] = json!(snapshot);
        op
    };
    let refusal = f
        .decide(
            OPERATION,
            "UPDATE",
            &OPERATOR,
            restore("planted"),
            restore("nightly"),
        )
        .await
        .unwrap_err();
    assert!(
        refusal.starts_with("spec.kind: changing a \"etcd-restore\" operation"),
        "{refusal}"
    );
}

#[tokio::test]
async fn pausing_needs_nothing_and_an_admin_may_resume() {
    let f = Fakes::none();
    assert_eq!(
        f.decide(
            OPERATION,
            "UPDATE",
            &OPERATOR,
            held_reset(json!(true)),
            held_reset(json!(false))
        )
        .await,
        Ok(())
    );
    assert!(f.reviewer.calls().is_empty(), "pausing asked for no right");
    let admin = Fakes::granting(&[("start", "talosoperations/node-reset")]);
    assert_eq!(
        admin
            .decide(
                OPERATION,
                "UPDATE",
                &ROOT,
                held_reset(json!(false)),
                held_reset(json!(true))
            )
            .await,
        Ok(())
    );
    // A routine operation resumes freely.
    let mut reboot = operation("reboot", None);
    reboot["spec"]["paused"] = json!(true);
    assert_eq!(
        f.decide(OPERATION, "UPDATE", &OPERATOR, operation("reboot", None), reboot)
            .await,
        Ok(())
    );
}
