//! `ichor dev`: the whole identity system on one machine, no cluster (ARCHITECTURE.md, "Embedded
//! default"). One process runs, on a loopback address only:
//!
//! - the identity graph over the GitOps tree `<state>/manifests` (re-read every second: editing
//!   an `IchorUser` file takes effect without a restart) with the local applier, which writes the
//!   signing keys, the Ichor CA and the issuer's leaf as files under `<state>/secrets`
//!   ([`crate::local`]);
//! - the OIDC issuer and the `UserService` on `https://<address>:<port>` (internal listener on
//!   `<port>+1`), reading those files, users from the tree and credentials from
//!   `<state>/issuer/credentials.json`.
//!
//! On the first run it writes a sample tree with the first admin (`admin`, role `admin`) and
//! prints a generated password for it ONCE to stdout (never to a file or a log); the password
//! must be changed at the first sign-in.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::local::{CredentialsRemover, LocalController, LocalPaths};
use anyhow::{Context as _, bail};
use clap::Args;
use ichor_issuer::api::ClusterInfo;
use ichor_issuer::cli::{
    Flags, Listeners, MAX_TOKEN_TTL, MIN_TOKEN_TTL, RunOptions, StoreKind, local_routers, run as run_issuer,
};
use ichor_issuer::oidc::passwords::{generate_password, hash_password_random};
use ichor_issuer::store::local::LocalStore;
use ichor_issuer::store::{Change, StoreError, UserStore, modify_credentials};
use ichor_reconcile::identity::effects::RemoveCredentialsKeyRequest;
use ichor_reconcile::perform::OsKeyMaterial;
use ichor_renderers::auth::credentials::CredentialsEntry;
use ichor_renderers::trust::{KEYS_JSON, SIGNING_SECRET, TLS_SECRET};

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

/// The first admin's user name.
pub const FIRST_ADMIN: &str = "admin";

/// How often the manifest tree and the clock are read.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The largest `--kube-ca-file` read (a CA bundle is a few KiB).
pub const MAX_KUBE_CA_BYTES: u64 = 256 * 1024;

/// The default `--kube-cluster-name`.
pub const DEFAULT_KUBE_CLUSTER_NAME: &str = "ichor-dev";

/// How long in-flight requests may run after Ctrl-C.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

const SAMPLE_ADMIN: &str = "\
# The first admin of `ichor dev`. Edit or add IchorUser files in this directory: changes take
# effect within seconds. (Passwords are not kept here: they live in the state directory.)
apiVersion: ichor.maesh.dev/v1alpha1
kind: IchorUser
metadata:
  name: admin
spec:
  displayName: First admin
  roles: [admin]
";

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

    /// Allow a --listen-address other people's machines can reach (the dev state is not
    /// hardened for that: use the helm chart for a shared installation).
    #[arg(long)]
    pub allow_non_loopback: bool,

    /// Lifetime of the ID tokens the issuer signs (1m to 15m).
    #[arg(long, default_value = "5m", value_name = "DURATION")]
    pub token_ttl: String,

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
}

/// The files and directories of a dev state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The state directory.
    pub root: PathBuf,
    /// The GitOps tree.
    pub manifests: PathBuf,
    /// Produced Secrets, `<name>/<key>`.
    pub secrets: PathBuf,
    /// The issuer's local store state (credentials).
    pub issuer: PathBuf,
}

impl Layout {
    /// The layout under `root`.
    pub fn new(root: &Path) -> Self {
        Layout {
            root: root.to_owned(),
            manifests: root.join("manifests"),
            secrets: root.join("secrets"),
            issuer: root.join("issuer"),
        }
    }

    /// The CA certificate clients trust.
    pub fn ca_file(&self) -> PathBuf {
        self.secrets.join(TLS_SECRET).join("ca.crt")
    }
}

