//! `ichor init --ui-url URL --cluster NAME`: turns Ichor users on for a cluster whose Ichor
//! chart is installed, with the caller's own kubeconfig and `helm`.
//!
//! # Checks (before any write)
//! - The `TalosCluster` must exist (so a typo writes nothing).
//! - The chart's deployed Helm release in `ichor-system` (`--release`, or the only one of chart
//!   `ichor`), read from its release Secret ([`release`]), and what it needs ([`release::decide`]):
//!   users already on at this URL (nothing to do), off (an upgrade), or on at another URL
//!   (refused: that would invalidate every token and kubeconfig).
//! - For an upgrade: `helm` runs (`--helm`, `$ICHOR_HELM`, else `helm` on PATH) and the
//!   release's own chart is written to a temporary directory.
//! - `--cluster` is at most 240 characters (the chart's limit, so that `<cluster>-talosconfig`
//!   is a name too).
//! - `--talosconfig` and `--kube-ca`, when given, are a usable talosconfig holding the cluster's
//!   context (named like it, or `--talos-context`) and a PEM certificate ([`talos_secret`]).
//!
//! # Writes, in order
//! 1. The namespace `ichor-credentials`, which holds one credentials Secret per user: created
//!    when absent ([`credentials`]), before the upgrade that renders the issuer's and the
//!    controller's Roles into it. No credentials Secret is created: a fresh installation starts
//!    with one Secret per user, and the one Secret of earlier releases (`ichor-user-credentials`),
//!    when it exists, is kept as it is (the controller migrates it).
//! 2. The first admin (`--admin-user`, role `admin`, generated password, `mustChange`), through
//!    [`bootstrap_user`]. The password is handed to the caller at once — before the next step,
//!    so it is printed also when that step fails. An existing user of that name is kept as it is.
//! 3. `helm upgrade <release> <its chart> --reuse-values` with `ichorUI.users.enabled=true` and
//!    `ichorUI.users.externalURL=<url>` (the issuer Deployment appears) and, when the release's
//!    `controller.rollout.clusters` does not list the cluster, that list with the cluster added
//!    (the controller then rolls it out), without waiting. With `--no-rollout` that list is left
//!    as the release has it.
//! 4. The switch: `spec.authentication.ichor = {enabled: true, url}` on the `TalosCluster` by
//!    JSON merge patch (other `spec.authentication` keys, such as `external`, are untouched).
//! 5. The Secret `<cluster>-talosconfig` the rollout reads, from `--talosconfig` and
//!    `--kube-ca`, when it is missing (an existing one is kept); never with `--no-rollout`.
//!
//! A second run creates nothing, upgrades nothing and switches nothing. Then the control planes
//! need `ichor config apply --cluster NAME` (an apiserver restart, one control plane at a time);
//! the command prints it, preceded by the `ichor init ... --talosconfig FILE --kube-ca FILE`
//! command when the Talos credentials Secret is still missing. With `--no-rollout` it prints
//! that the operator rolls the control planes out another way.

mod checks;
pub mod credentials;
mod error;
pub mod helm;
pub mod release;
mod report;
pub mod talos_secret;

pub use checks::{MAX_CLUSTER_NAME, check_cluster_name, check_ui_url};
pub use error::InitError;
use error::kube_message;

use std::{ffi::OsString, path::PathBuf, process::ExitCode};

use anyhow::Context as _;
use clap::Args;
use ichor_issuer::oidc::passwords::generate_password;
use ichor_renderers::{
    auth::Password,
    contract::CREDENTIALS_NAMESPACE,
    crd::{IchorUser, NAMESPACE, TalosCluster},
};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

use self::{
    helm::{HELM_ENV, Helm},
    release::{DEPLOYED_SELECTOR, Decision, RELEASE_SECRET_TYPE, Release, ReleaseError},
    talos_secret::TalosCredentials,
};

