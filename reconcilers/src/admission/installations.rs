//! `/validate/ichorinstallations`: every write that can change the `spec.users` in force needs
//! `update` on `ichorinstallations/users`, which of the built-in roles only `ichor-admin` holds.
//! `spec.users` is the session policy of every user (ID-token lifetime, refresh lifetime up to
//! 30 days), the second-factor policy (`secondFactor`: who gets no Kubernetes token without a
//! second factor) and the server every user's kubeconfig names (`kubeAPIServerURL`,
//! `kubeAPITLSServerName`): whoever changes it decides how long a stolen session lives, whether a
//! password alone reaches the cluster and where every `kubectl` sends its tokens.
//!
//! The issuer, the controller and the CLI use the `spec.users` of the *first installation by
//! name* (`ichor_renderers::crd::effective`), so the object that carries it is not the only way
//! to change it:
//!
//! - CREATE: always. A new installation whose name sorts first replaces the policy in force (one
//!   without `spec.users` puts every default back: no second factor required, default
//!   lifetimes); whether it sorts first depends on the other installations, which this rule
//!   does not read, so every create is judged as a change.
//! - DELETE: always. Deleting the installation in force hands the policy to the next one by name,
//!   or to the flags when none is left.
//! - UPDATE: a change of `spec.users` (setting, editing or removing it), and a write that adds or
//!   changes `metadata.ownerReferences` ([`gives_owners`]): the garbage collector, which holds
//!   every right, deletes an object whose owners are all gone. Removing every reference is free;
//!   the rest of the object needs nothing here.
//!
//! `spec.users` is compared as written (JSON), so a field this build does not know is a change
//! too.

use serde::Deserialize;

use super::AdmissionState;
use super::access::{ichor_attributes, require_right};
use super::review::{self, AdmissionRequest, Operation, Verdict, decode};
use super::users::gives_owners;

/// The kind this webhook admits.
pub const KIND: &str = "IchorInstallation";
/// The resource whose subresource carries the right.
pub const RESOURCE: &str = "ichorinstallations";
/// The subresource whose `update` a change of the `spec.users` in force needs.
pub const USERS_SUBRESOURCE: &str = "users";

/// What every refusal says the installation decides, after naming the act.
const IN_FORCE: &str = "(the first IchorInstallation by name holds the spec.users in force: every user's session \
     policy, second-factor policy and kubeconfig server)";

/// `spec.users` as written.
#[derive(Debug, Default, Deserialize)]
struct InstallationView {
    #[serde(default)]
    users: Option<serde_json::Value>,
}

/// Why a write needs the right: the field the refusal names and what the write does.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    /// A create: it may become the first installation by name.
    Create,
    /// A delete: it may be the first installation by name.
    Delete,
    /// An update of `spec.users`.
    Users,
    /// An update that adds or changes owner references.
    Owners,
}

impl Change {
    fn field(&self) -> &'static str {
        match self {
            Self::Owners => "metadata.ownerReferences",
            Self::Create | Self::Delete | Self::Users => "spec.users",
        }
    }

    fn needs(&self, name: &str) -> String {
        match self {
            Self::Create => format!("creating IchorInstallation {name:?} {IN_FORCE}"),
            Self::Delete => format!("deleting IchorInstallation {name:?} {IN_FORCE}"),
            Self::Users => {
                "changing the session policy, the second-factor policy and the kubeconfig server".to_owned()
            }
            Self::Owners => format!(
                "giving IchorInstallation {name:?} owner references (the garbage collector deletes it once \
                 its owners are gone) {IN_FORCE}"
            ),
        }
    }
}

/// What an admission request changes of the `spec.users` in force, `None` when nothing; or a
/// denial when the request cannot be read.
fn change(req: &AdmissionRequest) -> Result<Option<Change>, Verdict> {
    let view = |which, object| decode::<InstallationView>(which, KIND, object);
    match req.operation {
        Operation::Create => view("object", req.object.as_ref()).map(|_| Some(Change::Create)),
        Operation::Delete => Ok(Some(Change::Delete)),
        Operation::Update => {
            let old = view("oldObject", req.old_object.as_ref())?;
            let new = view("object", req.object.as_ref())?;
            let users = |spec: &InstallationView| spec.users.clone().filter(|u| !u.is_null());
            if users(&old.spec) != users(&new.spec) {
                Ok(Some(Change::Users))
            } else if gives_owners(Some(old.metadata), Some(new.metadata)) {
                Ok(Some(Change::Owners))
            } else {
                Ok(None)
            }
        }
        ref op => Err(Verdict::deny(format!(
            "request.operation: {:?} is not admitted for IchorInstallation; only CREATE, UPDATE and DELETE are",
            review::operation_name(op)
        ))),
    }
}

/// Decides one `IchorInstallation` admission request.
pub async fn review(state: &AdmissionState, req: &AdmissionRequest) -> Verdict {
    let change = match change(req) {
        Ok(Some(change)) => change,
        Ok(None) => return Verdict::Allow,
        Err(denial) => return denial,
    };
    let name = [req.object.as_ref(), req.old_object.as_ref()]
        .into_iter()
        .find_map(|o| o.and_then(|o| o.metadata.name.as_deref()))
        .unwrap_or(req.name.as_str());
    let attrs = ichor_attributes("update", RESOURCE, USERS_SUBRESOURCE, "", name);
    require_right(
        state.reviewer.as_ref(),
        &req.user_info,
        &attrs,
        change.field(),
        &change.needs(name),
    )
    .await
}
