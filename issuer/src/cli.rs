//! The `ichor-issuer` command line: flags (each with an environment variable), their validation
//! into a [`Config`], and [`run`], which loads the watched files, binds nothing itself (the
//! caller passes [`Listeners`]) and serves the two HTTPS listeners:
//!
//! - the external listener (default `0.0.0.0:8443`): the OIDC routes, `/healthz`, `/readyz` and
//!   `/metrics`, with the operator's certificate (`--tls-cert-file`/`--tls-key-file`) or the
//!   Ichor leaf; and the `UserService` (gRPC and gRPC-web): with `--store local` authorized in
//!   process ([`local_routers`]), with `--store kube` by the kube-apiserver and written as the
//!   caller ([`kube_routers`]);
//! - the internal listener (default `0.0.0.0:8444`): discovery and JWKS only, with the Ichor leaf.

use crate::installation::InstallationSettings;
use crate::oidc::Settings;
use crate::store::UserStore;
use axum::Router;
use clap::{Parser, ValueEnum};
use ichor_renderers::trust::keys::KeysDocument;
use ichor_server::cidr::Cidr;
use ichor_server::health::{self, Readiness};
use ichor_server::logging::LogFormat;
use ichor_server::metrics::{Metrics, ReloadStatus, Sources};
use ichor_server::reload::{WatchError, WatchOptions, Watched};
use ichor_server::tls::{self, PairFiles};
use ichor_server::{ServeOptions, serve};
use jiff::SignedDuration;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Default mount of the `ichor-oidc-tls` Secret (`tls.crt`, `tls.key`).
pub const DEFAULT_ICHOR_TLS_DIR: &str = "/var/run/ichor/oidc-tls";
/// Default path of `keys.json` in the mounted `ichor-oidc-signing` Secret.
pub const DEFAULT_KEYS_FILE: &str = "/var/run/ichor/oidc-signing/keys.json";
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
    --trusted-proxy 10.0.0.0/8 --log-format json

  # On one machine, with files for users and state
  ichor-issuer --external-url https://127.0.0.1:8443 --listen 127.0.0.1:8443 \\
    --internal-listen 127.0.0.1:8444 --store local \\
    --local-users-dir ./users --local-state-dir ./state \\
    --ichor-tls-dir ./state/oidc-tls --keys-file ./state/oidc-signing/keys.json";

/// Where users and credentials are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StoreKind {
    /// `IchorUser` objects and the `ichor-user-credentials` Secret (in a cluster).
    Kube,
    /// Files: a directory of `IchorUser` manifests and a state directory (`ichor dev`).
    Local,
}

/// The flags of `ichor-issuer`, as given (see [`Flags::validate`]).
#[derive(Debug, Clone, Parser)]
#[command(
    name = "ichor-issuer",
    version,
    about = "The Ichor OpenID Connect issuer: sign-in for the Ichor UI and CLI, ID tokens for the kube-apiserver.",
    after_help = EXAMPLES
)]
pub struct Flags {
    /// The issuer's public URL (https), exactly as the kube-apiserver and the clients see it;
    /// it is the `iss` of every token.
    #[arg(long, env = "ICHOR_ISSUER_EXTERNAL_URL", value_name = "URL")]
    pub external_url: String,

    /// Address of the external HTTPS listener (OIDC, UI, API, health, metrics).
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

    /// A network (CIDR) of reverse proxies whose `X-Forwarded-For` is believed; repeatable
    /// (comma-separated in the environment variable).
    #[arg(
        long,
        env = "ICHOR_ISSUER_TRUSTED_PROXY",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    pub trusted_proxy: Vec<String>,

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
}

/// Everything `ichor-issuer` parses: [`Flags`] and [`KubeconfigFlags`].
#[derive(Debug, Clone, Parser)]
#[command(
    name = "ichor-issuer",
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
}

impl IssuerArgs {
    /// Checks all flags and builds the [`Config`].
    ///
    /// # Errors
    /// The first flag refused.
    pub fn validate(self) -> Result<Config, ConfigError> {
        let mut config = self.flags.validate()?;
        config.kubeconfig = self.kubeconfig.validate(&config.store)?;
        Ok(config)
    }
}

/// The cluster the `UserService`'s kubeconfigs point at, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeconfigSettings {
    /// `--kube-api-server-url`: the server written instead of the cluster endpoint.
    pub api_server_url: Option<String>,
    /// `--kube-api-tls-server-name`.
    pub tls_server_name: Option<String>,
    /// Where the cluster CA is read: the flag, or with `--store kube` the ServiceAccount's.
    pub ca_file: Option<CaFile>,
    /// `--kube-cluster-name`.
    pub cluster_name: String,
}

