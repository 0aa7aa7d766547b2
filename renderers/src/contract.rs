//! The names of the design, defined once: the API group and namespace, every Kubernetes object
//! the binaries read or write by name, the labels, annotations and field managers they set, the
//! OIDC client ids and audiences, and the user and group names the kube-apiserver sees.
//!
//! These strings are contracts with the Helm chart, the kube-apiserver's authentication
//! configuration, tokens already issued and objects already stored: changing one is a migration.
//! Every crate names them through this module (other modules re-export what they need), and the
//! `contract_names_are_defined_once` test of `ichor-golden` fails when a quoted copy of one
//! appears anywhere else in non-test code.
//!
//! Exceptions the test knows of: `#[kube(group = …)]` attributes on the CRD types, which take a
//! literal (a test here checks they equal [`GROUP`]), and values too generic to search for
//! (`v1alpha1`, `ichor`, `ui`, `issuer`).

// ---------------------------------------------------------------------------------------------
// API group and namespace
// ---------------------------------------------------------------------------------------------

/// The API group of every Ichor custom resource.
pub const GROUP: &str = "ichor.maesh.dev";
/// The served and stored version of the Ichor resources.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of the Ichor resources: [`GROUP`]`/`[`VERSION`].
pub const API_VERSION: &str = "ichor.maesh.dev/v1alpha1";
/// The namespace Ichor runs in and keeps its identity objects in.
pub const NAMESPACE: &str = "ichor-system";

// ---------------------------------------------------------------------------------------------
// Objects in `ichor-system`
// ---------------------------------------------------------------------------------------------

/// Secret holding one credentials entry (password hash, sessions) per user.
pub const CREDENTIALS_SECRET: &str = "ichor-user-credentials";
/// The namespace holding one credentials Secret per user and nothing else
/// (docs/credentials-sharding.md): the issuer's and the controller's Roles there grant
/// `secrets`, and the [`CREDENTIALS_POLICY`] admits only credentials Secrets into it. Created by
/// `ichor init`, never by the chart, so no `helm uninstall` deletes a password.
pub const CREDENTIALS_NAMESPACE: &str = "ichor-credentials";
/// The name of a user's credentials Secret in [`CREDENTIALS_NAMESPACE`] is this prefix and the
/// `IchorUser` name (a DNS label, so the name is valid and maps back one-to-one).
pub const USER_CREDENTIALS_PREFIX: &str = "ichor-user-";
/// The `type` of a per-user credentials Secret.
pub const USER_CREDENTIALS_TYPE: &str = "ichor.maesh.dev/user-credentials";
/// The one data key of a per-user credentials Secret: the entry's JSON, as a value of the
/// legacy [`CREDENTIALS_SECRET`].
pub const USER_CREDENTIALS_KEY: &str = "entry";
/// Label on a per-user credentials Secret: the `IchorUser` name it holds the entry of.
pub const USER_LABEL: &str = "ichor.maesh.dev/user";
/// The `ValidatingAdmissionPolicy` (and its binding) admitting only per-user credentials
/// Secrets, created by the issuer's or the controller's ServiceAccount, into
/// [`CREDENTIALS_NAMESPACE`].
pub const CREDENTIALS_POLICY: &str = "ichor-credentials";
/// Annotation on the legacy [`CREDENTIALS_SECRET`]: the migration's phase, one of
/// [`LAYOUT_LEGACY`], [`LAYOUT_MIGRATING`], [`LAYOUT_RETURNING`]. Every legacy write tests it.
pub const CREDENTIALS_LAYOUT_ANNOTATION: &str = "ichor.maesh.dev/credentials-layout";
/// Phase: entries stay where they are; new users go to the legacy Secret.
pub const LAYOUT_LEGACY: &str = "legacy";
/// Phase: a write of a legacy entry moves it to its own Secret; legacy keys are only removed.
pub const LAYOUT_MIGRATING: &str = "migrating";
/// Phase: the controller moves entries back into the legacy Secret; no per-user Secret is made.
pub const LAYOUT_RETURNING: &str = "returning";
/// Annotation on the issuer's pod template: the credentials layouts this release understands.
pub const CREDENTIALS_LAYOUTS_ANNOTATION: &str = "ichor.maesh.dev/credentials-layouts";
/// The value of [`CREDENTIALS_LAYOUTS_ANNOTATION`] of a release that reads and writes both.
pub const CREDENTIALS_LAYOUTS_VALUE: &str = "legacy,per-user";
/// The layout an issuer pod must list in [`CREDENTIALS_LAYOUTS_ANNOTATION`] before the
/// controller switches the legacy Secret to [`LAYOUT_MIGRATING`].
pub const LAYOUT_PER_USER: &str = "per-user";
/// The issuer's Deployment in [`NAMESPACE`] (its rollout gates the switch to per-user Secrets).
pub const ISSUER_DEPLOYMENT: &str = "ichor-issuer";
/// The labels the issuer Deployment selects its pods by (`spec.selector.matchLabels`, immutable:
/// its pods keep `component=issuer`), as a label selector.
pub const ISSUER_POD_SELECTOR: &str = "app.kubernetes.io/name=ichor,app.kubernetes.io/component=issuer";
/// The condition on the `IchorInstallation` saying whether [`CREDENTIALS_NAMESPACE`] holds
/// nothing but users' credentials Secrets (the migration advances only while it is true).
pub const CREDENTIALS_NAMESPACE_DEDICATED: &str = "CredentialsNamespaceDedicated";
/// The longest, in seconds, an issuer replica serves a cached user read, and so the longest it
/// remembers the legacy credentials Secret as absent (404) without asking again. The controller
/// waits longer than this after creating that Secret again before it moves anyone back into it.
pub const ISSUER_USER_CACHE_SECONDS: u64 = 10;
/// The condition on the `IchorInstallation` saying whether every issuer pod understands the
/// per-user layout while one is in use (phase `migrating` or `returning`, or the legacy Secret
/// gone): an issuer of a release before it reads the legacy Secret alone, so it would lose the
/// sessions of moved users and could read stale copies.
pub const CREDENTIALS_LAYOUT_UNDERSTOOD: &str = "CredentialsLayoutUnderstood";

