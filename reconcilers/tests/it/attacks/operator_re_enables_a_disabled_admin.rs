//! Re-enabling a disabled admin with `kubectl`: an operator allowed to update `IchorUser`s (a
//! site's delegated role) cannot create an admin (the grant rule), so it patches
//! `spec.disabled: false` on a disabled admin whose password it knows. The webhook refuses it
//! with the API's message; the same re-enable of a viewer or an operator passes.

use ichor_controller::admission::fixtures::{OPERATOR, ROOT, user};
use ichor_renderers::auth::roles::{UserAct, check_act_on};

use ichor_controller::admission::users::KIND as USER;

use crate::admission::Fakes;

#[tokio::test]
async fn an_operator_may_not_re_enable_a_disabled_admin_and_the_message_is_the_apis() {
    let f = Fakes::listing(&[("root", &["admin"], false), ("sleeper", &["admin"], true)]);
    let (new, old) = (
        user("sleeper", &["admin"], false),
        user("sleeper", &["admin"], true),
    );
    let apis = check_act_on(&["operator"], UserAct::Enable, "sleeper", &["admin"]).unwrap_err();
    assert_eq!(
        f.decide(USER, "UPDATE", &OPERATOR, new, old).await,
        Err(format!("spec.disabled: {apis}"))
    );
    assert!(apis.to_string().contains("it holds role \"admin\""), "{apis}");
}

#[tokio::test]
async fn re_enabling_and_demoting_at_once_is_judged_on_the_roles_before_and_after() {
    let f = Fakes::listing(&[("root", &["admin"], false)]);
    // The admin role removed in the same write: taking it away is itself an act on an admin.
    let (new, old) = (
        user("sleeper", &["viewer"], false),
        user("sleeper", &["admin"], true),
    );
    let apis = check_act_on(&["operator"], UserAct::Demote, "sleeper", &["admin"]).unwrap_err();
    assert_eq!(
        f.decide(USER, "UPDATE", &OPERATOR, new, old).await,
        Err(format!("spec.roles: {apis}"))
    );
    // A viewer brought back with a role of its own removed is an operator's to do.
    let (new, old) = (
        user("napper", &["viewer"], false),
        user("napper", &["viewer", "operator"], true),
    );
    assert_eq!(f.decide(USER, "UPDATE", &OPERATOR, new, old).await, Ok(()));
    // A custom role the operator does not hold stays out of its reach.
    let (new, old) = (user("aud", &["auditor"], false), user("aud", &["auditor"], true));
    assert!(f.decide(USER, "UPDATE", &OPERATOR, new, old).await.is_err());
}

#[tokio::test]
async fn an_operator_may_re_enable_viewers_and_operators_and_an_admin_anyone() {
    let f = Fakes::listing(&[("root", &["admin"], false)]);
    for roles in [&["viewer"][..], &["operator"], &["viewer", "operator"], &[]] {
        let (new, old) = (user("napper", roles, false), user("napper", roles, true));
        assert_eq!(
            f.decide(USER, "UPDATE", &OPERATOR, new, old).await,
            Ok(()),
            "{roles:?}"
        );
    }
    let (new, old) = (
        user("sleeper", &["admin"], false),
        user("sleeper", &["admin"], true),
    );
    assert_eq!(f.decide(USER, "UPDATE", &ROOT, new, old).await, Ok(()));
}
