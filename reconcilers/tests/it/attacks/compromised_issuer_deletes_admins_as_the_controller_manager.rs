//! A compromised issuer pod removing the admins as the controller manager: the issuer's
//! ServiceAccount may impersonate any user name that is not a ServiceAccount, with `ichor:`
//! groups. `system:kube-controller-manager` with `ichor:admin` holds an admin's rights through the
//! group, and was exempt from the last-enabled-admin rule by the name whatever its groups. An
//! exempt name is exempt only with `system:` groups alone, as the real controllers carry; the
//! chart's match condition says the same (the real-apiserver attack of the same name in
//! `tests/cluster/attacks`).

use ichor_controller::admission::fixtures::{Who, user};
use ichor_controller::admission::users::KIND as USER;
use ichor_renderers::auth::roles::LastAdminRefusal;
use serde_json::Value;

use crate::admission::Fakes;

#[tokio::test]
async fn the_controller_managers_name_with_an_ichor_group_cannot_remove_the_last_admin() {
    let f = Fakes::listing(&[("alice", &["admin"], false), ("olga", &["operator"], false)]);
    let last = LastAdminRefusal {
        user: "alice".to_owned(),
    }
    .to_string();
    let alice = || user("alice", &["admin"], false);
    for name in [
        "system:kube-controller-manager",
        "system:serviceaccount:kube-system:namespace-controller",
        "system:serviceaccount:kube-system:generic-garbage-collector",
    ] {
        let impostor = Who {
            user: name,
            groups: &["ichor:admin", "system:authenticated"],
        };
        assert_eq!(
            f.decide(USER, "DELETE", &impostor, Value::Null, alice()).await,
            Err(last.clone()),
            "{name} with ichor:admin"
        );
        let disabled = user("alice", &["admin"], true);
        assert_eq!(
            f.decide(USER, "UPDATE", &impostor, disabled, alice()).await,
            Err(format!("spec.disabled: {last}")),
            "{name} with ichor:admin"
        );
    }
    // The real controller manager, with the group Kubernetes gives it, is still exempt.
    let real = Who {
        user: "system:kube-controller-manager",
        groups: &["system:authenticated"],
    };
    assert_eq!(
        f.decide(USER, "DELETE", &real, Value::Null, alice()).await,
        Ok(())
    );
}