/// Where the cluster CA comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaFile {
    /// `--kube-ca-file`: it must exist.
    Given(PathBuf),
    /// The ServiceAccount mount (the default with `--store kube`): absent means no CA data.
    Default(PathBuf),
}

/// Where the external listener's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExternalTls {
    /// The operator's pair (`--tls-cert-file`, `--tls-key-file`).
    Operator(PairFiles),
    /// The Ichor leaf, the same pair as the internal listener.
    IchorLeaf,
}

/// The user store chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreConfig {
    /// Kubernetes objects.
    Kube,
    /// Local files.
    Local {
        /// `IchorUser` manifests.
        users_dir: PathBuf,
        /// Credentials and state.
        state_dir: PathBuf,
    },
}

/// The validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The issuer identifier (`iss`): the external URL without a trailing `/`.
    pub issuer: String,
    /// The external URL, parsed.
    pub external_url: url::Url,
    /// External listener address.
    pub listen: SocketAddr,
    /// Internal listener address.
    pub internal_listen: SocketAddr,
    /// The external listener's certificate.
    pub external_tls: ExternalTls,
    /// The Ichor leaf (`tls.crt`, `tls.key` of `ichor-oidc-tls`).
    pub ichor_tls: PairFiles,
    /// `keys.json`.
    pub keys_file: PathBuf,
    /// The user store.
    pub store: StoreConfig,
    /// Fallback ID token lifetime.
    pub token_ttl: SignedDuration,
    /// Fallback refresh-family lifetime.
    pub refresh_lifetime: SignedDuration,
    /// Trusted reverse-proxy networks.
    pub trusted_proxies: Vec<Cidr>,
    /// The kubeconfigs' cluster.
    pub kubeconfig: KubeconfigSettings,
    /// Log format.
    pub log_format: LogFormat,
}

impl Config {
    /// The runtime settings the flags give (all of them with `--store local`; the fallback of
    /// each field `IchorInstallation.spec.users` leaves out with `--store kube`).
    pub fn settings(&self) -> ichor_renderers::crd::UsersSettings {
        use ichor_renderers::crd::GoDuration;
        ichor_renderers::crd::UsersSettings {
            token_ttl: GoDuration::from_secs(self.token_ttl.as_secs()),
            refresh_lifetime: GoDuration::from_secs(self.refresh_lifetime.as_secs()),
            kube_api_server_url: self.kubeconfig.api_server_url.clone(),
            kube_api_tls_server_name: self.kubeconfig.tls_server_name.clone(),
        }
    }
}

