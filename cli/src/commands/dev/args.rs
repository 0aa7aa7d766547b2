//! The flags of `ichor dev` and their checks, all made before anything is written: a loopback
//! address and a port with a next port, the token lifetime, and the cluster of the kubeconfigs
//! served.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::Args;
use ichor_issuer::api::ClusterInfo;
use ichor_issuer::cli::{MAX_TOKEN_TTL, MIN_TOKEN_TTL};
use ichor_issuer::https_url::plain_https_url;

const EXAMPLES: &str = "\
Examples:
  # Start Ichor on https://127.0.0.1:8443 with its state in ~/.ichor/dev
  ichor dev

  # Another port and state directory (the internal listener takes the next port)
  ichor dev --port 9443 --state-dir ./ichor-state

  # Serve kubeconfigs for a local cluster (its API server URL and CA certificate)
  ichor dev --kube-api-server https://127.0.0.1:6443 --kube-ca-file ./cluster-ca.crt

  # Short-lived ID tokens, to watch the clients refresh them
  ichor dev --token-ttl 1m

  # Then, in another terminal, sign in with the printed password
  ichor auth login --issuer https://127.0.0.1:8443 --ca-file ~/.ichor/dev/secrets/ichor-oidc-tls/ca.crt

  # Add a user the GitOps way: write an IchorUser file into the manifests directory
  cat > ~/.ichor/dev/manifests/users/alice.yaml <<EOF
  apiVersion: ichor.maesh.dev/v1alpha1
  kind: IchorUser
  metadata:
    name: alice
  spec:
    roles: [viewer]
  EOF";

/// The largest `--kube-ca-file` read (a CA bundle is a few KiB).
pub const MAX_KUBE_CA_BYTES: u64 = 256 * 1024;

/// The largest `--rbac-file` read.
pub const MAX_RBAC_FILE_BYTES: u64 = 1024 * 1024;

/// Reads and parses `--rbac-file`.
///
/// # Errors
/// A sentence naming the flag: the file cannot be read, is larger than 1 MiB, or holds
/// something else than RBAC objects.
pub fn read_rbac_file(path: &std::path::Path) -> anyhow::Result<ichor_renderers::rbac::Policy> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_RBAC_FILE_BYTES + 1).read_to_string(&mut text))
        .map_err(|e| anyhow::anyhow!("--rbac-file {}: cannot read it: {e}", path.display()))?;
    anyhow::ensure!(
        text.len() as u64 <= MAX_RBAC_FILE_BYTES,
        "--rbac-file {} is larger than 1 MiB",
        path.display()
    );
    ichor_renderers::rbac::Policy::parse(&text)
        .map_err(|e| anyhow::anyhow!("--rbac-file {}: {e}", path.display()))
}

/// The default `--kube-cluster-name`.
pub const DEFAULT_KUBE_CLUSTER_NAME: &str = "ichor-dev";

/// Run the whole identity system on this machine (issuer, API, graph over a local directory).
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub struct DevArgs {
    /// Where manifests, keys, certificates and credentials are kept [default: ~/.ichor/dev].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// The issuer's HTTPS port (OIDC, UI, API); the internal listener (discovery and JWKS for a
    /// kube-apiserver) uses the next port.
    #[arg(long, default_value_t = 8443, value_name = "PORT")]
    pub port: u16,

    /// The address to listen on; a loopback address unless --allow-non-loopback is given.
    #[arg(long, default_value = "127.0.0.1", value_name = "IP")]
    pub listen_address: IpAddr,

    /// Name the issuer https://localhost:PORT instead of by the listen address (which must then be
    /// a loopback address): passkeys need a domain name, and the dev certificate names localhost.
    #[arg(long)]
    pub localhost: bool,

    /// Allow a --listen-address other people's machines can reach (the dev state is not
    /// hardened for that: use the helm chart for a shared installation).
    #[arg(long)]
    pub allow_non_loopback: bool,

    /// Lifetime of the ID tokens the issuer signs (1m to 15m).
    #[arg(long, default_value = "5m", value_name = "DURATION")]
    pub token_ttl: String,

    /// The most refresh rotations the issuer writes a minute per session, past a burst of 20 (as
    /// `ichor-issuer --family-writes-per-minute`); 0: no write cap at all, neither this one nor
    /// the issuer's per-user ones (load tests).
    #[arg(
        long,
        default_value_t = ichor_issuer::oidc::limits::DEFAULT_FAMILY_WRITES_PER_MINUTE,
        value_name = "N"
    )]
    pub family_writes_per_minute: u32,

    /// The https URL of a cluster's API server: `GetMyKubeconfig` (the UI's "Download my
    /// kubeconfig", `ichor auth kubeconfig`) then serves kubeconfigs for it; with --kube-ca-file.
    /// Without it, kubeconfig downloads are refused (no cluster configured).
    #[arg(long, value_name = "URL", requires = "kube_ca_file")]
    pub kube_api_server: Option<String>,

    /// The cluster's CA certificate(s) (PEM, certificates only), written into kubeconfigs.
    #[arg(long, value_name = "FILE", requires = "kube_api_server")]
    pub kube_ca_file: Option<PathBuf>,

    /// The cluster's name in the kubeconfigs served.
    #[arg(long, default_value = DEFAULT_KUBE_CLUSTER_NAME, value_name = "NAME")]
    pub kube_cluster_name: String,

    /// A YAML file of RBAC objects (Roles, ClusterRoles, their bindings) the API evaluates beside
    /// the built-in roles, e.g. a binding of a person of the --external-issuer-url provider
    /// (at most 1 MiB).
    #[arg(long, value_name = "FILE")]
    pub rbac_file: Option<PathBuf>,

    /// The site's own OpenID provider, accepted beside Ichor's issuer (as `ichor-issuer`'s).
    #[command(flatten)]
    pub external: ichor_issuer::cli::ExternalFlags,
}

