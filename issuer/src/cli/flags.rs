//! The flags of `ichor-issuer` (each with an environment variable) and their bounds.

use super::config::{Config, ConfigError};
use clap::{Parser, ValueEnum};
use ichor_server::logging::LogFormat;
use jiff::SignedDuration;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Default mount of the `ichor-oidc-tls` Secret (`tls.crt`, `tls.key`).
pub const DEFAULT_ICHOR_TLS_DIR: &str = "/var/run/ichor/oidc-tls";
/// Default path of `keys.json` in the mounted `ichor-oidc-signing` Secret.
pub const DEFAULT_KEYS_FILE: &str = "/var/run/ichor/oidc-signing/keys.json";
/// Default `--metrics-listen` (the controller's metrics port is 8080; the issuer's differs so that
/// both can run on one machine).
pub const DEFAULT_METRICS_LISTEN: &str = "0.0.0.0:9090";
/// Shortest accepted `--token-ttl`.
pub const MIN_TOKEN_TTL: SignedDuration = SignedDuration::from_mins(1);
/// Longest accepted `--token-ttl`.
pub const MAX_TOKEN_TTL: SignedDuration = SignedDuration::from_mins(15);
/// Shortest accepted `--refresh-lifetime`.
pub const MIN_REFRESH_LIFETIME: SignedDuration = SignedDuration::from_hours(1);
/// Longest accepted `--refresh-lifetime`.
pub const MAX_REFRESH_LIFETIME: SignedDuration = SignedDuration::from_hours(720);
/// The cluster CA a pod's ServiceAccount mount holds (public data): `--kube-ca-file`'s default
/// with `--store kube`.
pub const IN_CLUSTER_CA_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
/// The largest `--kube-ca-file` read (a CA bundle is a few KiB; the same bound as `ichor dev`).
pub const MAX_KUBE_CA_BYTES: u64 = 256 * 1024;
/// The default `--kube-cluster-name`.
pub const DEFAULT_KUBE_CLUSTER_NAME: &str = "ichor";

const EXAMPLES: &str = "\
Examples:
  # In a cluster (the helm chart's arguments): the Ichor leaf on both listeners
  ichor-issuer --external-url https://ichor.example.com \\
    --ichor-tls-dir /var/run/ichor/oidc-tls --keys-file /var/run/ichor/oidc-signing/keys.json

  # The operator's certificate on 8443 (cert-manager renewals are picked up without a restart)
  ichor-issuer --external-url https://ichor.example.com \\
    --tls-cert-file /etc/ichor/ui-tls/tls.crt --tls-key-file /etc/ichor/ui-tls/tls.key \\
    --trusted-proxy 10.0.12.7/32 --trusted-proxy 10.0.12.8/32 --log-format json

  # On one machine, with files for users and state
  ichor-issuer --external-url https://127.0.0.1:8443 --listen 127.0.0.1:8443 \\
    --internal-listen 127.0.0.1:8444 --store local \\
    --local-users-dir ./users --local-state-dir ./state \\
    --ichor-tls-dir ./state/oidc-tls --keys-file ./state/oidc-signing/keys.json";

/// Where users and credentials are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StoreKind {
    /// `IchorUser` objects and credentials Secrets: one per user in `ichor-credentials`, or the
    /// legacy `ichor-user-credentials` while an installation migrates from it (in a cluster).
    Kube,
    /// Files: a directory of `IchorUser` manifests and a state directory (`ichor dev`).
    Local,
}

/// The flags of `ichor-issuer`, as given (see [`Flags::validate`]).
#[derive(Debug, Clone, Parser)]
#[command(
    name = env!("CARGO_PKG_NAME"),
    version,
    about = "The Ichor OpenID Connect issuer: sign-in for the Ichor UI and CLI, ID tokens for the kube-apiserver.",
    after_help = EXAMPLES
)]
pub struct Flags {
    /// The issuer's public URL (https), exactly as the kube-apiserver and the clients see it;
    /// it is the `iss` of every token.
    #[arg(long, env = "ICHOR_ISSUER_EXTERNAL_URL", value_name = "URL")]
    pub external_url: String,

