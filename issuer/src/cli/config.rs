//! The flags validated into a [`Config`]: every refusal a [`ConfigError`] naming the flag.

use super::flags::{
    DEFAULT_KUBE_CLUSTER_NAME, Flags, IN_CLUSTER_CA_FILE, InternalFlags, KubeconfigFlags,
    MAX_REFRESH_LIFETIME, MAX_TOKEN_TTL, MIN_REFRESH_LIFETIME, MIN_TOKEN_TTL, StoreKind,
};
use crate::https_url::{UrlShapeError, plain_https_url};
use ichor_server::cidr::Cidr;
use ichor_server::logging::LogFormat;
use ichor_server::tls::PairFiles;
use jiff::SignedDuration;
use std::net::SocketAddr;
use std::path::PathBuf;

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
    /// `--kubeconfig-cluster`: the `TalosCluster` whose endpoint kubeconfigs name (`None`: the
    /// one named like `cluster_name`, else the only one).
    pub talos_cluster: Option<String>,
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
    /// Metrics listener address (plain HTTP).
    pub metrics_listen: SocketAddr,
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
    /// `--family-writes-per-minute` (0: no cap).
    pub family_writes_per_minute: u32,
    /// The kubeconfigs' cluster.
    pub kubeconfig: KubeconfigSettings,
    /// The external OpenID provider accepted beside Ichor's issuer.
    pub external: Option<crate::external::ExternalProvider>,
    /// `--internal-jwks-uri`: the internal discovery document's `jwks_uri` (`None`: the host the
    /// caller connected to).
    pub internal_jwks_uri: Option<String>,
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
            second_factor: ichor_renderers::auth::second_factor_policy::SecondFactorPolicy::default(),
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
    /// The metrics listener shares an address with an HTTPS listener.
    #[error("--metrics-listen and {flag} are both {addr}; the metrics listener needs its own address")]
    SameMetricsListenAddress {
        /// The other listener's flag.
        flag: &'static str,
        /// The shared address.
        addr: SocketAddr,
    },
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
    /// `--kubeconfig-cluster` is not a Kubernetes object name.
    #[error(
        "--kubeconfig-cluster {0:?} is not a TalosCluster name: lower-case letters, digits, '-' and '.', \
         at most 253 characters, starting and ending with a letter or digit"
    )]
    KubeconfigCluster(String),
    /// `--internal-jwks-uri` is not an https URL.
    #[error("--internal-jwks-uri {given:?} {problem}")]
    InternalJwksUri {
        /// What was given (at most 256 characters).
        given: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// An `--external-*` flag is refused (the error names it).
    #[error(transparent)]
    External(#[from] crate::external::ProviderError),
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
    let url = plain_https_url(given).map_err(|e| match e {
        UrlShapeError::NotAbsolute => ConfigError::ExternalUrlSyntax {
            given: given.to_owned(),
        },
        shape => ConfigError::ExternalUrlShape {
            given: given.to_owned(),
            problem: shape.problem(
                "is not an absolute URL",
                "must use https (the issuer of a kube-apiserver must be https)",
            ),
        },
    })?;
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
            talos_cluster: None,
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
            talos_cluster: non_empty(self.kubeconfig_cluster)
                .map(|n| parse_object_name(n.trim()))
                .transpose()?,
        })
    }
}

/// Checks `--kube-api-server-url`: an https URL with a host and nothing but a path.
fn parse_kube_api_server_url(given: &str) -> Result<String, ConfigError> {
    let refuse = |problem| ConfigError::KubeApiServerUrl {
        given: given.chars().take(256).collect(),
        problem,
    };
    let url = plain_https_url(given).map_err(|e| {
        refuse(e.problem(
            "is not a URL like https://kube.example.com:6443",
            "must use https (a kube-apiserver serves TLS)",
        ))
    })?;
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

/// Checks `--kubeconfig-cluster`: a Kubernetes object name (RFC 1123 subdomain), as every
/// `TalosCluster` name is.
fn parse_object_name(given: &str) -> Result<String, ConfigError> {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let ok = !given.is_empty()
        && given.len() <= 253
        && edge(given.chars().next())
        && edge(given.chars().last())
        && given
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    if ok {
        Ok(given.to_owned())
    } else {
        Err(ConfigError::KubeconfigCluster(given.chars().take(256).collect()))
    }
}

impl InternalFlags {
    /// Checks `--internal-jwks-uri`: empty or unset is no override; otherwise an absolute https
    /// URL with a host and no user name, password, query or fragment.
    ///
    /// # Errors
    /// [`ConfigError::InternalJwksUri`].
    pub fn validate(self) -> Result<Option<String>, ConfigError> {
        let Some(given) = self.internal_jwks_uri.filter(|s| !s.trim().is_empty()) else {
            return Ok(None);
        };
        let given = given.trim();
        let url = plain_https_url(given).map_err(|e| ConfigError::InternalJwksUri {
            given: given.chars().take(256).collect(),
            problem: e.problem(
                "is not an absolute URL like https://ichor-issuer.ichor-system.svc:8444/oidc/jwks",
                "must use https (the kube-apiserver fetches the JWKS over TLS, trusting the Ichor CA)",
            ),
        })?;
        Ok(Some(url.to_string()))
    }
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
        for (flag, addr) in [
            ("--listen", self.listen),
            ("--internal-listen", self.internal_listen),
        ] {
            if self.metrics_listen == addr {
                return Err(ConfigError::SameMetricsListenAddress { flag, addr });
            }
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
            metrics_listen: self.metrics_listen,
            external_tls,
            ichor_tls: PairFiles::in_secret_dir(self.ichor_tls_dir),
            keys_file: self.keys_file,
            store,
            token_ttl,
            refresh_lifetime,
            trusted_proxies,
            family_writes_per_minute: self.family_writes_per_minute,
            kubeconfig,
            external: None,
            internal_jwks_uri: None,
            log_format: self.log_format,
        })
    }
}