use crate::commands::user::bootstrap::{self, BootstrapError, FIELD_MANAGER, NewUser};

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
    /// The Helm release of the Ichor chart in ichor-system. Default: the only deployed one.
    #[arg(long, value_name = "NAME")]
    pub release: Option<String>,
    /// The helm binary. Default: $ICHOR_HELM, else `helm` on PATH.
    #[arg(long, value_name = "PATH")]
    pub helm: Option<OsString>,
    /// With --kube-ca: create the Secret <cluster>-talosconfig the rollout reads, when it is
    /// missing, from this talosconfig (os:admin). Only the cluster's context is stored:
    /// --talos-context, else the one named like --cluster (none such: refused).
    /// Example: --talosconfig ./talosconfig --kube-ca ./kube-ca.crt
    #[arg(long, value_name = "FILE", requires = "kube_ca")]
    pub talosconfig: Option<PathBuf>,
    /// The context of --talosconfig that holds this cluster's credentials, when it is not named
    /// like --cluster; the file's other contexts are not stored.
    /// Example: --talos-context prod-admin
    #[arg(long, value_name = "NAME", requires = "talosconfig")]
    pub talos_context: Option<String>,
    /// With --talosconfig: the cluster's Kubernetes CA (PEM), which verifies each control
    /// plane's /readyz during the rollout. Example: `kubectl config view --raw --minify -o
    /// jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d > kube-ca.crt`
    #[arg(long, value_name = "FILE", requires = "talosconfig")]
    pub kube_ca: Option<PathBuf>,
    /// Leave the chart's controller.rollout.clusters as the release has it and create no Secret
    /// <cluster>-talosconfig: the controller then holds no Talos credentials of this cluster,
    /// and you roll its control planes out another way (e.g. `ichor config apply --dir`).
    #[arg(long, conflicts_with_all = ["talosconfig", "kube_ca", "talos_context"])]
    pub no_rollout: bool,
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
    /// The Helm release (`None`: the only deployed release of the chart).
    pub release: Option<String>,
    /// The checked `--talosconfig` and `--kube-ca`, for a missing `<cluster>-talosconfig`.
    pub talos_credentials: Option<TalosCredentials>,
    /// Add the cluster to the release's `controller.rollout.clusters` and look at its Talos
    /// credentials Secret (false: `--no-rollout`, neither is touched).
    pub rollout: bool,
}

/// The Secret `<cluster>-talosconfig` after `ichor init`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TalosSecret {
    /// It existed and was kept.
    Kept,
    /// It was created from `--talosconfig` and `--kube-ca`.
    Created,
    /// It does not exist (no files were given): the rollout cannot run until it does.
    Missing,
    /// Not looked at: the TalosCluster is outside `ichor-system`, which the controller does not
    /// roll out.
    NotApplicable,
    /// Not looked at, not created: `--no-rollout` (the operator rolls out another way).
    NotRolledOut,
}

/// What `ichor init` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitReport {
    /// The namespace holding the per-user credentials Secrets was created (it did not exist).
    pub created_namespace: bool,
    /// The first admin was created (false: a user of that name existed and was kept).
    pub created_admin: bool,
    /// The Helm release of the chart.
    pub release: String,
    /// `helm upgrade` ran (false: users were on at this URL and the cluster listed already).
    pub upgraded: bool,
    /// The `controller.rollout.clusters` the upgrade set, when the cluster had to be added.
    pub rollout_clusters: Option<Vec<String>>,
    /// The release's `controller.rollout.clusters` lists the cluster after the run (it did
    /// already, or the upgrade added it).
    pub rolled_out: bool,
    /// The Talos credentials Secret.
    pub talos_secret: TalosSecret,
    /// `spec.authentication.ichor` changed (false: it was already so).
    pub switched: bool,
}

