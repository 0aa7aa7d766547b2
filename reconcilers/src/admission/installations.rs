//! `/validate/ichorinstallations`: any change of `spec.users` (setting, editing or removing it,
//! on create or update) needs `update` on `ichorinstallations/users`, which of the built-in roles
//! only `ichor-admin` holds. `spec.users` is the session policy of every user (ID-token lifetime,
//! refresh lifetime up to 30 days), the second-factor policy (`secondFactor`: who gets no
//! Kubernetes token without a second factor) and the server every user's kubeconfig names
//! (`kubeAPIServerURL`, `kubeAPITLSServerName`): whoever changes it decides how long a stolen
//! session lives, whether a password alone reaches the cluster and where every `kubectl` sends
//! its tokens, so an operator's `update` on `ichorinstallations` alone is not enough. The rest of
//! the object needs nothing here.
//!
//! `spec.users` is compared as written (JSON), so a field this build does not know is a change
//! too.

use serde::Deserialize;

use super::AdmissionState;
use super::access::{ichor_attributes, require_right};
use super::review::{self, AdmissionRequest, Operation, Verdict, decode};

/// The kind this webhook admits.
pub const KIND: &str = "IchorInstallation";
/// The resource whose subresource carries the right.
pub const RESOURCE: &str = "ichorinstallations";
/// The subresource whose `update` a change of `spec.users` needs.
pub const USERS_SUBRESOURCE: &str = "users";

/// `spec.users` as written.
#[derive(Debug, Default, Deserialize)]
struct InstallationView {
    #[serde(default)]
    users: Option<serde_json::Value>,
}

/// Decides one `IchorInstallation` admission request.
pub async fn review(state: &AdmissionState, req: &AdmissionRequest) -> Verdict {
    let view = |which, object| decode::<InstallationView>(which, KIND, object);
    let decoded = match req.operation {
        Operation::Create => view("object", req.object.as_ref()).map(|n| (None, n)),
        Operation::Update => view("oldObject", req.old_object.as_ref())
            .and_then(|o| view("object", req.object.as_ref()).map(|n| (Some(o), n))),
        ref op => Err(Verdict::deny(format!(
            "request.operation: {:?} is not admitted for IchorInstallation; only CREATE and UPDATE are",
            review::operation_name(op)
        ))),
    };
    let (old, new) = match decoded {
        Ok(pair) => pair,
        Err(denial) => return denial,
    };
    let old_users = old
        .as_ref()
        .and_then(|o| o.spec.users.as_ref())
        .filter(|u| !u.is_null());
    let new_users = new.spec.users.as_ref().filter(|u| !u.is_null());
    if old_users == new_users {
        return Verdict::Allow;
    }
    let name = new.metadata.name.as_deref().unwrap_or(req.name.as_str());
    let attrs = ichor_attributes("update", RESOURCE, USERS_SUBRESOURCE, "", name);
    require_right(
        state.reviewer.as_ref(),
        &req.user_info,
        &attrs,
        "spec.users",
        "changing the session policy, the second-factor policy and the kubeconfig server",
    )
    .await
}