    /// Address of the external HTTPS listener (OIDC, UI, API, `/healthz`, `/readyz`).
    #[arg(
        long,
        env = "ICHOR_ISSUER_LISTEN",
        default_value = "0.0.0.0:8443",
        value_name = "ADDR:PORT"
    )]
    pub listen: SocketAddr,

    /// Address of the internal HTTPS listener (discovery and JWKS for the kube-apiserver, served
    /// with the Ichor leaf).
    #[arg(
        long,
        env = "ICHOR_ISSUER_INTERNAL_LISTEN",
        default_value = "0.0.0.0:8444",
        value_name = "ADDR:PORT"
    )]
    pub internal_listen: SocketAddr,

    /// Address of the plain-HTTP listener of `/metrics` (and `/healthz`, `/readyz`); keep it
    /// inside the pod network.
    #[arg(
        long,
        env = "ICHOR_ISSUER_METRICS_LISTEN",
        default_value = DEFAULT_METRICS_LISTEN,
        value_name = "ADDR:PORT"
    )]
    pub metrics_listen: SocketAddr,

    /// The operator's certificate chain (PEM) for the external listener; with --tls-key-file.
    /// Default: the Ichor leaf from --ichor-tls-dir.
    #[arg(long, env = "ICHOR_ISSUER_TLS_CERT_FILE", value_name = "PATH")]
    pub tls_cert_file: Option<PathBuf>,

    /// The private key (PEM: PKCS#8, PKCS#1 or SEC1) of --tls-cert-file.
    #[arg(long, env = "ICHOR_ISSUER_TLS_KEY_FILE", value_name = "PATH")]
    pub tls_key_file: Option<PathBuf>,

    /// The mounted `ichor-oidc-tls` Secret (files `tls.crt` and `tls.key`).
    #[arg(long, env = "ICHOR_ISSUER_ICHOR_TLS_DIR", default_value = DEFAULT_ICHOR_TLS_DIR, value_name = "DIR")]
    pub ichor_tls_dir: PathBuf,

    /// The `keys.json` of the mounted `ichor-oidc-signing` Secret.
    #[arg(long, env = "ICHOR_ISSUER_KEYS_FILE", default_value = DEFAULT_KEYS_FILE, value_name = "PATH")]
    pub keys_file: PathBuf,

    /// Where users and credentials live.
    #[arg(long, env = "ICHOR_ISSUER_STORE", value_enum, default_value = "kube")]
    pub store: StoreKind,

    /// With --store local: the directory of `IchorUser` manifests.
    #[arg(long, env = "ICHOR_ISSUER_LOCAL_USERS_DIR", value_name = "DIR")]
    pub local_users_dir: Option<PathBuf>,

    /// With --store local: the directory of credentials and other state.
    #[arg(long, env = "ICHOR_ISSUER_LOCAL_STATE_DIR", value_name = "DIR")]
    pub local_state_dir: Option<PathBuf>,

    /// Lifetime of an ID token when `IchorInstallation.spec.users` does not set one (1m to 15m).
    #[arg(
        long,
        env = "ICHOR_ISSUER_TOKEN_TTL",
        default_value = "5m",
        value_name = "DURATION"
    )]
    pub token_ttl: String,

    /// Absolute lifetime of a refresh-token family when `IchorInstallation.spec.users` does not
    /// set one (1h to 720h).
    #[arg(
        long,
        env = "ICHOR_ISSUER_REFRESH_LIFETIME",
        default_value = "12h",
        value_name = "DURATION"
    )]
    pub refresh_lifetime: String,

    /// A reverse proxy whose `X-Forwarded-For` is believed, as its exact address (`10.0.12.7/32`,
    /// `fd00::7/128`; a wider network is warned about, since anyone inside it could forge the
    /// header); repeatable (comma-separated in the environment variable).
    #[arg(
        long,
        env = "ICHOR_ISSUER_TRUSTED_PROXY",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    pub trusted_proxy: Vec<String>,

    /// The most refresh rotations written a minute per session (refresh family), per replica,
    /// past a burst of 20. Each is a put of the user's Secret into etcd, whose history until the
    /// next compaction counts against its quota; the cap keeps one account's sessions from
    /// filling it. A session needs one rotation per ID token lifetime. 0: no write cap at all,
    /// neither this one nor those on the sessions a user starts and on the changes users make to
    /// their own credentials (load tests only).
    #[arg(
        long,
        env = "ICHOR_ISSUER_FAMILY_WRITES_PER_MINUTE",
        default_value_t = crate::oidc::limits::DEFAULT_FAMILY_WRITES_PER_MINUTE,
        value_name = "N"
    )]
    pub family_writes_per_minute: u32,

    /// Log line format.
    #[arg(long, env = "ICHOR_ISSUER_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

