//! The namespace that holds one credentials Secret per user (docs/credentials-sharding.md):
//! `ichor init` creates it, never the chart, so no `helm uninstall` (nor a deleted
//! `ichor-system`) takes a user's password or sessions with it. Created before the `helm
//! upgrade` that renders the issuer's and the controller's Roles into it.
//!
//! No credentials Secret is created here: a fresh installation starts in the per-user layout
//! (the issuer creates a user's Secret with the user's first entry), and the one Secret of
//! earlier releases, when it exists, is left exactly as it is for the controller's migration.

use ichor_renderers::auth::credentials::CREDENTIALS_SECRET_NAME;
use ichor_renderers::contract::{
    CONTROLLER_SERVICE_ACCOUNT, CREDENTIALS_NAMESPACE, ISSUER_SERVICE_ACCOUNT, NAMESPACE, PART_OF_LABEL,
    PART_OF_VALUE, USER_LABEL, user_of_credentials_secret,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, ListParams, PostParams};

use super::{InitError, kube_message};
use crate::commands::user::bootstrap::FIELD_MANAGER;

/// The namespace as `ichor init` creates it: its name and Ichor's part-of label, nothing else.
pub fn credentials_namespace() -> Namespace {
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some(CREDENTIALS_NAMESPACE.to_owned());
    namespace.metadata.labels = Some([(PART_OF_LABEL.to_owned(), PART_OF_VALUE.to_owned())].into());
    namespace
}

/// Creates [`CREDENTIALS_NAMESPACE`] unless it exists. Returns whether this call created it (an
/// existing one, or one another run created in between, is kept as it is).
///
/// # Errors
/// [`InitError::Kube`] naming the namespace, when it can be neither read nor created.
pub async fn ensure_credentials_namespace(client: kube::Client) -> Result<bool, InitError> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let existing = namespaces.get_opt(CREDENTIALS_NAMESPACE).await.map_err(|e| {
        InitError::Kube(format!(
            "cannot read Namespace {CREDENTIALS_NAMESPACE}: {}",
            kube_message(&e)
        ))
    })?;
    if existing.is_some() {
        check_existing(client).await?;
        return Ok(false);
    }
    let post = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    match namespaces.create(&post, &credentials_namespace()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            check_existing(client).await?;
            Ok(false)
        }
        Err(e) => Err(InitError::Kube(format!(
            "cannot create Namespace {CREDENTIALS_NAMESPACE}: {}",
            kube_message(&e)
        ))),
    }
}

/// Refuses an existing namespace holding anything Ichor does not put there: a RoleBinding but the
/// chart's two, a Secret that is not a user's credentials, or — in an installation that still
/// keeps its credentials in the legacy Secret, where nothing has moved a user out — any user's
/// Secret at all. Someone who made the namespace before Ichor (a tenant's self-service
/// namespace, say) would otherwise keep the rights it gave them, and a Secret they planted would
/// be read as a user's password.
///
/// # Errors
/// [`InitError::ForeignCredentialsNamespace`] naming what was found; [`InitError::Kube`] when
/// the namespace cannot be inspected (it is not taken on trust).
async fn check_existing(client: kube::Client) -> Result<(), InitError> {
    let cannot = |what: &str, e: &kube::Error| {
        InitError::Kube(format!(
            "cannot list {what} in Namespace {CREDENTIALS_NAMESPACE} to check that it holds only              Ichor's: {}",
            kube_message(e)
        ))
    };
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), CREDENTIALS_NAMESPACE);
    let bindings = bindings
        .list(&ListParams::default())
        .await
        .map_err(|e| cannot("RoleBindings", &e))?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), CREDENTIALS_NAMESPACE);
    let secrets = secrets
        .list_metadata(&ListParams::default())
        .await
        .map_err(|e| cannot("Secrets", &e))?;
    let legacy: Api<Secret> = Api::namespaced(client, NAMESPACE);
    let legacy = legacy
        .get_metadata_opt(CREDENTIALS_SECRET_NAME)
        .await
        .map_err(|e| {
            InitError::Kube(format!(
                "cannot read Secret {NAMESPACE}/{CREDENTIALS_SECRET_NAME}: {}",
                kube_message(&e)
            ))
        })?
        .is_some();
    let bindings: Vec<_> = bindings.items.iter().map(binding_view).collect();
    let secrets: Vec<_> = secrets
        .items
        .iter()
        .map(|s| SecretView {
            name: s.metadata.name.clone().unwrap_or_default(),
            user_label: s
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(USER_LABEL))
                .cloned(),
        })
        .collect();
    match foreign(&bindings, &secrets, legacy) {
        found if found.is_empty() => Ok(()),
        found => Err(InitError::ForeignCredentialsNamespace {
            found: found.join(", "),
        }),
    }
}