/// Finds the chart's deployed Helm release in `ichor-system`: `wanted`, or the only deployed
/// release of chart `ichor` (releases of other charts are skipped).
///
/// # Errors
/// [`InitError::ReleaseName`], [`InitError::NoRelease`], [`InitError::SeveralReleases`],
/// [`InitError::Release`], [`InitError::Kube`].
pub async fn find_release(client: kube::Client, wanted: Option<&str>) -> Result<Release, InitError> {
    if let Some(name) = wanted
        && (name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'))
    {
        return Err(InitError::ReleaseName(name.to_owned()));
    }
    let secrets: Api<Secret> = Api::namespaced(client, NAMESPACE);
    let selector = match wanted {
        Some(name) => format!("{DEPLOYED_SELECTOR},name={name}"),
        None => DEPLOYED_SELECTOR.to_owned(),
    };
    let list = secrets
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| {
            InitError::Kube(format!(
                "cannot list the Helm release Secrets in {NAMESPACE}: {}",
                kube_message(&e)
            ))
        })?;
    let mut found: Vec<Release> = Vec::new();
    for secret in list.items {
        if secret.type_.as_deref() != Some(RELEASE_SECRET_TYPE) {
            continue;
        }
        let name = secret
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("name"))
            .cloned()
            .unwrap_or_default();
        if wanted.is_some_and(|w| w != name) {
            continue;
        }
        let bad = |error| InitError::Release {
            release: name.clone(),
            error,
        };
        let data = secret
            .data
            .as_ref()
            .and_then(|d| d.get("release"))
            .ok_or_else(|| bad(ReleaseError::Json("the Secret has no data.release".to_owned())))?;
        let labels = secret.metadata.labels.clone().unwrap_or_default();
        let secret_name = secret.metadata.name.clone().unwrap_or_default();
        match release::decode_release(&data.0)
            .and_then(|r| release::check_record(&secret_name, &labels, NAMESPACE, &r).map(|()| r))
        {
            Ok(r) => found.push(r),
            Err(ReleaseError::OtherChart(_)) if wanted.is_none() => {}
            Err(error) => return Err(bad(error)),
        }
    }
    // One deployed revision per release; should a broken history hold more, the latest counts.
    found.sort_by(|a, b| a.name.cmp(&b.name).then(b.version.cmp(&a.version)));
    found.dedup_by(|later, kept| later.name == kept.name);
    match found.len() {
        0 => Err(InitError::NoRelease {
            which: wanted.map(|w| format!("{w} ")).unwrap_or_default(),
        }),
        1 => Ok(found.remove(0)),
        _ => Err(InitError::SeveralReleases(
            found.into_iter().map(|r| r.name).collect(),
        )),
    }
}

