//! The custom resources this project defines (`IchorUser`) and the parts of Ichor's other
//! resources (`TalosCluster`, `TalosMachine`, `TalosOperation`, `IchorInstallation`) it reads.
//!
//! Names are contracts: group `ichor.maesh.dev`, version `v1alpha1`, namespace `ichor-system`.
//!
//! # Caveats
//! The Talos kinds are owned by other Ichor subsystems; the types here model only the fields
//! identity reads or validates. Unknown fields elsewhere in those objects are ignored when a
//! cluster object is read, and reported by [`crate::manifest`] for the subtrees identity owns.

mod cluster;
mod duration;
mod effective;
mod generate;
mod installation;
mod machine;
mod operation;
mod user;

pub use cluster::{
    AuthenticationSpec, CiliumSpec, CniSpec, ExternalIssuerSpec, IchorIssuerSpec, TalosCluster,
    TalosClusterSpec, VersionContract,
};
pub use duration::{GoDuration, GoDurationError};
pub use effective::{Effective, effective, second_factor_in_force};
pub use generate::{CrdFile, crd_files};
pub use installation::{
    CredentialsLayout, CredentialsPhase, CredentialsStatus, IchorInstallation, IchorInstallationSpec,
    IchorInstallationStatus, SecondFactorSpec, UsersSettings, UsersSettingsError, UsersSpec,
};
pub use machine::{MachineRole, TalosMachine, TalosMachineSpec, TalosMachineStatus};
pub use operation::{
    IDENTITY_MANAGER, MANAGED_BY_LABEL, NodeAction, NodeState, OperationKind, OperationNodeResult,
    OperationPhase, PreviousDocument, TalosOperation, TalosOperationSpec, TalosOperationStatus,
    is_identity_operation,
};
pub use user::{IchorUser, IchorUserSpec, IchorUserStatus, ichor_user_crd};

/// The API group, version and namespace of the Ichor resources (defined in [`crate::contract`]).
pub use crate::contract::{GROUP, NAMESPACE, VERSION};
/// Condition type: the object is reconciled and usable.
pub const CONDITION_READY: &str = "Ready";
/// Condition type on `IchorUser`: a password hash exists for the user.
pub const CONDITION_PASSWORD_SET: &str = "PasswordSet";
/// Reason on a `TalosMachine` `Ready=False` condition: its kube-apiserver must restart to take a
/// new trust configuration (`ichor config apply`).
pub const REASON_APISERVER_RESTART_REQUIRED: &str = "APIServerRestartRequired";

/// The pattern of a DNS label (RFC 1123): the rule for `IchorUser` names.
pub const DNS_LABEL_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// The pattern every role name must match.
pub const ROLE_PATTERN: &str = "^[a-z][a-z0-9-]{0,30}$";
/// The most roles one user may hold.
pub const MAX_ROLES: usize = 16;

/// The kinds of Ichor core the identity chart depends on and does not install: their CRDs come
/// with Ichor core (`hack/crds/` holds the parts identity reads).
pub const CORE_KINDS: [&str; 4] = [
    "TalosCluster",
    "TalosMachine",
    "TalosOperation",
    "IchorInstallation",
];

/// Whether `name` is a Kubernetes object name (a DNS-1123 subdomain: at most 253 lowercase
/// letters, digits, `-` and `.`, starting and ending with a letter or digit), as a TalosCluster's
/// is. A name that is not cannot name one, and is never put into a command a person is told
/// to run.
pub fn is_object_name(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 253
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name.chars().all(|c| alnum(c) || c == '-' || c == '.')
}

/// What a readiness probe and a log say when the cluster does not serve the Ichor kind `kind`
/// (a list answered 404): the kind, its group and version, and what to install.
pub fn not_served_message(kind: &str) -> String {
    if CORE_KINDS.contains(&kind) {
        format!(
            "the Ichor core kind {kind} ({GROUP}/{VERSION}) is not served by this cluster: install Ichor core first"
        )
    } else {
        format!(
            "the kind {kind} ({GROUP}/{VERSION}) is not served by this cluster: install the chart's CRDs \
             (helm/ichor/crds; `helm install` without --skip-crds)"
        )
    }
}

#[cfg(test)]
mod not_served_tests {
    #[test]
    fn a_core_kind_says_install_ichor_core_and_the_chart_s_own_kind_says_its_crds() {
        assert_eq!(
            super::not_served_message("TalosCluster"),
            "the Ichor core kind TalosCluster (ichor.maesh.dev/v1alpha1) is not served by this cluster: \
             install Ichor core first"
        );
        let own = super::not_served_message("IchorUser");
        assert!(
            own.contains("IchorUser (ichor.maesh.dev/v1alpha1)") && own.contains("helm/ichor/crds"),
            "{own}"
        );
    }
}

#[cfg(test)]
mod name_tests {
    use super::is_object_name;

    #[test]
    fn object_names_are_dns_subdomains_and_nothing_a_shell_reads_otherwise() {
        for good in ["prod", "prod-1", "a", "eu.prod-2"] {
            assert!(is_object_name(good), "{good}");
        }
        for bad in [
            "",
            "Prod",
            "-prod",
            "prod-",
            "prod?x=1",
            "x'$(id)'",
            "a b",
            "a/b",
            "ä",
            &"a".repeat(254),
        ] {
            assert!(!is_object_name(bad), "{bad:?}");
        }
    }
}