/// Checks the arguments: a loopback address unless allowed, and a port with a next port.
///
/// # Errors
/// A sentence naming the flag.
pub fn check_args(args: &DevArgs) -> anyhow::Result<(SocketAddr, SocketAddr)> {
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
    let url = url::Url::parse(server).map_err(|_| {
        anyhow::anyhow!("--kube-api-server {server:?} is not a URL like https://127.0.0.1:6443")
    })?;
    if url.scheme() != "https" {
        bail!("--kube-api-server {server:?} must use https (a kube-apiserver serves TLS)");
    }
    if url.host_str().is_none_or(str::is_empty) {
        bail!("--kube-api-server {server:?} has no host");
    }
    if !url.username().is_empty()
        || url.password().is_some()
        || url.query().is_some()
        || url.fragment().is_some()
    {
        bail!("--kube-api-server {server:?} must not carry a user name, a password, a query or a fragment");
    }
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
fn read_cluster(args: &DevArgs) -> anyhow::Result<Option<ClusterInfo>> {
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

fn default_state_dir() -> anyhow::Result<PathBuf> {
    let home = std::env::var_os("HOME").context("HOME is not set: give --state-dir")?;
    Ok(PathBuf::from(home).join(".ichor").join("dev"))
}

fn private_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("cannot make {} private (0700)", dir.display()))
}

/// Creates the state directories and, when the tree does not exist yet, the sample tree with
/// the first admin. Returns whether the tree was created.
///
/// # Errors
/// The file system refused.
pub fn prepare(layout: &Layout) -> anyhow::Result<bool> {
    private_dir(&layout.root)?;
    private_dir(&layout.secrets)?;
    private_dir(&layout.issuer)?;
    if layout.manifests.exists() {
        return Ok(false);
    }
    let users = layout.manifests.join("users");
    std::fs::create_dir_all(&users).with_context(|| format!("cannot create {}", users.display()))?;
    let file = users.join(format!("{FIRST_ADMIN}.yaml"));
    std::fs::write(&file, SAMPLE_ADMIN).with_context(|| format!("cannot write {}", file.display()))?;
    Ok(true)
}

/// Removes credentials entries for the graph's garbage collection through the issuer's store.
struct StoreRemover {
    store: Arc<LocalStore>,
    runtime: tokio::runtime::Handle,
}

impl CredentialsRemover for StoreRemover {
    fn remove(&mut self, request: &RemoveCredentialsKeyRequest) -> Result<(), String> {
        let store = Arc::clone(&self.store);
        let user = request.key.clone();
        self.runtime
            .block_on(async move {
                modify_credentials(&*store, &user, |_| Ok::<_, StoreError>(Change::Remove(()))).await
            })
            .map_err(|e| e.to_string())?;
        tracing::info!(user = %request.key, "removed the credentials of a user whose IchorUser is gone");
        Ok(())
    }
}

/// Gives the first admin a generated password (`mustChange`) when the credentials store holds
/// no entry at all; returns the password to print once.
async fn bootstrap_admin(store: &LocalStore) -> anyhow::Result<Option<String>> {
    let users = store.list_users().await.context("cannot read the users")?;
    if !users.iter().any(|u| u.name == FIRST_ADMIN) {
        return Ok(None);
    }
    for u in &users {
        if store
            .read_credentials(&u.name)
            .await
            .context("cannot read the credentials")?
            .0
            .is_some()
        {
            return Ok(None);
        }
    }
    let password = generate_password().context("cannot generate a password")?;
    let hash = tokio::task::block_in_place(|| hash_password_random(&password))
        .context("cannot hash the generated password")?;
    let entry = CredentialsEntry::new(hash, jiff::Timestamp::now(), true);
    modify_credentials(store, FIRST_ADMIN, |current| {
        Ok::<_, StoreError>(match current {
            Some(_) => Change::Keep(false),
            None => Change::Put(entry.clone(), true),
        })
    })
    .await
    .map(|written| written.then(|| password.expose().to_owned()))
    .context("cannot store the first admin's credentials")
}