/// A RoleBinding as the check sees it: its name, its Role and its subjects (`kind:namespace/name`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct BindingView {
    name: String,
    role: String,
    subjects: Vec<String>,
}

/// A Secret's metadata as the check sees it (a metadata list carries no type or data: those are
/// held to the credentials rules by the chart's admission policy on every write).
#[derive(Debug, Clone, PartialEq, Eq)]
struct SecretView {
    name: String,
    user_label: Option<String>,
}

fn binding_view(binding: &RoleBinding) -> BindingView {
    BindingView {
        name: binding.metadata.name.clone().unwrap_or_default(),
        role: format!("{}/{}", binding.role_ref.kind, binding.role_ref.name),
        subjects: binding
            .subjects
            .iter()
            .flatten()
            .map(|s| {
                format!(
                    "{}:{}/{}",
                    s.kind,
                    s.namespace.as_deref().unwrap_or_default(),
                    s.name
                )
            })
            .collect(),
    }
}

/// What in the namespace Ichor did not put there, named (empty: nothing). The chart's bindings
/// are `ichor-issuer` and `ichor-controller`, each binding the Role of its name to the
/// ServiceAccount of its name in `ichor-system`.
fn foreign(bindings: &[BindingView], secrets: &[SecretView], legacy_layout: bool) -> Vec<String> {
    let mut found = Vec::new();
    for b in bindings {
        let ours = [ISSUER_SERVICE_ACCOUNT, CONTROLLER_SERVICE_ACCOUNT].contains(&b.name.as_str())
            && b.role == format!("Role/{}", b.name)
            && b.subjects == [format!("ServiceAccount:{NAMESPACE}/{}", b.name)];
        if !ours {
            found.push(format!(
                "RoleBinding {} (of {} to {})",
                b.name,
                b.role,
                b.subjects.join(" ")
            ));
        }
    }
    for s in secrets {
        let user = user_of_credentials_secret(&s.name);
        let credentials = user.is_some() && s.user_label.as_deref() == user;
        if !credentials {
            found.push(format!("Secret {} (not a user's credentials)", s.name));
        } else if legacy_layout {
            found.push(format!(
                "Secret {} (a user's credentials, while this installation keeps them in                  {NAMESPACE}/{CREDENTIALS_SECRET_NAME} and nothing has moved any out)",
                s.name
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_namespace_carries_its_name_and_the_part_of_label_only() {
        let namespace = serde_json::to_value(credentials_namespace()).unwrap();
        assert_eq!(
            namespace["metadata"],
            serde_json::json!({"name": CREDENTIALS_NAMESPACE, "labels": {PART_OF_LABEL: PART_OF_VALUE}})
        );
        assert_eq!(namespace["kind"], "Namespace");
        assert!(namespace.get("spec").is_none(), "{namespace}");
    }

    fn chart_binding(name: &str) -> BindingView {
        BindingView {
            name: name.to_owned(),
            role: format!("Role/{name}"),
            subjects: vec![format!("ServiceAccount:{NAMESPACE}/{name}")],
        }
    }

    fn user_secret(user: &str) -> SecretView {
        SecretView {
            name: format!("ichor-user-{user}"),
            user_label: Some(user.to_owned()),
        }
    }

    #[test]
    fn the_charts_bindings_and_users_secrets_are_ichors() {
        let bindings = [chart_binding("ichor-issuer"), chart_binding("ichor-controller")];
        assert!(foreign(&bindings, &[user_secret("alice")], false).is_empty());
        assert!(foreign(&[], &[], true).is_empty());
    }

    #[test]
    fn a_tenants_binding_a_stray_secret_or_a_planted_entry_is_named() {
        let tenant = BindingView {
            name: "admin".to_owned(),
            role: "ClusterRole/admin".to_owned(),
            subjects: vec!["User:/mallory".to_owned()],
        };
        let mut widened = chart_binding("ichor-issuer");
        widened.subjects.push("User:/mallory".to_owned());
        let found = foreign(&[tenant, widened], &[], false);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("RoleBinding admin") && found[0].contains("User:/mallory"));
        let stray = SecretView {
            name: "default-token".to_owned(),
            user_label: None,
        };
        let mislabelled = SecretView {
            name: "ichor-user-alice".to_owned(),
            user_label: Some("bob".to_owned()),
        };
        assert_eq!(foreign(&[], &[stray, mislabelled], false).len(), 2);
        // Upgraded from the one legacy Secret, nothing has moved a user out yet: any user's
        // Secret was put there by someone else.
        let planted = foreign(&[], &[user_secret("admin")], true);
        assert_eq!(planted.len(), 1);
        assert!(planted[0].contains("ichor-user-admin"), "{planted:?}");
    }
}
