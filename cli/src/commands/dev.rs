//! `ichor dev`: the whole identity system on one machine, no cluster (docs/architecture.md,
//! "Purpose and shape"). One process runs, on a loopback address only:
//!
//! - the identity graph over the GitOps tree `<state>/manifests` (re-read every second: editing
//!   an `IchorUser` file takes effect without a restart) with the local applier, which writes the
//!   signing keys, the Ichor CA and the issuer's leaf as files under `<state>/secrets`
//!   ([`crate::local`]);
//! - the OIDC issuer and the `UserService` on `https://<address>:<port>` (internal listener on
//!   `<port>+1`, `/metrics` over plain HTTP on a free port of the address, named in the log),
//!   reading those files, users from the tree and credentials from
//!   `<state>/issuer/credentials.json`.
//!
//! On the first run it writes a sample tree with the first admin (`admin`, role `admin`) and
//! prints a generated password for it ONCE to stdout (never to a file or a log); the password
//! must be changed at the first sign-in.
//!
//! This module runs it ([`run`]); `args` holds the flags and their checks, `state` the
//! state directory, the sample tree and the first admin's password.

use std::net::IpAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::local::{CredentialsRemover, LocalController, LocalPaths};
use anyhow::{Context as _, bail};
use ichor_controller_core::identity::effects::RemoveCredentialsKeyRequest;
use ichor_controller_core::perform::OsKeyMaterial;
use ichor_issuer::cli::{Flags, Listeners, RunOptions, StoreKind, local_routers_with, run as run_issuer};
use ichor_issuer::store::local::LocalStore;
use ichor_issuer::store::{Change, StoreError, modify_credentials};
use ichor_renderers::crd::{GoDuration, UsersSettings};
use ichor_renderers::trust::{KEYS_JSON, SIGNING_SECRET, TLS_SECRET};

mod args;
mod state;
#[cfg(test)]
mod tests;

use args::read_cluster;
pub use args::{
    DEFAULT_KUBE_CLUSTER_NAME, DevArgs, MAX_KUBE_CA_BYTES, MAX_RBAC_FILE_BYTES, check_args, check_token_ttl,
    cluster_info, read_rbac_file,
};
pub use state::{FIRST_ADMIN, Layout, prepare};
use state::{bootstrap_admin, default_state_dir};

/// How often the manifest tree and the clock are read.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How long in-flight requests may run after Ctrl-C.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

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

/// Runs `ichor dev` until Ctrl-C or SIGTERM.
///
/// # Errors
/// Bad flags, an unusable state directory, a port in use.
pub fn run(args: DevArgs) -> anyhow::Result<ExitCode> {
    let (listen, internal) = check_args(&args)?;
    let token_ttl = check_token_ttl(&args.token_ttl)?;
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
    .context("cannot start the identity graph")?
    .with_users_fallback(&UsersSettings {
        token_ttl: GoDuration::from_secs(token_ttl.as_secs()),
        refresh_lifetime: UsersSettings::DEFAULT_REFRESH_LIFETIME,
        kube_api_server_url: None,
        kube_api_tls_server_name: None,
        second_factor: ichor_renderers::auth::second_factor_policy::SecondFactorPolicy::default(),
    });
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
        _ if args.localhost => format!("https://localhost:{}", listen.port()),
        IpAddr::V6(ip) => format!("https://[{ip}]:{}", listen.port()),
        IpAddr::V4(ip) => format!("https://{ip}:{}", listen.port()),
    };
    let config = Flags {
        external_url: external_url.clone(),
        listen,
        internal_listen: internal,
        // `/metrics` on a free port of the same address (the "serving" log line names it).
        metrics_listen: std::net::SocketAddr::new(listen.ip(), 0),
        tls_cert_file: None,
        tls_key_file: None,
        ichor_tls_dir: layout.secrets.join(TLS_SECRET),
        keys_file,
        store: StoreKind::Local,
        local_users_dir: Some(layout.manifests.clone()),
        local_state_dir: Some(layout.issuer.clone()),
        token_ttl: args.token_ttl.clone(),
        refresh_lifetime: UsersSettings::DEFAULT_REFRESH_LIFETIME.to_string(),
        trusted_proxy: Vec::new(),
        family_writes_per_minute: args.family_writes_per_minute,
        log_format: ichor_server::logging::LogFormat::Text,
    }
    .validate()
    .context("the issuer's configuration")?;
    let site_rbac = args.rbac_file.as_deref().map(args::read_rbac_file).transpose()?;
    let mut config = config;
    config.external = args
        .external
        .clone()
        .validate(&config.issuer)
        .context("the external identity provider")?;

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
            move |served| local_routers_with(served, store, cluster, site_rbac),
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