/// Runs `ichor dev` until Ctrl-C or SIGTERM.
///
/// # Errors
/// Bad flags, an unusable state directory, a port in use.
pub fn run(args: DevArgs) -> anyhow::Result<ExitCode> {
    let (listen, internal) = check_args(&args)?;
    check_token_ttl(&args.token_ttl)?;
    let cluster = read_cluster(&args)?;
    let root = match &args.state_dir {
        Some(d) => d.clone(),
        None => default_state_dir()?,
    };
    ichor_server::logging::init(ichor_server::logging::LogFormat::Text);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let layout = Layout::new(&root);
    let created = prepare(&layout)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let store = Arc::new(LocalStore::new(&layout.manifests, &layout.issuer));

    // Settle the graph once before serving, so the keys and the certificates exist.
    let remover = StoreRemover {
        store: Arc::clone(&store),
        runtime: runtime.handle().clone(),
    };
    let mut controller = LocalController::new(
        LocalPaths {
            manifests: layout.manifests.clone(),
            secrets: layout.secrets.clone(),
            credentials: store.credentials_path().to_owned(),
        },
        Box::new(OsKeyMaterial),
        Box::new(remover),
    )
    .context("cannot start the identity graph")?;
    log_report(&controller.tick(jiff::Timestamp::now()));
    let keys_file = layout.secrets.join(SIGNING_SECRET).join(KEYS_JSON);
    if !keys_file.exists() || !layout.ca_file().exists() {
        bail!(
            "the identity graph did not produce {} and {}; see the messages above",
            keys_file.display(),
            layout.ca_file().display()
        );
    }

    let external_url = match listen.ip() {
        IpAddr::V6(ip) => format!("https://[{ip}]:{}", listen.port()),
        IpAddr::V4(ip) => format!("https://{ip}:{}", listen.port()),
    };
    let config = Flags {
        external_url: external_url.clone(),
        listen,
        internal_listen: internal,
        tls_cert_file: None,
        tls_key_file: None,
        ichor_tls_dir: layout.secrets.join(TLS_SECRET),
        keys_file,
        store: StoreKind::Local,
        local_users_dir: Some(layout.manifests.clone()),
        local_state_dir: Some(layout.issuer.clone()),
        token_ttl: args.token_ttl.clone(),
        refresh_lifetime: "12h".to_owned(),
        trusted_proxy: Vec::new(),
        log_format: ichor_server::logging::LogFormat::Text,
    }
    .validate()
    .context("the issuer's configuration")?;

    let stop = Arc::new(AtomicBool::new(false));
    let result = runtime.block_on(async {
        let listeners = Listeners::bind(&config).await?;
        let password = bootstrap_admin(&store).await?;
        print_banner(&external_url, &layout, password.as_deref(), created);

        let graph_stop = Arc::clone(&stop);
        let graph = std::thread::Builder::new()
            .name("ichor-graph".to_owned())
            .spawn(move || {
                while !graph_stop.load(Ordering::Relaxed) {
                    std::thread::sleep(POLL_INTERVAL);
                    log_report(&controller.tick(jiff::Timestamp::now()));
                }
            })
            .context("cannot start the graph thread")?;
        let mut options = RunOptions::default();
        options.serve.shutdown_grace = SHUTDOWN_GRACE;
        let served = run_issuer(
            config,
            listeners,
            options,
            move |served| local_routers(served, store, cluster),
            ichor_server::shutdown::signal(),
        )
        .await;
        stop.store(true, Ordering::Relaxed);
        let _ = tokio::task::spawn_blocking(move || graph.join()).await;
        served.context("the issuer")
    });
    result?;
    eprintln!("ichor dev: stopped");
    Ok(ExitCode::SUCCESS)
}

fn log_report(report: &crate::local::TickReport) {
    for a in &report.actions {
        tracing::info!(action = %a, "identity graph");
    }
    for name in &report.secrets_written {
        tracing::info!(secret = %name, "wrote");
    }
    for p in &report.problems {
        tracing::warn!(problem = %p, "identity graph");
    }
}