/// Runs the checks, then the five writes, through `client` and `helm`. `on_password` gets the
/// first admin's name and password as soon as the admin exists, before the upgrade is
/// attempted.
///
/// # Errors
/// The first check or step that failed; no write happens before every check passed, and every
/// write before a failing step stays done.
pub async fn init_cluster(
    client: kube::Client,
    helm: &Helm,
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

    let release = find_release(client.clone(), plan.release.as_deref()).await?;
    let decision = release::decide(&release, &plan.ui_url).map_err(|other| InitError::OtherIssuerUrl {
        release: release.name.clone(),
        current: other.current,
        wanted: plan.ui_url.clone(),
    })?;
    // The controller rolls out TalosClusters of its own namespace only.
    let in_namespace = plan.namespace == NAMESPACE;
    let listed = in_namespace && release::rollout_clusters(&release).contains(&plan.cluster);
    let rollout_clusters = if in_namespace && plan.rollout {
        release::add_rollout_cluster(&release, &plan.cluster)
    } else {
        None
    };
    let rolled_out = listed || rollout_clusters.is_some();
    let chart_dir = match (decision, &rollout_clusters) {
        (Decision::AlreadyOn, None) => None,
        _ => {
            helm.check().await?;
            let bad = |error| InitError::Release {
                release: release.name.clone(),
                error,
            };
            let dir = tempfile::Builder::new()
                .prefix("ichor-chart-")
                .tempdir()
                .map_err(|e| {
                    bad(ReleaseError::Write(
                        "a temporary directory".to_owned(),
                        e.to_string(),
                    ))
                })?;
            release::write_chart(&release.chart, dir.path()).map_err(bad)?;
            Some(dir)
        }
    };

    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let talos_secret_name = talos_secret::secret_name(&plan.cluster);
    let talos_secret_exists = if in_namespace && plan.rollout {
        Some(
            secrets
                .get_opt(&talos_secret_name)
                .await
                .map_err(|e| {
                    InitError::Kube(format!(
                        "cannot read Secret {NAMESPACE}/{talos_secret_name}: {}",
                        kube_message(&e)
                    ))
                })?
                .is_some(),
        )
    } else {
        None
    };

    // 1. The credentials namespace (an existing legacy Secret is left as it is).
    let created_namespace = credentials::ensure_credentials_namespace(client.clone()).await?;
    let post = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
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

    // 3. The issuer.
    let upgraded = match &chart_dir {
        Some(dir) => {
            helm.upgrade(
                &release.name,
                dir.path(),
                &plan.ui_url,
                rollout_clusters.as_deref(),
            )
            .await?;
            true
        }
        None => false,
    };
    drop(chart_dir);

    // 4. The switch.
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

    // 5. The Talos credentials the rollout reads.
    let talos_secret = match (talos_secret_exists, &plan.talos_credentials) {
        (None, _) if !plan.rollout => TalosSecret::NotRolledOut,
        (None, _) => TalosSecret::NotApplicable,
        (Some(true), _) => TalosSecret::Kept,
        (Some(false), None) => TalosSecret::Missing,
        (Some(false), Some(credentials)) => {
            match secrets.create(&post, &credentials.secret(&plan.cluster)).await {
                Ok(_) => TalosSecret::Created,
                Err(kube::Error::Api(status)) if status.code == 409 => TalosSecret::Kept,
                Err(e) => {
                    return Err(InitError::Kube(format!(
                        "cannot create Secret {NAMESPACE}/{talos_secret_name}: {}",
                        kube_message(&e)
                    )));
                }
            }
        }
    };
    Ok(InitReport {
        created_namespace,
        created_admin,
        release: release.name,
        upgraded,
        rollout_clusters,
        rolled_out,
        talos_secret,
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
    check_cluster_name(&args.cluster)?;
    let plan = InitPlan {
        ui_url: check_ui_url(&args.ui_url)?,
        talos_credentials: match (&args.talosconfig, &args.kube_ca) {
            (Some(config), Some(ca)) => Some(TalosCredentials::load(
                config,
                ca,
                &args.cluster,
                args.talos_context.as_deref(),
            )?),
            _ => None,
        },
        cluster: args.cluster,
        namespace: args.namespace,
        admin_user: args.admin_user,
        release: args.release,
        rollout: !args.no_rollout,
    };
    let helm = Helm::choose(args.helm, std::env::var_os(HELM_ENV));
    let report = crate::commands::auth::flow::runtime()?.block_on(async {
        let client = kube::Client::try_default()
            .await
            .context("cannot use your kubeconfig (KUBECONFIG or ~/.kube/config)")?;
        let mut print = |name: &str, password: &Password| eprintln!("{}", password_message(name, password));
        anyhow::Ok(init_cluster(client, &helm, &plan, Timestamp::now(), &mut print).await?)
    })?;
    if report.created_namespace {
        eprintln!("Created Namespace {CREDENTIALS_NAMESPACE} (one credentials Secret per user).");
    }
    if !report.created_admin {
        eprintln!(
            "IchorUser {NAMESPACE}/{} exists already; it was kept as it is (no password was set).",
            plan.admin_user
        );
    }
    report::print_release(&report, &plan);
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
    report::print_next(&report, &plan);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn no_rollout_conflicts_with_the_credentials_flags() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            init: InitArgs,
        }
        let base = [
            "ichor",
            "--ui-url",
            "https://ichor.example.com",
            "--cluster",
            "prod",
        ];
        let parsed = Cli::try_parse_from(base.iter().chain(&["--no-rollout"])).unwrap();
        assert!(parsed.init.no_rollout);
        let e =
            Cli::try_parse_from(
                base.iter()
                    .chain(&["--no-rollout", "--talosconfig", "t", "--kube-ca", "c"]),
            )
            .err()
            .unwrap();
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict);
        let e = Cli::try_parse_from(base.iter().chain(&["--talos-context", "prod"]))
            .err()
            .unwrap();
        assert_eq!(e.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }
}
