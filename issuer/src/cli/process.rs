//! The `ichor-issuer` process: flags parsed and validated, logging, the runtime, the store
//! opened and the installation settings followed (kube-runtime's watcher, feature `watch`).

use clap::Parser as _;
use std::sync::Arc;

use super::compose::{kube_cluster, kube_routers, local_routers, read_kube_ca};
use super::config::StoreConfig;
use super::flags::IssuerArgs;
use super::runtime::{Listeners, RunError, RunOptions, open_kube, run};
use crate::installation::InstallationSettings;
use crate::talos_cluster::ClusterEndpoint;
use std::process::ExitCode;

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
        let talos_endpoint = Arc::new(ClusterEndpoint::with_choice(
            config.kubeconfig.cluster_name.clone(),
            config.kubeconfig.talos_cluster.clone(),
        ));
        tokio::spawn(Arc::clone(&talos_endpoint).follow(store.client().clone()));
        if config.kubeconfig.api_server_url.is_none() {
            tracing::info!(
                fallback = %cluster.endpoint,
                "kubeconfigs point at the TalosCluster's spec.endpoint, or while it is unknown at the \
                 issuer's own API server address; set --kube-api-server-url when clients reach the \
                 cluster elsewhere"
            );
        }
        run(
            config,
            listeners,
            RunOptions {
                installation: Some(installation),
                ..RunOptions::default()
            },
            move |served| kube_routers(served, store, access, Some(cluster), talos_endpoint),
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