fn print_banner(url: &str, layout: &Layout, password: Option<&str>, created: bool) {
    use std::io::Write as _;
    let ca = layout.ca_file();
    let mut out = String::new();
    out.push_str("Ichor is running on this machine (ichor dev).\n\n");
    out.push_str(&format!("  Issuer URL:  {url}\n"));
    out.push_str(&format!("  CA file:     {}\n", ca.display()));
    out.push_str(&format!(
        "  Manifests:   {}   (edit IchorUser files: changes apply within seconds)\n",
        layout.manifests.display()
    ));
    out.push_str(&format!("  State:       {}\n\n", layout.root.display()));
    match password {
        Some(p) => {
            out.push_str("The first admin (this password is shown ONCE and stored nowhere):\n");
            out.push_str(&format!("  User:        {FIRST_ADMIN}\n"));
            out.push_str(&format!("  Password:    {p}\n"));
            out.push_str("  You must change it at the first sign-in.\n\n");
        }
        None if created => {}
        None => out.push_str("Sign in with an existing user (passwords were set on an earlier run).\n\n"),
    }
    out.push_str("Next:\n");
    out.push_str(&format!(
        "  ichor auth login --issuer {url} --ca-file {}\n",
        ca.display()
    ));
    out.push_str(&format!(
        "  ichor auth kubeconfig --issuer {url} --ca-file {}\n\n",
        ca.display()
    ));
    out.push_str("Press Ctrl-C to stop.\n");
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(out.as_bytes());
    let _ = stdout.flush();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn args(address: &str, allow: bool, port: u16) -> DevArgs {
        DevArgs {
            state_dir: None,
            port,
            listen_address: address.parse().unwrap(),
            allow_non_loopback: allow,
            token_ttl: "5m".to_owned(),
            kube_api_server: None,
            kube_ca_file: None,
            kube_cluster_name: DEFAULT_KUBE_CLUSTER_NAME.to_owned(),
        }
    }

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    #[test]
    fn accepts_token_ttls_from_one_to_fifteen_minutes_only() {
        assert_eq!(check_token_ttl("1m").unwrap(), jiff::SignedDuration::from_mins(1));
        assert_eq!(
            check_token_ttl("15m").unwrap(),
            jiff::SignedDuration::from_mins(15)
        );
        for bad in ["59s", "16m", "soon", ""] {
            let refused = check_token_ttl(bad).unwrap_err().to_string();
            assert!(refused.starts_with("--token-ttl"), "{bad}: {refused}");
        }
    }

    #[test]
    fn builds_the_kubeconfig_cluster_from_an_https_url_and_a_certificate() {
        let cluster = cluster_info("https://127.0.0.1:6443/", CA, "ichor-dev").unwrap();
        assert_eq!(cluster.endpoint, "https://127.0.0.1:6443");
        assert_eq!(cluster.name, "ichor-dev");
        assert_eq!(cluster.ca_pem, CA);
    }

    #[test]
    fn refuses_a_plain_http_server_a_private_key_an_empty_bundle_and_a_bad_name() {
        let http = cluster_info("http://127.0.0.1:6443", CA, "dev")
            .unwrap_err()
            .to_string();
        assert!(http.contains("must use https"), "{http}");
        let key = format!("{CA}-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
        let key = cluster_info("https://k:6443", &key, "dev")
            .unwrap_err()
            .to_string();
        assert!(key.contains("\"PRIVATE KEY\" block"), "{key}");
        let empty = cluster_info("https://k:6443", "", "dev").unwrap_err().to_string();
        assert!(empty.contains("no PEM certificate"), "{empty}");
        let name = cluster_info("https://k:6443", CA, "a b").unwrap_err().to_string();
        assert!(name.starts_with("--kube-cluster-name"), "{name}");
        let creds = cluster_info("https://u:p@k:6443", CA, "dev")
            .unwrap_err()
            .to_string();
        assert!(creds.contains("user name"), "{creds}");
    }

    #[test]
    fn refuses_an_oversized_ca_file() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("ca.crt");
        std::fs::write(&file, CA.repeat(10_000)).unwrap();
        let mut a = args("127.0.0.1", false, 8443);
        a.kube_api_server = Some("https://127.0.0.1:6443".to_owned());
        a.kube_ca_file = Some(file);
        let refused = read_cluster(&a).unwrap_err().to_string();
        assert!(refused.contains("larger than 256 KiB"), "{refused}");
    }

    #[test]
    fn refuses_a_non_loopback_address_unless_allowed() {
        let refused = check_args(&args("0.0.0.0", false, 8443)).unwrap_err();
        assert!(refused.to_string().contains("--allow-non-loopback"), "{refused}");
        assert!(check_args(&args("0.0.0.0", true, 8443)).is_ok());
        assert!(check_args(&args("::1", false, 8443)).is_ok());
    }

    #[test]
    fn the_internal_listener_takes_the_next_port() {
        let (ext, int) = check_args(&args("127.0.0.1", false, 9443)).unwrap();
        assert_eq!((ext.port(), int.port()), (9443, 9444));
        assert!(check_args(&args("127.0.0.1", false, 65535)).is_err());
        assert!(check_args(&args("127.0.0.1", false, 0)).is_err());
    }

    #[test]
    fn the_first_run_writes_the_sample_admin_and_a_second_run_keeps_the_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout::new(&tmp.path().join("state"));
        assert!(prepare(&layout).unwrap());
        let sample = std::fs::read_to_string(layout.manifests.join("users/admin.yaml")).unwrap();
        assert!(sample.contains("roles: [admin]"));
        std::fs::write(layout.manifests.join("users/admin.yaml"), "edited").unwrap();
        assert!(!prepare(&layout).unwrap());
        assert_eq!(
            std::fs::read_to_string(layout.manifests.join("users/admin.yaml")).unwrap(),
            "edited"
        );
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&layout.root).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}