/// The name of `user`'s credentials Secret in [`CREDENTIALS_NAMESPACE`].
pub fn user_credentials_secret(user: &str) -> String {
    format!("{USER_CREDENTIALS_PREFIX}{user}")
}

/// The user a credentials Secret named `secret` belongs to, or `None` when the name does not
/// have the prefix or what follows is empty.
pub fn user_of_credentials_secret(secret: &str) -> Option<&str> {
    secret
        .strip_prefix(USER_CREDENTIALS_PREFIX)
        .filter(|user| !user.is_empty())
}

/// Secret holding the issuer's signing keys (`keys.json`); written by the controller only.
pub const SIGNING_SECRET: &str = "ichor-oidc-signing";
/// Secret holding the issuer's private CA (certificate and key).
pub const CA_SECRET: &str = "ichor-oidc-ca";
/// Secret holding the issuer's TLS leaf, served on the internal listener.
pub const TLS_SECRET: &str = "ichor-oidc-tls";
/// Secret holding the admission webhooks' serving certificate (`kubernetes.io/tls`).
pub const WEBHOOK_TLS_SECRET: &str = "ichor-webhook-tls";
/// ConfigMap publishing the issuer's public trust facts (`discoveryURL`, `ca.crt`).
pub const TRUST_CONFIGMAP: &str = "ichor-oidc-trust";
/// ConfigMap publishing the issuer CA alone (`ca.crt`), for clients of the UI's listener.
pub const UI_CA_CONFIGMAP: &str = "ichor-ui-ca";
/// The chart's issuer Service (its ClusterIP goes into the issuer's TLS leaf).
pub const ISSUER_SERVICE: &str = "ichor-issuer";
/// The chart's issuer ServiceAccount; its Roles and RoleBindings carry the same name.
pub const ISSUER_SERVICE_ACCOUNT: &str = "ichor-issuer";
/// The chart's controller ServiceAccount; its Roles and RoleBindings carry the same name.
pub const CONTROLLER_SERVICE_ACCOUNT: &str = "ichor-controller";
/// The chart's controller Deployment.
pub const CONTROLLER_DEPLOYMENT: &str = "ichor-controller";
/// The default Lease of the controller's leader election.
pub const CONTROLLER_LEASE: &str = "ichor-controller";
/// The chart's `ValidatingWebhookConfiguration` of the identity webhooks (cluster-scoped; the
/// controller keeps its `caBundle`s).
pub const WEBHOOK_CONFIGURATION: &str = "ichor-identity";
/// The webhook of [`WEBHOOK_CONFIGURATION`] validating `IchorUser`s.
pub const USERS_WEBHOOK: &str = "ichorusers.identity.ichor.maesh.dev";
/// The webhook of [`WEBHOOK_CONFIGURATION`] validating `TalosCluster`s.
pub const CLUSTERS_WEBHOOK: &str = "talosclusters.identity.ichor.maesh.dev";