/// The flags of the kubeconfigs `GetMyKubeconfig` serves (apart from [`Flags`], which `ichor
/// dev` builds itself; the binary parses both, see [`IssuerArgs`]).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct KubeconfigFlags {
    /// The kube-apiserver URL written into the kubeconfigs `GetMyKubeconfig` serves (https),
    /// when the clients reach the cluster at another address than the issuer's own client does.
    #[arg(
        long,
        env = "ICHOR_ISSUER_KUBE_API_SERVER_URL",
        value_name = "URL",
        visible_alias = "kube-api-server"
    )]
    pub kube_api_server_url: Option<String>,

    /// The `tls-server-name` written into those kubeconfigs, when the server URL's host is not in
    /// the kube-apiserver's certificate.
    #[arg(long, env = "ICHOR_ISSUER_KUBE_API_TLS_SERVER_NAME", value_name = "DNS-NAME")]
    pub kube_api_tls_server_name: Option<String>,

    /// The cluster's CA certificate(s) (PEM, certificates only) written into those kubeconfigs.
    /// With --store kube it defaults to the ServiceAccount's
    /// /var/run/secrets/kubernetes.io/serviceaccount/ca.crt; when that is absent, kubeconfigs
    /// carry no CA data (the client's system roots verify the server).
    #[arg(long, env = "ICHOR_ISSUER_KUBE_CA_FILE", value_name = "PATH")]
    pub kube_ca_file: Option<PathBuf>,

    /// The cluster's name in those kubeconfigs (cluster and context entries).
    #[arg(
        long,
        env = "ICHOR_ISSUER_KUBE_CLUSTER_NAME",
        default_value = DEFAULT_KUBE_CLUSTER_NAME,
        value_name = "NAME"
    )]
    pub kube_cluster_name: String,

    /// The `TalosCluster` (in ichor-system) whose spec.endpoint those kubeconfigs name, when
    /// there are several (the chart's ichorUI.users.kubeconfigCluster). Empty: the one named like
    /// --kube-cluster-name, else the only one; with several and none of them, kubeconfigs are
    /// refused (a clear error) unless --kube-api-server-url is set.
    #[arg(long, env = "ICHOR_ISSUER_KUBECONFIG_CLUSTER", value_name = "NAME")]
    pub kubeconfig_cluster: Option<String>,
}

/// The site's own OpenID Connect provider, accepted beside Ichor's issuer (all optional; none
/// given: Ichor's issuer only). The chart's `ichorUI.oidc.*` values.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ExternalFlags {
    /// The external provider's issuer URL (https), exactly as its tokens' `iss`.
    #[arg(long, env = "ICHOR_ISSUER_EXTERNAL_ISSUER_URL", value_name = "URL")]
    pub external_issuer_url: Option<String>,
    /// The OAuth client registered at the provider for Ichor's UI and API (the `aud` of the ID
    /// tokens they accept).
    #[arg(long, env = "ICHOR_ISSUER_EXTERNAL_CLIENT_ID", value_name = "ID")]
    pub external_client_id: Option<String>,
    /// The client (and audience) the kube-apiserver trusts for the provider, written into an
    /// external user's kubeconfig. Required with --external-issuer-url, and another client than
    /// --external-client-id (the UI's tokens must not be kube-apiserver credentials).
    #[arg(long, env = "ICHOR_ISSUER_EXTERNAL_KUBE_CLIENT_ID", value_name = "ID")]
    pub external_kube_client_id: Option<String>,
    /// PEM CA certificate(s) trusted for TLS to the provider, besides the system's roots.
    #[arg(long, env = "ICHOR_ISSUER_EXTERNAL_CA_FILE", value_name = "PATH")]
    pub external_ca_file: Option<PathBuf>,
    /// The claim naming the user (default `email`, as the kube-apiserver's default).
    #[arg(long, env = "ICHOR_ISSUER_EXTERNAL_USERNAME_CLAIM", value_name = "CLAIM")]
    pub external_username_claim: Option<String>,
    /// The claim listing the groups (default `groups`).
    #[arg(long, env = "ICHOR_ISSUER_EXTERNAL_GROUPS_CLAIM", value_name = "CLAIM")]
    pub external_groups_claim: Option<String>,
    /// The prefix of user names (default `oidc:`; not empty, not `ichor:`, not `system:`).
    #[arg(long, env = "ICHOR_ISSUER_EXTERNAL_USERNAME_PREFIX", value_name = "PREFIX")]
    pub external_username_prefix: Option<String>,
    /// The prefix of group names (default `oidc:`; same rules).
    #[arg(long, env = "ICHOR_ISSUER_EXTERNAL_GROUPS_PREFIX", value_name = "PREFIX")]
    pub external_groups_prefix: Option<String>,
    /// A provider group (unprefixed) the API keeps on an external caller and may impersonate;
    /// repeatable (comma-separated in the environment variable). Other groups count for
    /// kubectl only.
    #[arg(
        long,
        env = "ICHOR_ISSUER_EXTERNAL_IMPERSONABLE_GROUP",
        value_name = "GROUP",
        value_delimiter = ','
    )]
    pub external_impersonable_group: Vec<String>,
}

