//! `TalosOperation`: a destructive kind needs `start` on its subresource of `talosoperations`;
//! the controller's own identity is exempt.

use ichor_controller::admission::access::ichor_attributes;
use ichor_controller::admission::controller_identity;
use ichor_controller::admission::fixtures::{NAMESPACE, OPERATOR, ROOT, VIEWER, Who, operation};
use serde_json::Value;

use super::{Denied, Fakes, OPERATION, assert_denied};

#[tokio::test]
async fn destructive_kinds_need_start_on_their_subresource() {
    let cases = [
        ("shutdown", None, "shutdown"),
        ("ca-rotation", None, "ca-rotation"),
        ("etcd-restore", None, "etcd-restore"),
        ("node", Some("reset"), "node-reset"),
        ("node", Some("shutdown"), "node-shutdown"),
    ];
    for (kind, action, sub) in cases {
        let right = format!("talosoperations/{sub}");
        let allowed = Fakes::granting(&[("start", right.as_str())]);
        assert_eq!(
            allowed
                .decide(OPERATION, "CREATE", &ROOT, operation(kind, action), Value::Null)
                .await,
            Ok(()),
            "{kind} {action:?}"
        );
        assert_eq!(
            allowed.reviewer.calls()[0].1,
            ichor_attributes("start", "talosoperations", sub, NAMESPACE, "op-1")
        );
        assert_denied(
            Fakes::none()
                .decide(
                    OPERATION,
                    "CREATE",
                    &OPERATOR,
                    operation(kind, action),
                    Value::Null,
                )
                .await,
            &[Denied::Contains(&format!("verb \"start\" on {right}"))],
        );
    }
}

#[tokio::test]
async fn the_denial_names_the_field() {
    let f = Fakes::none();
    assert_eq!(
        f.decide(OPERATION, "CREATE", &OPERATOR, operation("ca-rotation", None), Value::Null).await,
        Err("spec.kind: starting a \"ca-rotation\" operation needs verb \"start\" on talosoperations/ca-rotation in \
             namespace \"ichor-system\", which user \"ichor:olga\" does not hold"
            .to_owned())
    );
    assert_denied(
        f.decide(
            OPERATION,
            "CREATE",
            &OPERATOR,
            operation("node", Some("reset")),
            Value::Null,
        )
        .await,
        &[Denied::StartsWith("spec.action: starting a node \"reset\"")],
    );
}

#[tokio::test]
async fn other_kinds_need_no_right() {
    let f = Fakes::none();
    for (kind, action) in [
        ("config", None),
        ("node", Some("reboot")),
        ("upgrade", None),
        ("cni", None),
        ("reboot", None),
        ("service-restart", None),
    ] {
        assert_eq!(
            f.decide(OPERATION, "CREATE", &VIEWER, operation(kind, action), Value::Null)
                .await,
            Ok(()),
            "{kind}"
        );
    }
    assert!(f.reviewer.calls().is_empty());
}