// ---------------------------------------------------------------------------------------------
// Labels, annotations and field managers
// ---------------------------------------------------------------------------------------------

/// The recommended label naming the controller that manages an object.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The recommended label naming the application an object is part of.
pub const PART_OF_LABEL: &str = "app.kubernetes.io/part-of";
/// The value of [`PART_OF_LABEL`] on Ichor's objects.
pub const PART_OF_VALUE: &str = "ichor";
/// The recommended label naming an object's component (selects the issuer Service).
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
/// The value of [`COMPONENT_LABEL`] on the issuer Service: the seed's `ichor-ui`.
pub const ISSUER_COMPONENT: &str = "ui";
/// The value of [`COMPONENT_LABEL`] the chart gave the issuer Service before
/// [`ISSUER_COMPONENT`], still accepted (journals recorded then replay as they were decided).
pub const LEGACY_ISSUER_COMPONENT: &str = "issuer";
/// The default selector of the issuer Service: [`COMPONENT_LABEL`]`=`[`ISSUER_COMPONENT`].
pub const ISSUER_SELECTOR: &str = "app.kubernetes.io/component=ui";
/// The value of [`MANAGED_BY_LABEL`] on the `config` operations this subsystem drives (the ones
/// `ichor config apply` creates); an operation without it is Ichor core's.
pub const IDENTITY_MANAGER: &str = "ichor-identity";
/// The value of [`MANAGED_BY_LABEL`] on the ConfigMaps the controller renders.
pub const CONTROLLER_MANAGER: &str = "ichor-controller";
/// Label marking the objects the controller's graph owns whole (and so may delete as orphans).
pub const OWNER_LABEL: &str = "identity.ichor.maesh.dev/owner";
/// The value of [`OWNER_LABEL`].
pub const OWNER_VALUE: &str = "ichor-controller";
/// Annotation on a `TalosCluster` holding the SHA-256 of the authentication configuration last
/// rendered for it.
pub const RENDERED_SHA_ANNOTATION: &str = "ichor.maesh.dev/rendered-sha256";
/// The controller's server-side-apply field manager.
pub const CONTROLLER_FIELD_MANAGER: &str = "ichor-controller";
/// The field manager of the rollout's applied-hashes writes.
pub const ROLLOUT_FIELD_MANAGER: &str = "ichor-controller-rollout";
/// The issuer's field manager.
pub const ISSUER_FIELD_MANAGER: &str = "ichor-issuer";
/// The CLI's field manager.
pub const CLI_FIELD_MANAGER: &str = "ichor-cli";

// ---------------------------------------------------------------------------------------------
// OIDC clients and audiences
// ---------------------------------------------------------------------------------------------

