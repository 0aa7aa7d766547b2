//! `ichor init --ui-url URL --cluster NAME`: turns Ichor users on for a cluster, with the caller's
//! own kubeconfig.
//!
//! # Order (first seed, Unit 9 amendment)
//! 0. The `TalosCluster` must exist (checked first, so a typo writes nothing).
//! 1. The `ichor-user-credentials` Secret: created empty when absent.
//! 2. The first admin (`--admin-user`, role `admin`, generated password, `mustChange`), through
//!    [`bootstrap_user`]. The password is handed to the caller at once — before the next step,
//!    so it is printed also when that step fails. An existing user of that name is kept as it is.
//! 3. The switch: `spec.authentication.ichor = {enabled: true, url}` on the `TalosCluster` by
//!    JSON merge patch (other `spec.authentication` keys, such as `external`, are untouched).
//!
//! Then the control planes need `ichor config apply --cluster NAME` (an apiserver restart, one
//! control plane at a time); the command prints it.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use ichor_issuer::oidc::passwords::generate_password;
use ichor_renderers::{
    auth::{Password, credentials::CREDENTIALS_SECRET_NAME},
    crd::{IchorUser, NAMESPACE, TalosCluster},
};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};

use crate::commands::{
    auth::issuer_url::check_url,
    user::bootstrap::{self, BootstrapError, FIELD_MANAGER, NewUser},
};

/// Arguments of `ichor init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// ichor-ui's external https URL: the issuer of every token, what browsers and the CLI use.
    #[arg(long, value_name = "URL")]
    pub ui_url: String,
    /// The TalosCluster whose kube-apiserver should trust Ichor's issuer.
    #[arg(long, value_name = "NAME")]
    pub cluster: String,
    /// The namespace of the TalosCluster.
    #[arg(long, value_name = "NAMESPACE", default_value = NAMESPACE)]
    pub namespace: String,
    /// The name of the first administrator.
    #[arg(long, value_name = "NAME", default_value = "admin")]
    pub admin_user: String,
}

/// What `ichor init` is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitPlan {
    /// The issuer URL (https, no trailing `/`).
    pub ui_url: String,
    /// The TalosCluster.
    pub cluster: String,
    /// Its namespace.
    pub namespace: String,
    /// The first administrator.
    pub admin_user: String,
}

/// What `ichor init` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitReport {
    /// The credentials Secret was created (it did not exist).
    pub created_secret: bool,
    /// The first admin was created (false: a user of that name existed and was kept).
    pub created_admin: bool,
    /// `spec.authentication.ichor` changed (false: it was already so).
    pub switched: bool,
}

/// Why `ichor init` stopped. Never carries the password.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// `--ui-url` is not usable.
    #[error("--ui-url {0:?}: {1}")]
    UiUrl(String, String),
    /// The TalosCluster does not exist.
    #[error("TalosCluster {namespace}/{name} does not exist; check --cluster and --namespace")]
    NoCluster {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
    },
    /// A Kubernetes call failed.
    #[error("{0}")]
    Kube(String),
    /// Creating the first admin failed.
    #[error("the first administrator was not created: {0}")]
    Admin(#[from] BootstrapError),
}