/// A flag was refused. Each message names the flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `--external-url` is not an absolute URL.
    #[error("--external-url {given:?} is not an absolute URL like https://ichor.example.com")]
    ExternalUrlSyntax {
        /// What was given.
        given: String,
    },
    /// `--external-url` is not https or carries parts an issuer URL may not have.
    #[error("--external-url {given:?} {problem}")]
    ExternalUrlShape {
        /// What was given.
        given: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// Only one of the operator pair's flags was given.
    #[error("--tls-cert-file and --tls-key-file go together: give both, or neither to serve the Ichor leaf")]
    HalfOperatorPair,
    /// The two listeners share an address.
    #[error("--listen and --internal-listen are both {0}; the two listeners need different addresses")]
    SameListenAddress(SocketAddr),
    /// A local-store flag is missing.
    #[error("--store local needs {0}")]
    LocalStoreFlagMissing(&'static str),
    /// A local-store flag was given with the Kubernetes store.
    #[error("{0} is only used with --store local")]
    LocalStoreFlagWithKube(&'static str),
    /// A duration does not parse.
    #[error("{flag} {given:?} is not a duration; write it like 5m, 90s or 12h")]
    DurationSyntax {
        /// The flag.
        flag: &'static str,
        /// What was given.
        given: String,
    },
    /// A duration is out of range.
    #[error("{flag} {given:?} is out of range; it must be from {min} to {max}")]
    DurationRange {
        /// The flag.
        flag: &'static str,
        /// What was given.
        given: String,
        /// Smallest accepted.
        min: &'static str,
        /// Largest accepted.
        max: &'static str,
    },
    /// `--kube-api-server-url` is not an https URL.
    #[error("--kube-api-server-url {given:?} {problem}")]
    KubeApiServerUrl {
        /// What was given.
        given: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// `--kube-api-tls-server-name` is not a DNS name.
    #[error(
        "--kube-api-tls-server-name {0:?} is not a DNS name: letters, digits, '-' and '.', at most 253 \
         characters"
    )]
    KubeTlsServerName(String),
    /// `--kube-cluster-name` is not usable as a kubeconfig entry name.
    #[error("--kube-cluster-name {0:?} must be 1 to 253 characters without spaces or slashes")]
    KubeClusterName(String),
    /// A `--trusted-proxy` is not a CIDR.
    #[error("--trusted-proxy: {0}")]
    TrustedProxy(#[from] ichor_server::cidr::CidrError),
}

fn parse_duration(
    flag: &'static str,
    given: &str,
    (min, max): (SignedDuration, SignedDuration),
    (min_text, max_text): (&'static str, &'static str),
) -> Result<SignedDuration, ConfigError> {
    let d: SignedDuration = given.trim().parse().map_err(|_| ConfigError::DurationSyntax {
        flag,
        given: given.to_owned(),
    })?;
    if d < min || d > max {
        return Err(ConfigError::DurationRange {
            flag,
            given: given.to_owned(),
            min: min_text,
            max: max_text,
        });
    }
    Ok(d)
}

fn parse_external_url(given: &str) -> Result<(String, url::Url), ConfigError> {
    let shape = |problem| ConfigError::ExternalUrlShape {
        given: given.to_owned(),
        problem,
    };
    let url = url::Url::parse(given).map_err(|_| ConfigError::ExternalUrlSyntax {
        given: given.to_owned(),
    })?;
    if url.scheme() != "https" {
        return Err(shape(
            "must use https (the issuer of a kube-apiserver must be https)",
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(shape("has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(shape("must not carry a user name or password"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(shape("must not have a query or a fragment"));
    }
    let issuer = url.as_str().trim_end_matches('/').to_owned();
    Ok((issuer, url))
}

impl KubeconfigFlags {
    /// The settings when no kubeconfig flag is given (the CA default of `store`).
    pub fn default_for(store: &StoreConfig) -> KubeconfigSettings {
        KubeconfigSettings {
            api_server_url: None,
            tls_server_name: None,
            ca_file: matches!(store, StoreConfig::Kube)
                .then(|| CaFile::Default(PathBuf::from(IN_CLUSTER_CA_FILE))),
            cluster_name: DEFAULT_KUBE_CLUSTER_NAME.to_owned(),
        }
    }

    /// Checks the flags; `store` decides the CA default.
    ///
    /// # Errors
    /// The first flag refused.
    pub fn validate(self, store: &StoreConfig) -> Result<KubeconfigSettings, ConfigError> {
        let non_empty = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
        let defaults = Self::default_for(store);
        Ok(KubeconfigSettings {
            api_server_url: non_empty(self.kube_api_server_url)
                .map(|u| parse_kube_api_server_url(u.trim()))
                .transpose()?,
            tls_server_name: non_empty(self.kube_api_tls_server_name)
                .map(|n| parse_tls_server_name(n.trim()))
                .transpose()?,
            ca_file: match self.kube_ca_file {
                Some(path) if !path.as_os_str().is_empty() => Some(CaFile::Given(path)),
                _ => defaults.ca_file,
            },
            // Empty only when built by `Default` (clap fills in the default name).
            cluster_name: if self.kube_cluster_name.is_empty() {
                defaults.cluster_name
            } else {
                parse_cluster_name(&self.kube_cluster_name)?
            },
        })
    }
}

/// Checks `--kube-api-server-url`: an https URL with a host and nothing but a path.
fn parse_kube_api_server_url(given: &str) -> Result<String, ConfigError> {
    let refuse = |problem| ConfigError::KubeApiServerUrl {
        given: given.chars().take(256).collect(),
        problem,
    };
    let url =
        url::Url::parse(given).map_err(|_| refuse("is not a URL like https://kube.example.com:6443"))?;
    if url.scheme() != "https" {
        return Err(refuse("must use https (a kube-apiserver serves TLS)"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(refuse("has no host"));
    }
    if !url.username().is_empty()
        || url.password().is_some()
        || url.query().is_some()
        || url.fragment().is_some()
    {
        return Err(refuse(
            "must not carry a user name, a password, a query or a fragment",
        ));
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

/// Checks `--kube-api-tls-server-name`: a DNS name.
fn parse_tls_server_name(given: &str) -> Result<String, ConfigError> {
    let ok = !given.is_empty()
        && given.len() <= 253
        && given.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    if ok {
        Ok(given.to_owned())
    } else {
        Err(ConfigError::KubeTlsServerName(given.chars().take(256).collect()))
    }
}

/// Checks `--kube-cluster-name` (the rule of `ichor dev`).
fn parse_cluster_name(given: &str) -> Result<String, ConfigError> {
    if given.is_empty()
        || given.len() > 253
        || given
            .chars()
            .any(|c| c.is_whitespace() || c == '/' || c.is_control())
    {
        return Err(ConfigError::KubeClusterName(given.chars().take(256).collect()));
    }
    Ok(given.to_owned())
}

impl Flags {
    /// Checks the flags together and builds the [`Config`].
    pub fn validate(self) -> Result<Config, ConfigError> {
        let (issuer, external_url) = parse_external_url(&self.external_url)?;
        let external_tls = match (self.tls_cert_file, self.tls_key_file) {
            (Some(cert), Some(key)) => ExternalTls::Operator(PairFiles { cert, key }),
            (None, None) => ExternalTls::IchorLeaf,
            _ => return Err(ConfigError::HalfOperatorPair),
        };
        if self.listen == self.internal_listen {
            return Err(ConfigError::SameListenAddress(self.listen));
        }
        let store = match self.store {
            StoreKind::Kube => {
                if self.local_users_dir.is_some() {
                    return Err(ConfigError::LocalStoreFlagWithKube("--local-users-dir"));
                }
                if self.local_state_dir.is_some() {
                    return Err(ConfigError::LocalStoreFlagWithKube("--local-state-dir"));
                }
                StoreConfig::Kube
            }
            StoreKind::Local => StoreConfig::Local {
                users_dir: self
                    .local_users_dir
                    .ok_or(ConfigError::LocalStoreFlagMissing("--local-users-dir"))?,
                state_dir: self
                    .local_state_dir
                    .ok_or(ConfigError::LocalStoreFlagMissing("--local-state-dir"))?,
            },
        };
        let token_ttl = parse_duration(
            "--token-ttl",
            &self.token_ttl,
            (MIN_TOKEN_TTL, MAX_TOKEN_TTL),
            ("1m", "15m"),
        )?;
        let refresh_lifetime = parse_duration(
            "--refresh-lifetime",
            &self.refresh_lifetime,
            (MIN_REFRESH_LIFETIME, MAX_REFRESH_LIFETIME),
            ("1h", "720h"),
        )?;
        let trusted_proxies = self
            .trusted_proxy
            .iter()
            .map(|c| c.trim().parse::<Cidr>())
            .collect::<Result<Vec<_>, _>>()?;
        let kubeconfig = KubeconfigFlags::default_for(&store);
        Ok(Config {
            issuer,
            external_url,
            listen: self.listen,
            internal_listen: self.internal_listen,
            external_tls,
            ichor_tls: PairFiles::in_secret_dir(self.ichor_tls_dir),
            keys_file: self.keys_file,
            store,
            token_ttl,
            refresh_lifetime,
            trusted_proxies,
            kubeconfig,
            log_format: self.log_format,
        })
    }
}

/// How [`run`] watches files and serves (the defaults in production; tests shorten them).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Watching of `keys.json` and the TLS pairs.
    pub watch: WatchOptions,
    /// Limits and timeouts of both listeners.
    pub serve: ServeOptions,
    /// The cluster's runtime settings (`--store kube`), which `/readyz` waits for; `None`: the
    /// flags' values are the settings.
    pub installation: Option<Arc<InstallationSettings>>,
}

/// The two bound sockets.
#[derive(Debug)]
pub struct Listeners {
    /// The external listener.
    pub external: TcpListener,
    /// The internal listener.
    pub internal: TcpListener,
}

impl Listeners {
    /// Binds `--listen` and `--internal-listen`.
    pub async fn bind(config: &Config) -> Result<Self, RunError> {
        let bind = |addr: SocketAddr, flag: &'static str| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|source| RunError::Bind { flag, addr, source })
        };
        Ok(Listeners {
            external: bind(config.listen, "--listen").await?,
            internal: bind(config.internal_listen, "--internal-listen").await?,
        })
    }
}

/// Why [`run`] could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A listener could not be bound.
    #[error("cannot listen on {addr} ({flag}): {source}")]
    Bind {
        /// The flag of the address.
        flag: &'static str,
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file watcher could not start.
    #[error(transparent)]
    Watch(#[from] WatchError),
    /// The TLS configuration was refused.
    #[error("cannot build the TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    /// The OIDC issuer could not be built.
    #[error("cannot build the issuer: {0}")]
    Issuer(String),
    /// The user store could not be reached at start-up.
    #[error("cannot open the user store: {0}")]
    Store(String),
}

/// What the OIDC routers are built from: the configuration and the shared, watched state.
#[derive(Debug, Clone)]
pub struct Served {
    /// The validated flags.
    pub config: Arc<Config>,
    /// `keys.json`, reloaded on change (the lead converts it to `keys::LoadedKeys`).
    pub keys: Watched<KeysDocument>,
    /// The metrics registry (its counters go to the request handlers).
    pub metrics: Arc<Metrics>,
    /// The runtime settings (token TTL, refresh lifetime, kubeconfig server), read per token.
    pub settings: Arc<Settings>,
}

/// The OIDC routers of the two listeners.
#[derive(Debug, Clone, Default)]
pub struct Routers {
    /// Routes of the external listener (8443).
    pub external: Router,
    /// Routes of the internal listener (8444): discovery and JWKS only.
    pub internal: Router,
}

/// The OIDC routers of the binary: an [`Issuer`](crate::oidc::Issuer) over `store`, whose
/// signing keys follow the watched `keys.json` (a document whose keys cannot be loaded keeps the
/// previous keys serving), and whose counters join the process's `/metrics`.
///
/// # Errors
/// [`RunError::Issuer`] when the issuer refuses the configuration.
pub fn oidc_routers(served: &Served, store: Arc<dyn UserStore>) -> Result<Routers, RunError> {
    let issuer = build_issuer(served, store)?;
    Ok(Routers {
        external: crate::oidc::external_router(Arc::clone(&issuer)).merge(ui_router(served)),
        internal: crate::oidc::internal_router(issuer),
    })
}

/// The routers of `--store local` (`ichor dev`): [`oidc_routers`] over `store`, plus the
/// `UserService` on the external listener (gRPC, and gRPC-web for browsers over HTTP/1.1 or
/// HTTP/2), over the same store, with bearer tokens verified by the same issuer and calls
/// authorized in process by the built-in roles ([`crate::api::LocalAccessReview`]). `cluster` is
/// the cluster `GetMyKubeconfig` points at (`None`: that call is refused as not configured).
///
/// # Errors
/// [`RunError::Issuer`] when the issuer, the built-in policy or the API refuses its configuration.
pub fn local_routers(
    served: &Served,
    store: Arc<crate::store::local::LocalStore>,
    cluster: Option<crate::api::ClusterInfo>,
) -> Result<Routers, RunError> {
    use crate::api::LocalAccessReview;
    use ichor_renderers::rbac::{Authorizer, Policy};

    let policy = Policy::builtin().map_err(|e| RunError::Issuer(format!("the built-in roles: {e}")))?;
    api_routers(
        served,
        store,
        LocalAccessReview::new(Authorizer::new(policy)),
        cluster,
    )
}

/// The routers of `--store kube` (in a cluster): [`oidc_routers`] over `store`, plus the
/// `UserService` on the external listener like [`local_routers`], but authorized by the
/// kube-apiserver (`access`, a `SubjectAccessReview` per question) and writing `IchorUser`
/// objects as the caller (impersonation, [`crate::api::kube_backend`]), so Kubernetes RBAC and
/// the admission webhook decide.
///
/// # Errors
/// [`RunError::Issuer`] when the issuer or the API refuses its configuration.
pub fn kube_routers(
    served: &Served,
    store: Arc<crate::store::kube::KubeStore>,
    access: crate::api::KubeAccessReview,
    cluster: Option<crate::api::ClusterInfo>,
) -> Result<Routers, RunError> {
    api_routers(served, store, access, cluster)
}

/// [`oidc_routers`] over `store` plus the `UserService` over the same store and issuer, asking
/// `access`; the kubeconfig settings of the configuration go to `GetMyKubeconfig`.
fn api_routers<B, A>(
    served: &Served,
    store: Arc<B>,
    access: A,
    cluster: Option<crate::api::ClusterInfo>,
) -> Result<Routers, RunError>
where
    B: crate::api::UserBackend,
    A: crate::api::AccessReview,
{
    use crate::api::{ApiConfig, SystemClock, UserApi, grpc_service};
    use tonic::server::NamedService;
    use tower::Layer as _;

    let issuer = build_issuer(served, Arc::clone(&store) as Arc<dyn UserStore>)?;
    let mut config = ApiConfig::new(served.config.issuer.clone(), cluster)
        .map_err(|e| RunError::Issuer(format!("the UserService: {e}")))?;
    // One set of argon2id permits for the whole process: sign-ins and password changes.
    config.hash_permits = Arc::clone(issuer.hash_permits());
    config.settings = Arc::clone(&served.settings);
    let api = UserApi::new(store, access, Arc::clone(&issuer), Arc::new(SystemClock), config);
    let service = grpc_service(api);
    let path = format!(
            "/{}/{{*rest}}",
            <crate::api::proto::user_service_server::UserServiceServer<
                UserApi<B, A, Arc<crate::oidc::Issuer>>,
            > as NamedService>::NAME
        );
    let grpc = Router::new().route_service(&path, tonic_web::GrpcWebLayer::new().layer(service));
    Ok(Routers {
        external: crate::oidc::external_router(Arc::clone(&issuer))
            .merge(grpc)
            .merge(ui_router(served)),
        internal: crate::oidc::internal_router(issuer),
    })
}

/// Why the cluster CA for kubeconfigs could not be read. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum KubeCaError {
    /// The file could not be read.
    #[error("--kube-ca-file {path}: cannot read it: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_KUBE_CA_BYTES`].
    #[error("--kube-ca-file {path} is larger than {} KiB; give the cluster's CA certificate(s) only", MAX_KUBE_CA_BYTES / 1024)]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// The file holds something else than PEM certificates.
    #[error("--kube-ca-file {path}: {reason} (it is written into every kubeconfig: certificates only)")]
    NotCertificates {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// Reads the cluster CA for kubeconfigs (public data): at most [`MAX_KUBE_CA_BYTES`], PEM
/// certificates only (any other block, such as a private key, is refused). The default file
/// ([`CaFile::Default`]) may be absent: `Ok(None)`, and kubeconfigs carry no CA data (logged).
///
/// # Errors
/// [`KubeCaError`] for a given file that is absent, and for any file that cannot be read, is too
/// large or is not certificates only.
pub fn read_kube_ca(ca: &CaFile) -> Result<Option<String>, KubeCaError> {
    use std::io::Read as _;
    let path = match ca {
        CaFile::Given(path) | CaFile::Default(path) => path,
    };
    let mut text = String::new();
    let read =
        std::fs::File::open(path).and_then(|f| f.take(MAX_KUBE_CA_BYTES + 1).read_to_string(&mut text));
    match read {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && matches!(ca, CaFile::Default(_)) => {
            tracing::warn!(
                file = %path.display(),
                "no cluster CA file; kubeconfigs are served without certificate-authority-data \
                 (give --kube-ca-file to include one)"
            );
            return Ok(None);
        }
        Err(source) => {
            return Err(KubeCaError::Read {
                path: path.clone(),
                source,
            });
        }
    }
    if text.len() as u64 > MAX_KUBE_CA_BYTES {
        return Err(KubeCaError::TooLarge { path: path.clone() });
    }
    let refuse = |reason: String| KubeCaError::NotCertificates {
        path: path.clone(),
        reason,
    };
    let mut labelled = 0usize;
    for line in text.lines().map(str::trim) {
        if let Some(label) = line.strip_prefix("-----BEGIN ") {
            if label != "CERTIFICATE-----" {
                return Err(refuse(format!(
                    "it holds a {:?} block",
                    label.trim_end_matches('-')
                )));
            }
            labelled += 1;
        }
    }
    let parsed = rustls_pemfile::certs(&mut text.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| refuse("a certificate block is not valid PEM".to_owned()))?;
    if parsed.is_empty() || parsed.len() != labelled {
        return Err(refuse(
            "it holds no PEM certificate (-----BEGIN CERTIFICATE-----)".to_owned(),
        ));
    }
    Ok(Some(text))
}

/// The cluster `GetMyKubeconfig` points at with `--store kube`: `endpoint` (the issuer's own
/// client's server, used when `--kube-api-server-url` is not given), the configured name, and
/// the CA read by [`read_kube_ca`] (`None`: no CA data).
pub fn kube_cluster(
    settings: &KubeconfigSettings,
    endpoint: &str,
    ca_pem: Option<String>,
) -> crate::api::ClusterInfo {
    crate::api::ClusterInfo {
        name: settings.cluster_name.clone(),
        endpoint: endpoint.trim_end_matches('/').to_owned(),
        ca_pem: ca_pem.unwrap_or_default(),
    }
}

/// The web UI's routes ([`crate::ui`]): the built SPA from [`crate::ui::default_dir`] and
/// `/auth/config` with Ichor's issuer; the API always requires a token.
fn ui_router(served: &Served) -> Router {
    crate::ui::router(
        crate::ui::default_dir(),
        crate::ui::AuthConfig::ichor_only(&served.config.issuer, true),
    )
}

/// The OIDC issuer of [`oidc_routers`] (shared by the routers and the `UserService`).
fn build_issuer(served: &Served, store: Arc<dyn UserStore>) -> Result<Arc<crate::oidc::Issuer>, RunError> {
    use crate::{
        keys::{KeyRing, LoadedKeys},
        oidc::{Issuer, IssuerConfig, TrustedProxies},
    };

    let ring = Arc::new(KeyRing::new());
    let load = {
        let ring = Arc::clone(&ring);
        move |doc: Option<Arc<KeysDocument>>| {
            let Some(doc) = doc else { return };
            match LoadedKeys::from_document(&doc) {
                Ok(keys) => ring.store(keys),
                Err(error) => {
                    tracing::warn!(%error, "keys.json parsed but its keys cannot be used; keeping the previous keys")
                }
            }
        }
    };
    load(served.keys.current());
    let mut changes = served.keys.subscribe();
    let keys = served.keys.clone();
    tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            load(keys.current());
        }
    });

    let config = &served.config;
    let settings = Arc::clone(&served.settings);
    let trusted_proxies = TrustedProxies::new(config.trusted_proxies.clone());
    let mut built = None;
    served.metrics.handlers(|registry| {
        built = Some(Issuer::new(
            IssuerConfig {
                external_url: config.issuer.clone(),
                trusted_proxies,
            },
            ring,
            store,
            settings,
            registry,
        ));
    });
    match built {
        Some(Ok(issuer)) => Ok(Arc::new(issuer)),
        Some(Err(e)) => Err(RunError::Issuer(e.to_string())),
        None => Err(RunError::Issuer("the metrics registry was not available".into())),
    }
}

/// Opens the configured user store.
///
/// # Errors
/// [`RunError::Store`] when the Kubernetes client cannot be configured.
pub async fn open_store(config: &Config) -> Result<Arc<dyn UserStore>, RunError> {
    match &config.store {
        StoreConfig::Kube => {
            let client = kube::Client::try_default()
                .await
                .map_err(|e| RunError::Store(e.to_string()))?;
            Ok(Arc::new(crate::store::kube::KubeStore::new(client)))
        }
        StoreConfig::Local { users_dir, state_dir } => Ok(Arc::new(crate::store::local::LocalStore::new(
            users_dir.clone(),
            state_dir.clone(),
        ))),
    }
}

/// The cluster-mode backends: the user store and the access review over one client (the pod's
/// ServiceAccount, from the environment), and the server URL that client uses.
///
/// # Errors
/// [`RunError::Store`] when no Kubernetes client configuration is found.
pub async fn open_kube() -> Result<
    (
        Arc<crate::store::kube::KubeStore>,
        crate::api::KubeAccessReview,
        String,
    ),
    RunError,
> {
    let config = kube::Config::infer()
        .await
        .map_err(|e| RunError::Store(e.to_string()))?;
    let endpoint = config.cluster_url.to_string();
    let client = kube::Client::try_from(config).map_err(|e| RunError::Store(e.to_string()))?;
    Ok((
        Arc::new(crate::store::kube::KubeStore::new(client.clone())),
        crate::api::KubeAccessReview::new(client),
        endpoint,
    ))
}

/// Adds the health, readiness and metrics endpoints to the external router; the internal
/// listener serves its OIDC routes only.
pub fn compose(oidc: Routers, health: Router) -> Routers {
    Routers {
        external: oidc.external.merge(health),
        internal: oidc.internal,
    }
}

/// Loads the watched files, builds the routers with `routers` and serves both listeners until
/// `shutdown` completes (then drains in-flight requests, bounded by the serve options).
pub async fn run<F>(
    config: Config,
    listeners: Listeners,
    options: RunOptions,
    routers: F,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError>
where
    F: FnOnce(&Served) -> Result<Routers, RunError>,
{
    let config = Arc::new(config);
    let keys = Watched::file("keys", &config.keys_file, KeysDocument::parse, options.watch)?;
    let internal_pair = tls::watch_pair("tls-internal", &config.ichor_tls, options.watch)?;
    let external_pair = match &config.external_tls {
        ExternalTls::Operator(files) => tls::watch_pair("tls-external", files, options.watch)?,
        ExternalTls::IchorLeaf => internal_pair.clone(),
    };

    let mut reloads: Vec<Arc<dyn ReloadStatus>> =
        vec![Arc::new(keys.clone()), Arc::new(internal_pair.clone())];
    if matches!(config.external_tls, ExternalTls::Operator(_)) {
        reloads.push(Arc::new(external_pair.clone()));
    }
    if let Some(installation) = &options.installation {
        reloads.push(Arc::clone(installation) as Arc<dyn ReloadStatus>);
    }
    let metrics = Arc::new(Metrics::new(
        "ichor_issuer",
        Sources {
            reloads: reloads.clone(),
            certificates: vec![
                ("external".to_owned(), external_pair.clone()),
                ("internal".to_owned(), internal_pair.clone()),
            ],
            key_times: Some(crate::keys::key_times_source(keys.clone())),
        },
    ));
    let readiness = reloads
        .into_iter()
        .fold(Readiness::new(), |r, watched| r.require_loaded(watched));

    let served = Served {
        settings: match &options.installation {
            Some(installation) => installation.settings(),
            None => Arc::new(Settings::new(config.settings())),
        },
        config: Arc::clone(&config),
        keys,
        metrics: Arc::clone(&metrics),
    };
    let app = compose(routers(&served)?, health::router(Arc::new(readiness), metrics));
    let external_tls = tls::server_config(external_pair)?;
    let internal_tls = tls::server_config(internal_pair)?;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    tracing::info!(
        issuer = %config.issuer,
        external = ?listeners.external.local_addr().ok(),
        internal = ?listeners.internal.local_addr().ok(),
        "serving"
    );
    tokio::join!(
        serve(
            listeners.external,
            external_tls,
            app.external,
            stopped(stop_rx.clone()),
            options.serve
        ),
        serve(
            listeners.internal,
            internal_tls,
            app.internal,
            stopped(stop_rx),
            options.serve
        ),
    );
    tracing::info!("stopped");
    Ok(())
}

/// Parses the flags and runs the issuer: exit 2 on a refused flag, 1 when it cannot start.
pub fn main() -> ExitCode {
    let flags = IssuerArgs::parse();
    let config = match flags.validate() {
        Ok(c) => c,
        Err(error) => {
            eprintln!("ichor-issuer: {error}");
            return ExitCode::from(2);
        }
    };
    ichor_server::logging::init(config.log_format);
    // Another provider already installed is fine: every config here names ring explicitly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(error) => {
            eprintln!("ichor-issuer: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        let listeners = Listeners::bind(&config).await?;
        if let StoreConfig::Local { users_dir, state_dir } = &config.store {
            let store = Arc::new(crate::store::local::LocalStore::new(users_dir, state_dir));
            return run(
                config,
                listeners,
                RunOptions::default(),
                move |served| local_routers(served, store, None),
                ichor_server::shutdown::signal(),
            )
            .await;
        }
        let (store, access, endpoint) = open_kube().await?;
        let installation = Arc::new(InstallationSettings::new(config.settings()));
        tokio::spawn(Arc::clone(&installation).follow(store.client().clone()));
        let ca = match &config.kubeconfig.ca_file {
            Some(file) => read_kube_ca(file).map_err(|e| RunError::Store(e.to_string()))?,
            None => None,
        };
        let cluster = kube_cluster(&config.kubeconfig, &endpoint, ca);
        if config.kubeconfig.api_server_url.is_none() {
            tracing::info!(
                server = %cluster.endpoint,
                "kubeconfigs point at the issuer's own API server address; set --kube-api-server-url \
                 when clients reach the cluster elsewhere"
            );
        }
        run(
            config,
            listeners,
            RunOptions {
                installation: Some(installation),
                ..RunOptions::default()
            },
            move |served| kube_routers(served, store, access, Some(cluster)),
            ichor_server::shutdown::signal(),
        )
        .await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "cannot start");
            eprintln!("ichor-issuer: {error}");
            ExitCode::FAILURE
        }
    }
}
