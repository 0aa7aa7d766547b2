//! Taking over an admin's name with `kubectl` by first taking its admin role away: an operator
//! allowed to update and delete `IchorUser`s (a site's delegated role) may not set an admin's
//! password, so it first makes the admin something it may act on. It patches the admin's roles
//! down to `operator` (nothing added, another admin exists), or disables it (ending its
//! sessions), or deletes it to create it again with a password of its choice. The webhook
//! refuses each with the API's message; the same acts on viewers and operators pass.

use ichor_controller::admission::fixtures::{OPERATOR, ROOT, user};
use ichor_controller::admission::users::KIND as USER;
use serde_json::Value;

use crate::admission::Fakes;

/// The refusal of an operator acting on admin `boss`, as the API and the webhook word it.
fn refusal(act: &str) -> String {
    format!(
        "you may not {act} user \"boss\": it holds role \"admin\", which is above your highest role \
         \"operator\"; only someone who may grant every role of a user may do that"
    )
}

fn site() -> Fakes {
    Fakes::listing(&[
        ("root", &["admin"], false),
        ("olga", &["operator"], false),
        ("boss", &["admin"], false),
    ])
}

#[tokio::test]
async fn an_operator_may_not_demote_disable_or_delete_an_admin_nor_take_its_name() {
    let f = site();
    let boss = || user("boss", &["admin"], false);
    let demoted = user("boss", &["operator"], false);
    assert_eq!(
        f.decide(USER, "UPDATE", &OPERATOR, demoted, boss()).await,
        Err(format!("spec.roles: {}", refusal("take a role from")))
    );
    let disabled = user("boss", &["admin"], true);
    assert_eq!(
        f.decide(USER, "UPDATE", &OPERATOR, disabled, boss()).await,
        Err(format!("spec.disabled: {}", refusal("disable")))
    );
    assert_eq!(
        f.decide(USER, "DELETE", &OPERATOR, Value::Null, boss()).await,
        Err(refusal("delete"))
    );
    // Demoting and disabling at once is refused too (the roles held before the write count).
    let both = user("boss", &["viewer"], true);
    assert!(f.decide(USER, "UPDATE", &OPERATOR, both, boss()).await.is_err());
}

#[tokio::test]
async fn an_operator_may_demote_disable_and_delete_viewers_and_operators_and_an_admin_anyone() {
    let f = site();
    let helper = || user("helper", &["operator", "viewer"], false);
    for new in [
        user("helper", &["viewer"], false),
        user("helper", &["operator", "viewer"], true),
    ] {
        assert_eq!(f.decide(USER, "UPDATE", &OPERATOR, new, helper()).await, Ok(()));
    }
    assert_eq!(
        f.decide(USER, "DELETE", &OPERATOR, Value::Null, helper()).await,
        Ok(())
    );
    let boss = || user("boss", &["admin"], false);
    assert_eq!(
        f.decide(USER, "UPDATE", &ROOT, user("boss", &["operator"], false), boss())
            .await,
        Ok(())
    );
    assert_eq!(f.decide(USER, "DELETE", &ROOT, Value::Null, boss()).await, Ok(()));
}