#[tokio::test]
async fn the_controllers_own_identity_is_exempt() {
    let f = Fakes::none();
    let me = controller_identity(NAMESPACE);
    let controller = Who {
        user: &me,
        groups: &["system:serviceaccounts", "system:serviceaccounts:ichor-system"],
    };
    let restore = || operation("etcd-restore", None);
    assert_eq!(
        f.decide(OPERATION, "CREATE", &controller, restore(), Value::Null)
            .await,
        Ok(())
    );
    assert!(f.reviewer.calls().is_empty());
    // Another ServiceAccount of the same namespace is not.
    let other = Who {
        user: "system:serviceaccount:ichor-system:ichor-ui",
        groups: &[],
    };
    assert!(
        f.decide(OPERATION, "CREATE", &other, restore(), Value::Null)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn an_update_that_makes_an_operation_destructive_needs_start() {
    let f = Fakes::none();
    let reboot = || operation("node", Some("reboot"));
    for (kind, action, right) in [
        ("node", Some("reset"), "talosoperations/node-reset"),
        ("node", Some("shutdown"), "talosoperations/node-shutdown"),
        ("shutdown", None, "talosoperations/shutdown"),
    ] {
        assert_denied(
            f.decide(OPERATION, "UPDATE", &OPERATOR, operation(kind, action), reboot())
                .await,
            &[
                Denied::Contains(&format!("verb \"start\" on {right}")),
                Denied::Contains("changing a"),
            ],
        );
    }
    let allowed = Fakes::granting(&[("start", "talosoperations/node-reset")]);
    assert_eq!(
        allowed
            .decide(
                OPERATION,
                "UPDATE",
                &ROOT,
                operation("node", Some("reset")),
                reboot()
            )
            .await,
        Ok(())
    );
}

#[tokio::test]
async fn retargeting_a_destructive_operation_needs_start_and_pausing_it_does_not() {
    let f = Fakes::none();
    let reset = |cluster: &str, machines: &[&str], paused: bool| {
        let mut op = operation("node", Some("reset"));
        op["spec"]["cluster"] = serde_json::json!(cluster);
        op["spec"]["machines"] = serde_json::json!(machines);
        op["spec"]["paused"] = serde_json::json!(paused);
        op
    };
    // Another machine, another cluster.
    for new in [
        reset("prod", &["cp-2"], false),
        reset("staging", &["cp-1"], false),
    ] {
        assert_denied(
            f.decide(
                OPERATION,
                "UPDATE",
                &OPERATOR,
                new,
                reset("prod", &["cp-1"], false),
            )
            .await,
            &[Denied::Contains("verb \"start\" on talosoperations/node-reset")],
        );
    }
    assert_eq!(
        f.decide(
            OPERATION,
            "UPDATE",
            &OPERATOR,
            reset("prod", &["cp-1"], true),
            reset("prod", &["cp-1"], false)
        )
        .await,
        Ok(()),
        "pausing"
    );
    assert_eq!(
        f.reviewer.calls().len(),
        2,
        "the two retargets asked for the right; pausing asked for none"
    );
    // Resuming starts it again: the same right.
    assert_denied(
        f.decide(
            OPERATION,
            "UPDATE",
            &OPERATOR,
            reset("prod", &["cp-1"], false),
            reset("prod", &["cp-1"], true),
        )
        .await,
        &[Denied::StartsWith(
            "spec.paused: resuming a node \"reset\" operation needs verb \"start\" on talosoperations/node-reset",
        )],
    );
}

#[tokio::test]
async fn unknown_or_oddly_spelled_kinds_and_actions_are_refused() {
    let f = Fakes::granting(&[("start", "talosoperations/shutdown")]);
    for (kind, action, field) in [
        ("Shutdown", None, "spec.kind"),
        ("shutdown ", None, "spec.kind"),
        ("etcd_restore", None, "spec.kind"),
        ("ca-rotation\u{200b}", None, "spec.kind"),
        ("teleport", None, "spec.kind"),
        ("node", Some("Reset"), "spec.action"),
    ] {
        assert_denied(
            f.decide(OPERATION, "CREATE", &ROOT, operation(kind, action), Value::Null)
                .await,
            &[Denied::StartsWith(&format!("{field}: "))],
        );
        assert_denied(
            f.decide(
                OPERATION,
                "UPDATE",
                &ROOT,
                operation(kind, action),
                operation("config", None),
            )
            .await,
            &[Denied::StartsWith(&format!("{field}: "))],
        );
    }
    // An object stored before this rule keeps working for what does not change it.
    let mut paused = operation("teleport", None);
    paused["spec"]["paused"] = serde_json::json!(true);
    assert_eq!(
        f.decide(
            OPERATION,
            "UPDATE",
            &OPERATOR,
            paused,
            operation("teleport", None)
        )
        .await,
        Ok(())
    );
}

#[tokio::test]
async fn a_talos_operation_delete_is_refused_as_not_admitted() {
    let f = Fakes::none();
    let config = || operation("config", None);
    assert_denied(
        f.decide(OPERATION, "DELETE", &ROOT, Value::Null, config()).await,
        &[Denied::StartsWith("request.operation: \"DELETE\"")],
    );
}

/// `op` labelled as this subsystem's (as `ichor config apply` creates it).
fn labelled(mut op: Value) -> Value {
    op["metadata"]["labels"] = serde_json::json!({"app.kubernetes.io/managed-by": "ichor-identity"});
    op
}

#[tokio::test]
async fn the_identity_label_is_for_config_operations_created_with_it_and_never_moves() {
    let f = Fakes::none();
    assert_eq!(
        f.decide(
            OPERATION,
            "CREATE",
            &OPERATOR,
            labelled(operation("config", None)),
            Value::Null
        )
        .await,
        Ok(()),
        "what ichor config apply creates"
    );
    assert_eq!(
        f.decide(
            OPERATION,
            "CREATE",
            &OPERATOR,
            labelled(operation("reboot", None)),
            Value::Null
        )
        .await,
        Err("metadata.labels[\"app.kubernetes.io/managed-by\"]: \"ichor-identity\" is only for operations of \
             kind \"config\" (the API server restart rollout); this subsystem drives no \"reboot\" operation: \
             remove the label"
            .to_owned())
    );
    // Added to Ichor core's operation (which core may be driving), by anyone, the controller too.
    for who in [&OPERATOR, &ROOT] {
        assert_denied(
            f.decide(
                OPERATION,
                "UPDATE",
                who,
                labelled(operation("config", None)),
                operation("config", None),
            )
            .await,
            &[Denied::Contains("cannot be added to an existing operation")],
        );
    }
    let me = controller_identity(NAMESPACE);
    let controller = Who {
        user: &me,
        groups: &["system:serviceaccounts", "system:serviceaccounts:ichor-system"],
    };
    assert_denied(
        f.decide(
            OPERATION,
            "UPDATE",
            &controller,
            labelled(operation("config", None)),
            operation("config", None),
        )
        .await,
        &[Denied::StartsWith(
            "metadata.labels[\"app.kubernetes.io/managed-by\"]",
        )],
    );
    // Removed, or changed to another manager: the rollout would stop half-way.
    let mut other_manager = operation("config", None);
    other_manager["metadata"]["labels"] = serde_json::json!({"app.kubernetes.io/managed-by": "ichor"});
    for new in [operation("config", None), other_manager] {
        assert_denied(
            f.decide(
                OPERATION,
                "UPDATE",
                &ROOT,
                new,
                labelled(operation("config", None)),
            )
            .await,
            &[Denied::Contains("cannot be removed from an operation or changed")],
        );
    }
    // Other labels, and pausing, are edits like any.
    let mut paused = labelled(operation("config", None));
    paused["spec"]["paused"] = serde_json::json!(true);
    paused["metadata"]["labels"]["team"] = serde_json::json!("platform");
    assert_eq!(
        f.decide(
            OPERATION,
            "UPDATE",
            &OPERATOR,
            paused,
            labelled(operation("config", None))
        )
        .await,
        Ok(())
    );
    assert!(f.reviewer.calls().is_empty(), "no right is asked for any of it");
}