/// Checks the arguments: a loopback address unless allowed, and a port with a next port.
///
/// # Errors
/// A sentence naming the flag.
pub fn check_args(args: &DevArgs) -> anyhow::Result<(SocketAddr, SocketAddr)> {
    if args.localhost && !args.listen_address.is_loopback() {
        bail!(
            "--localhost names the issuer https://localhost, which reaches this machine's loopback only; \
             --listen-address {} is not a loopback address (drop one of the two)",
            args.listen_address
        );
    }
    if !args.listen_address.is_loopback() && !args.allow_non_loopback {
        bail!(
            "--listen-address {} is not a loopback address; ichor dev serves on this machine only \
             (add --allow-non-loopback to serve others anyway)",
            args.listen_address
        );
    }
    let internal = args
        .port
        .checked_add(1)
        .filter(|_| args.port != 0)
        .with_context(|| {
            format!(
                "--port {}: give a port from 1 to 65534 (the internal listener uses the next one)",
                args.port
            )
        })?;
    Ok((
        SocketAddr::new(args.listen_address, args.port),
        SocketAddr::new(args.listen_address, internal),
    ))
}

/// Checks `--token-ttl` (1m to 15m) before anything is written.
///
/// # Errors
/// A sentence naming the flag.
pub fn check_token_ttl(given: &str) -> anyhow::Result<jiff::SignedDuration> {
    let ttl: jiff::SignedDuration = given
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("--token-ttl {given:?} is not a duration; write it like 5m or 90s"))?;
    if !(MIN_TOKEN_TTL..=MAX_TOKEN_TTL).contains(&ttl) {
        bail!("--token-ttl {given:?} is out of range; it must be from 1m to 15m");
    }
    Ok(ttl)
}

/// The cluster of the kubeconfigs served, from `--kube-api-server` (an https URL with a host and
/// nothing else but a path), the text of `--kube-ca-file` (PEM certificates only) and
/// `--kube-cluster-name` (a non-empty name without spaces or slashes).
///
/// # Errors
/// A sentence naming the flag.
pub fn cluster_info(server: &str, ca_pem: &str, name: &str) -> anyhow::Result<ClusterInfo> {
    let url = plain_https_url(server).map_err(|e| {
        let problem = e.problem(
            "is not a URL like https://127.0.0.1:6443",
            "must use https (a kube-apiserver serves TLS)",
        );
        anyhow::anyhow!("--kube-api-server {server:?} {problem}")
    })?;
    let mut certificates = 0usize;
    for line in ca_pem.lines().map(str::trim) {
        if let Some(label) = line.strip_prefix("-----BEGIN ") {
            if label != "CERTIFICATE-----" {
                bail!(
                    "--kube-ca-file holds a {:?} block; give the cluster's CA certificate(s) only (it is \
                     written into every kubeconfig)",
                    label.trim_end_matches('-')
                );
            }
            certificates += 1;
        }
    }
    if certificates == 0 {
        bail!("--kube-ca-file holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
    }
    if name.is_empty()
        || name.len() > 253
        || name
            .chars()
            .any(|c| c.is_whitespace() || c == '/' || c.is_control())
    {
        bail!("--kube-cluster-name {name:?} must be 1 to 253 characters without spaces or slashes");
    }
    Ok(ClusterInfo {
        name: name.to_owned(),
        endpoint: url.as_str().trim_end_matches('/').to_owned(),
        ca_pem: ca_pem.to_owned(),
    })
}

/// Reads `--kube-ca-file` (at most [`MAX_KUBE_CA_BYTES`]) and builds the [`ClusterInfo`]; `None`
/// without `--kube-api-server`.
///
/// # Errors
/// An unreadable or oversized file, or a flag [`cluster_info`] refuses.
pub(super) fn read_cluster(args: &DevArgs) -> anyhow::Result<Option<ClusterInfo>> {
    use std::io::Read as _;
    let (Some(server), Some(file)) = (&args.kube_api_server, &args.kube_ca_file) else {
        return Ok(None);
    };
    let mut text = String::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(MAX_KUBE_CA_BYTES + 1).read_to_string(&mut text))
        .with_context(|| format!("--kube-ca-file: cannot read {} as text", file.display()))?;
    if text.len() as u64 > MAX_KUBE_CA_BYTES {
        bail!(
            "--kube-ca-file {} is larger than {} KiB; give the cluster's CA certificate(s) only",
            file.display(),
            MAX_KUBE_CA_BYTES / 1024
        );
    }
    cluster_info(server, &text, &args.kube_cluster_name).map(Some)
}