fn kube_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// Checks `--ui-url`: an absolute https URL without query, fragment or user info. Pure.
///
/// # Errors
/// [`InitError::UiUrl`].
pub fn check_ui_url(raw: &str) -> Result<String, InitError> {
    let trimmed = raw.trim_end_matches('/');
    let bad = |reason: &str| InitError::UiUrl(raw.to_owned(), reason.to_owned());
    let url = check_url("--ui-url", trimmed).map_err(|e| bad(&e.to_string()))?;
    if url.scheme() != "https" {
        return Err(bad("the kube-apiserver accepts only an https issuer"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("an issuer URL has no query or fragment"));
    }
    Ok(trimmed.to_owned())
}

/// Runs the three steps through `client`. `on_password` gets the first admin's name and
/// password as soon as the admin exists, before the switch is attempted.
///
/// # Errors
/// The first step that failed; everything before it stays done.
pub async fn init_cluster(
    client: kube::Client,
    plan: &InitPlan,
    now: Timestamp,
    on_password: &mut dyn FnMut(&str, &Password),
) -> Result<InitReport, InitError> {
    let clusters: Api<TalosCluster> = Api::namespaced(client.clone(), &plan.namespace);
    let cluster = clusters
        .get_opt(&plan.cluster)
        .await
        .map_err(|e| {
            InitError::Kube(format!(
                "cannot read TalosCluster {}/{}: {}",
                plan.namespace,
                plan.cluster,
                kube_message(&e)
            ))
        })?
        .ok_or_else(|| InitError::NoCluster {
            namespace: plan.namespace.clone(),
            name: plan.cluster.clone(),
        })?;

    // 1. The credentials Secret.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let post = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    let created_secret = match secrets.get_opt(CREDENTIALS_SECRET_NAME).await {
        Ok(Some(_)) => false,
        Ok(None) => {
            let secret: Secret = serde_json::from_value(serde_json::json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": CREDENTIALS_SECRET_NAME,
                    "namespace": NAMESPACE,
                    "labels": {"app.kubernetes.io/part-of": "ichor"},
                },
                "type": "Opaque",
            }))
            .map_err(|e| InitError::Kube(format!("cannot build Secret {CREDENTIALS_SECRET_NAME}: {e}")))?;
            match secrets.create(&post, &secret).await {
                Ok(_) => true,
                Err(kube::Error::Api(status)) if status.code == 409 => false,
                Err(e) => {
                    return Err(InitError::Kube(format!(
                        "cannot create Secret {NAMESPACE}/{CREDENTIALS_SECRET_NAME}: {}",
                        kube_message(&e)
                    )));
                }
            }
        }
        Err(e) => {
            return Err(InitError::Kube(format!(
                "cannot read Secret {NAMESPACE}/{CREDENTIALS_SECRET_NAME}: {}",
                kube_message(&e)
            )));
        }
    };

    // 2. The first admin.
    let users: Api<IchorUser> = Api::namespaced(client.clone(), NAMESPACE);
    let existing = users.get_opt(&plan.admin_user).await.map_err(|e| {
        InitError::Kube(format!(
            "cannot read IchorUser {NAMESPACE}/{}: {}",
            plan.admin_user,
            kube_message(&e)
        ))
    })?;
    let created_admin = if existing.is_some() {
        false
    } else {
        let password = generate_password().map_err(|e| BootstrapError::Invalid(e.to_string()))?;
        let admin = NewUser {
            name: plan.admin_user.clone(),
            roles: vec!["admin".to_owned()],
            display_name: None,
            email: None,
        };
        bootstrap::bootstrap_user(client.clone(), &admin, &password, now).await?;
        on_password(&admin.name, &password);
        true
    };

    // 3. The switch.
    let wanted = (true, plan.ui_url.as_str());
    let current = cluster
        .spec
        .authentication
        .as_ref()
        .and_then(|a| a.ichor.as_ref())
        .map(|i| (i.enabled, i.url.as_str()));
    let switched = current != Some(wanted);
    if switched {
        let patch = serde_json::json!({
            "spec": {"authentication": {"ichor": {"enabled": true, "url": plan.ui_url}}}
        });
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        clusters
            .patch(&plan.cluster, &params, &Patch::Merge(&patch))
            .await
            .map_err(|e| {
                InitError::Kube(format!(
                    "cannot set spec.authentication.ichor on TalosCluster {}/{}: {}",
                    plan.namespace,
                    plan.cluster,
                    kube_message(&e)
                ))
            })?;
    }
    Ok(InitReport {
        created_secret,
        created_admin,
        switched,
    })
}

/// The message printed once with the first admin's password (stderr).
pub fn password_message(name: &str, password: &Password) -> String {
    format!(
        "First administrator {name:?} created. Its password, shown only this once (it must be changed at \
         the first sign-in):\n\n    {}\n",
        password.expose()
    )
}

/// Runs `ichor init`.
///
/// # Errors
/// The step that failed, as one sentence; the password is printed before a later step can fail.
pub fn run(args: InitArgs) -> anyhow::Result<ExitCode> {
    let plan = InitPlan {
        ui_url: check_ui_url(&args.ui_url)?,
        cluster: args.cluster,
        namespace: args.namespace,
        admin_user: args.admin_user,
    };
    let report = crate::commands::auth::flow::runtime()?.block_on(async {
        let client = kube::Client::try_default()
            .await
            .context("cannot use your kubeconfig (KUBECONFIG or ~/.kube/config)")?;
        let mut print = |name: &str, password: &Password| eprintln!("{}", password_message(name, password));
        anyhow::Ok(init_cluster(client, &plan, Timestamp::now(), &mut print).await?)
    })?;
    if report.created_secret {
        eprintln!("Created Secret {NAMESPACE}/{CREDENTIALS_SECRET_NAME}.");
    }
    if !report.created_admin {
        eprintln!(
            "IchorUser {NAMESPACE}/{} exists already; it was kept as it is (no password was set).",
            plan.admin_user
        );
    }
    if report.switched {
        eprintln!(
            "TalosCluster {}/{}: spec.authentication.ichor = {{enabled: true, url: {}}}.",
            plan.namespace, plan.cluster, plan.ui_url
        );
    } else {
        eprintln!(
            "TalosCluster {}/{} already trusts {}.",
            plan.namespace, plan.cluster, plan.ui_url
        );
    }
    eprintln!(
        "\nNext, roll the change out to the control planes (restarts each kube-apiserver, one at a time; no \
         reboot):\n"
    );
    println!("ichor config apply --cluster {}", plan.cluster);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_ui_url_must_be_https_even_on_the_loopback() {
        assert!(check_ui_url("http://127.0.0.1:8443").is_err());
        assert!(check_ui_url("http://ichor.example.com").is_err());
        assert_eq!(
            check_ui_url("https://ichor.example.com/").unwrap(),
            "https://ichor.example.com"
        );
        assert!(check_ui_url("https://ichor.example.com/?x=1").is_err());
    }
}
