//! A new user's password taken for an orphan: the issuer's API writes the `IchorUser` first,
//! then its entry in the credentials Secret. The controller watches users and that Secret on two
//! streams, so it can fold the Secret's new key before the user it belongs to; garbage
//! collection decided from that World removes the key with a merge patch whose only
//! precondition, the Secret's resourceVersion, is current, and the new user's password is gone
//! (anyone allowed to create users can time a create against a victim's). Before the removal the
//! applier reads the key's `IchorUser` from the store (a quorum GET) and keeps the key while the
//! user exists, handing the user back so the graph decides again.

use ichor_controller_core::identity::Controller;
use ichor_controller_core::problem::ProblemKind;
use ichor_controller_core::sim::fixtures;
use ichor_graph::{Action, Event, ObjectKey};
use serde_json::json;

use crate::apply::{NS, apply_scripted, client, next, reply};

const USER_PATH: &str = "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers/newbie";

fn removals(actions: &[Action]) -> Vec<Action> {
    actions
        .iter()
        .filter(|a| matches!(a, Action::Effect { request, .. } if request.id.starts_with("remove-credentials-key ")))
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_new_users_key_folded_before_the_user_is_kept_and_the_user_read_from_the_store() {
    // The World as the controller folds it: users listed (admin), then the credentials Secret
    // with newbie's new key; newbie's IchorUser event is still on its way.
    let mut c = Controller::new().unwrap();
    c.fold(Event::Applied(fixtures::user("admin", &["admin"], false, 1)));
    let mut secret = fixtures::credentials(&["admin", "newbie"]);
    secret.resource_version = Some("20".into());
    c.fold(Event::Applied(secret));
    let (eval, _) = c.evaluate();
    let gc = removals(&eval.actions);
    let ids: Vec<String> = gc.iter().map(ToString::to_string).collect();
    assert!(
        ids.len() == 1 && ids[0].starts_with("effect remove-credentials-key newbie"),
        "the graph takes the key for an orphan from this World: {ids:?}"
    );

    // The store holds newbie (the issuer wrote the user before the key): the applier asks for
    // the user before any write and writes nothing.
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (seen, send) = next(&mut handle).await;
        assert_eq!(
            (seen.method.as_str(), seen.path.as_str()),
            ("GET", USER_PATH),
            "the key's IchorUser read before the removal; the key must not be patched away"
        );
        reply(
            send,
            200,
            &json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
                "metadata": {"name": "newbie", "namespace": NS, "resourceVersion": "21", "generation": 1},
                "spec": {"roles": ["viewer"], "displayName": "Newbie"}}),
        );
        handle
    });
    let report = apply_scripted(client, server, c.world(), &gc).await;
    assert!(
        report.applied.is_empty() && report.problems.is_empty(),
        "{report:?}"
    );
    let [stale] = report.stale.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(stale.kind, ProblemKind::Conflict);
    assert!(
        stale.message.contains("\"newbie\"") && stale.message.contains("IchorUser exists"),
        "the reason the removal was given up: {stale}"
    );
    let [Event::Applied(user)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(user.key(), ObjectKey::new("IchorUser", NS, "newbie"));

    // The user as read is folded: the graph no longer asks for the removal.
    for event in report.events {
        c.fold(event);
    }
    let (eval, _) = c.evaluate();
    assert!(removals(&eval.actions).is_empty(), "{:?}", eval.actions);
}