/// Client id of the web UI (a public client).
pub const UI_CLIENT_ID: &str = "ichor-ui";
/// Client id of the `ichor` CLI (a public client with a loopback redirect).
pub const CLI_CLIENT_ID: &str = "ichor-cli";
/// Audience of the tokens the web UI sends to the issuer's API.
pub const UI_AUDIENCE: &str = "ichor-ui";
/// Audience of the tokens the kube-apiserver accepts from Ichor's issuer.
pub const KUBE_AUDIENCE: &str = "ichor-kube";

// ---------------------------------------------------------------------------------------------
// Users, groups and RBAC
// ---------------------------------------------------------------------------------------------

/// The prefix the kube-apiserver gives Ichor users and their groups.
pub const USER_PREFIX: &str = "ichor:";
/// Group of the built-in role `viewer`.
pub const VIEWER_GROUP: &str = "ichor:viewer";
/// Group of the built-in role `operator`.
pub const OPERATOR_GROUP: &str = "ichor:operator";
/// Group of the built-in role `admin`.
pub const ADMIN_GROUP: &str = "ichor:admin";
/// ClusterRole bound to [`VIEWER_GROUP`].
pub const VIEWER_CLUSTER_ROLE: &str = "ichor-viewer";
/// ClusterRole bound to [`OPERATOR_GROUP`].
pub const OPERATOR_CLUSTER_ROLE: &str = "ichor-operator";
/// ClusterRole bound to [`ADMIN_GROUP`].
pub const ADMIN_CLUSTER_ROLE: &str = "ichor-admin";

#[cfg(test)]
mod tests {
    use kube::Resource as _;

    use super::*;
    use crate::crd::{IchorInstallation, IchorUser, TalosCluster, TalosMachine, TalosOperation};

    #[test]
    fn composed_names_agree_with_their_parts() {
        assert_eq!(API_VERSION, format!("{GROUP}/{VERSION}"));
        assert_eq!(ISSUER_SELECTOR, format!("{COMPONENT_LABEL}={ISSUER_COMPONENT}"));
        assert_eq!(RENDERED_SHA_ANNOTATION, format!("{GROUP}/rendered-sha256"));
        assert_eq!(OWNER_LABEL, format!("identity.{GROUP}/owner"));
        for hook in [USERS_WEBHOOK, CLUSTERS_WEBHOOK] {
            assert!(hook.ends_with(&format!(".identity.{GROUP}")), "{hook}");
        }
        for group in [VIEWER_GROUP, OPERATOR_GROUP, ADMIN_GROUP] {
            assert!(group.starts_with(USER_PREFIX), "{group}");
        }
    }

    #[test]
    fn a_user_credentials_secret_name_is_valid_and_maps_back() {
        let longest = "a".repeat(63);
        for user in ["alice", "x", longest.as_str(), "credentials"] {
            let secret = user_credentials_secret(user);
            assert!(secret.len() <= 253 && secret.starts_with(USER_CREDENTIALS_PREFIX));
            assert_eq!(user_of_credentials_secret(&secret), Some(user));
        }
        assert_eq!(user_of_credentials_secret(USER_CREDENTIALS_PREFIX), None);
        assert_eq!(user_of_credentials_secret("other-secret"), None);
        for annotation in [
            CREDENTIALS_LAYOUT_ANNOTATION,
            CREDENTIALS_LAYOUTS_ANNOTATION,
            USER_LABEL,
        ] {
            assert!(annotation.starts_with(&format!("{GROUP}/")), "{annotation}");
        }
        assert!(USER_CREDENTIALS_TYPE.starts_with(&format!("{GROUP}/")));
    }

    #[test]
    fn every_crd_type_is_in_the_group() {
        for (group, version) in [
            (IchorUser::group(&()), IchorUser::version(&())),
            (IchorInstallation::group(&()), IchorInstallation::version(&())),
            (TalosCluster::group(&()), TalosCluster::version(&())),
            (TalosMachine::group(&()), TalosMachine::version(&())),
            (TalosOperation::group(&()), TalosOperation::version(&())),
        ] {
            assert_eq!((group.as_ref(), version.as_ref()), (GROUP, VERSION));
        }
    }
}