impl ExternalFlags {
    /// Checks the flags (reading the CA file, at most 256 KiB); `ichor_issuer` is Ichor's own
    /// issuer. `None`: no external provider.
    ///
    /// # Errors
    /// [`ConfigError::External`] naming the flag.
    pub fn validate(
        self,
        ichor_issuer: &str,
    ) -> Result<Option<crate::external::ExternalProvider>, ConfigError> {
        use std::io::Read as _;
        let max = crate::external::provider::MAX_CA_BYTES as u64;
        let ca = self.external_ca_file.map(|path| {
            let mut bytes = Vec::new();
            let read = std::fs::File::open(&path)
                .and_then(|f| f.take(max + 1).read_to_end(&mut bytes))
                .map(|_| bytes)
                .map_err(|e| e.to_string());
            (path.display().to_string(), read)
        });
        let input = crate::external::provider::ProviderInput {
            issuer_url: self.external_issuer_url,
            client_id: self.external_client_id,
            kube_client_id: self.external_kube_client_id,
            ca,
            username_claim: self.external_username_claim,
            groups_claim: self.external_groups_claim,
            username_prefix: self.external_username_prefix,
            groups_prefix: self.external_groups_prefix,
            impersonable_groups: self.external_impersonable_group,
        };
        Ok(input.validate(ichor_issuer)?)
    }
}

/// The internal listener's discovery document (apart from [`Flags`], which `ichor dev` builds
/// itself; the binary parses both, see [`IssuerArgs`]).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct InternalFlags {
    /// The jwks_uri the internal listener's discovery document advertises (https), instead of
    /// the host the caller connected to. Unset (the default) follows the issuer Service's
    /// ClusterIP when the Service is recreated; set it only to pin another address the
    /// kube-apiserver reaches with the Ichor leaf's SANs, e.g.
    /// https://ichor-issuer.ichor-system.svc:8444/oidc/jwks.
    #[arg(long, env = "ICHOR_ISSUER_INTERNAL_JWKS_URI", value_name = "URL")]
    pub internal_jwks_uri: Option<String>,
}

/// Everything `ichor-issuer` parses: [`Flags`], [`KubeconfigFlags`], [`InternalFlags`] and
/// [`ExternalFlags`].
#[derive(Debug, Clone, Parser)]
#[command(
    name = env!("CARGO_PKG_NAME"),
    version,
    about = "The Ichor OpenID Connect issuer: sign-in for the Ichor UI and CLI, ID tokens for the kube-apiserver.",
    after_help = EXAMPLES
)]
pub struct IssuerArgs {
    /// The issuer's flags.
    #[command(flatten)]
    pub flags: Flags,
    /// The kubeconfig flags.
    #[command(flatten)]
    pub kubeconfig: KubeconfigFlags,
    /// The internal discovery document's flags.
    #[command(flatten)]
    pub internal: InternalFlags,
    /// The external provider's flags.
    #[command(flatten)]
    pub external: ExternalFlags,
}

impl IssuerArgs {
    /// Checks all flags and builds the [`Config`].
    ///
    /// # Errors
    /// The first flag refused.
    pub fn validate(self) -> Result<Config, ConfigError> {
        let mut config = self.flags.validate()?;
        config.kubeconfig = self.kubeconfig.validate(&config.store)?;
        config.internal_jwks_uri = self.internal.validate()?;
        config.external = self.external.validate(&config.issuer)?;
        Ok(config)
    }
}
