//! Why `ichor init` stopped: one sentence each, naming the flag, object or program, and what to
//! do. Never carries the password or the content of a credentials file.

use ichor_renderers::crd::NAMESPACE;

use super::{helm, release::ReleaseError};
use crate::commands::user::bootstrap::BootstrapError;

/// Why `ichor init` stopped. Never carries the password.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// `--ui-url` is not usable.
    #[error("--ui-url {0:?}: {1}")]
    UiUrl(String, String),
    /// `--cluster` cannot name a TalosCluster.
    #[error(
        "--cluster {0:?} is not a TalosCluster name (lowercase letters, digits, '-' and '.', \
         starting and ending with a letter or digit, at most 240 characters)"
    )]
    ClusterName(String),
    /// `--cluster` is longer than the chart takes.
    #[error(
        "--cluster is {0} characters long; at most 240 are allowed (the chart's \
         controller.rollout.clusters takes names of up to 240, so that the Secret \
         <cluster>-talosconfig is a name too); nothing was written"
    )]
    ClusterNameTooLong(usize),
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
    /// `--release` is not a release name.
    #[error("--release {0:?} is not a Helm release name (lowercase letters, digits, '-' and '.')")]
    ReleaseName(String),
    /// No deployed release of the chart.
    #[error(
        "no deployed Helm release {which}of chart ichor in {NAMESPACE}; install the chart first: \
         helm install ichor helm/ichor -n {NAMESPACE}"
    )]
    NoRelease {
        /// `"<name> "` when `--release` was given, else empty.
        which: String,
    },
    /// Several deployed releases of the chart.
    #[error(
        "{NAMESPACE} has several deployed Helm releases of chart ichor ({}); choose one with --release",
        .0.join(", ")
    )]
    SeveralReleases(Vec<String>),
    /// A release record cannot be used.
    #[error(
        "Helm release {release} in {NAMESPACE}: {error}; choose another with --release, or upgrade it with helm"
    )]
    Release {
        /// The release name.
        release: String,
        /// What is wrong.
        error: ReleaseError,
    },
    /// The credentials namespace exists with something in it that Ichor did not put there.
    #[error(
        "Namespace {namespace} exists and holds what Ichor does not put there: {found}. Ichor keeps          every user's password in it, so whoever controls it could sign in as any user; remove          those objects (or the namespace, if Ichor never ran) and run `ichor init` again",
        namespace = ichor_renderers::contract::CREDENTIALS_NAMESPACE
    )]
    ForeignCredentialsNamespace {
        /// What was found, named.
        found: String,
    },
    /// Users are on with another issuer URL.
    #[error(
        "Helm release {release} already runs the issuer at {current}, not {wanted}. Changing the issuer \
         URL invalidates every token and downloaded kubeconfig; to do it deliberately, run \
         `helm upgrade {release} helm/ichor -n {NAMESPACE} --reuse-values --set-string \
         ichorUI.users.externalURL={}`, then `ichor init` again",
        helm::set_value(.wanted)
    )]
    OtherIssuerUrl {
        /// The release name.
        release: String,
        /// Its issuer URL.
        current: String,
        /// `--ui-url`.
        wanted: String,
    },
    /// The helm binary does not run.
    #[error(
        "cannot run helm ({program}): {reason}; install helm v3.10 or later, or name it with --helm PATH or {}",
        helm::HELM_ENV
    )]
    NoHelm {
        /// The program tried.
        program: String,
        /// Why it did not run.
        reason: String,
    },
    /// `helm upgrade` failed.
    #[error(
        "helm upgrade of release {release} failed (the Secret and the first admin are kept; run \
         `ichor init` again once it is fixed): {stderr}"
    )]
    Helm {
        /// The release name.
        release: String,
        /// The tail of helm's stderr.
        stderr: String,
    },
    /// A credentials file given to build `<cluster>-talosconfig` is not usable.
    #[error("{flag} {path}: {reason}; nothing was written")]
    CredentialsFile {
        /// `--talosconfig` or `--kube-ca`.
        flag: &'static str,
        /// The file.
        path: String,
        /// What is wrong (never the file's content).
        reason: String,
    },
}

/// A Kubernetes error as one sentence: the API's message, else the client's.
pub(crate) fn kube_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}
