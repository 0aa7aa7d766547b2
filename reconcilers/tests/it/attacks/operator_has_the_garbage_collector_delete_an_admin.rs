//! Having the garbage collector delete an admin: the webhook lets the garbage collector delete
//! any user (it is exempt, by name), and the collector deletes an object whose owners are all
//! gone. An operator allowed to update `IchorUser`s points an admin's `metadata.ownerReferences`
//! at an object that does not exist, and the collector deletes the admin for it. Giving a user
//! an owner reference is judged as deleting it: the act-on rule for a delete and the
//! last-enabled-admin rule, naming `metadata.ownerReferences`. Taking references away is free.

use ichor_controller::admission::fixtures::{OPERATOR, ROOT, user};
use ichor_renderers::auth::roles::{UserAct, UserChange, UserState, check_act_on, check_last_admin};
use serde_json::{Value, json};

use ichor_controller::admission::users::KIND as USER;

use crate::admission::Fakes;

/// `object` with `metadata.ownerReferences` pointing at a ConfigMap that does not exist.
fn owned(mut object: Value, owner: &str) -> Value {
    object["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": owner,
        "uid": "0d5c7e2a-3f41-4b8e-9a57-6c1d2e3f4a5b"
    }]);
    object
}

#[tokio::test]
async fn an_operator_may_not_give_an_admin_an_owner_reference() {
    let f = Fakes::listing(&[("root", &["admin"], false), ("alice", &["admin"], false)]);
    let old = user("alice", &["admin"], false);
    let apis = check_act_on(&["operator"], UserAct::Delete, "alice", &["admin"]).unwrap_err();
    let refusal = f
        .decide(USER, "UPDATE", &OPERATOR, owned(old.clone(), "x"), old.clone())
        .await
        .unwrap_err();
    assert!(refusal.starts_with("metadata.ownerReferences: "), "{refusal}");
    assert!(refusal.contains(&apis.to_string()), "{refusal}");
    // Judged on the operator as it is now, not on the cache.
    assert!(f.lister.requester_reads().contains(&"olga".to_owned()));
    // Changing the reference of a user that already has one is the same act.
    let refusal = f
        .decide(
            USER,
            "UPDATE",
            &OPERATOR,
            owned(old.clone(), "y"),
            owned(old, "x"),
        )
        .await;
    assert!(refusal.is_err_and(|e| e.starts_with("metadata.ownerReferences: ")));
}

#[tokio::test]
async fn an_admin_may_not_give_the_last_admin_an_owner_reference() {
    let f = Fakes::listing(&[("root", &["admin"], false), ("vera", &["viewer"], false)]);
    let old = user("root", &["admin"], false);
    let rule = check_last_admin(
        "root",
        &UserChange::Delete {
            old: UserState {
                roles: &["admin".to_owned()],
                disabled: false,
            },
        },
        std::iter::empty::<(&str, &[String], bool)>(),
    )
    .unwrap_err();
    let refusal = f
        .decide(USER, "UPDATE", &ROOT, owned(old.clone(), "x"), old)
        .await
        .unwrap_err();
    assert!(refusal.starts_with("metadata.ownerReferences: "), "{refusal}");
    assert!(refusal.contains(&rule.to_string()), "{refusal}");
}

#[tokio::test]
async fn an_operator_may_give_a_viewer_an_owner_reference_and_anyone_may_remove_them() {
    let f = Fakes::listing(&[("root", &["admin"], false)]);
    let viewer = user("vic", &["viewer"], false);
    assert_eq!(
        f.decide(USER, "UPDATE", &OPERATOR, owned(viewer.clone(), "x"), viewer)
            .await,
        Ok(())
    );
    let admin = user("alice", &["admin"], false);
    assert_eq!(
        f.decide(
            USER,
            "UPDATE",
            &OPERATOR,
            admin.clone(),
            owned(admin.clone(), "x")
        )
        .await,
        Ok(())
    );
    let mut emptied = admin.clone();
    emptied["metadata"]["ownerReferences"] = json!([]);
    assert_eq!(
        f.decide(USER, "UPDATE", &OPERATOR, emptied, owned(admin.clone(), "x"))
            .await,
        Ok(())
    );
    // References left as they were: an edit of something else is judged as before.
    let mut renamed = owned(admin.clone(), "x");
    renamed["spec"]["displayName"] = json!("Alice");
    assert_eq!(
        f.decide(USER, "UPDATE", &OPERATOR, renamed, owned(admin, "x"))
            .await,
        Ok(())
    );
}
