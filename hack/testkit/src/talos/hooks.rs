//! What runs after a successful apply: a node's hook with the configuration it now runs, one at
//! a time per node, its outcome recorded; and the hook that does what Talos does with a
//! `KubeAuthenticationConfig` on a real control plane of the test kit.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::control_plane::{ControlPlane, EMPTY_AUTHENTICATION_CONFIG};

/// A successful apply, as a hook sees it.
#[derive(Clone, Debug)]
pub struct Applied {
    /// The node (its `node` metadata value).
    pub node: String,
    /// The machine configuration it now runs, as sent.
    pub config: Vec<u8>,
}

/// One finished hook.
#[derive(Clone, Debug)]
pub struct HookRun {
    /// The node.
    pub node: String,
    /// When it finished.
    pub finished_at: Instant,
    /// What it returned.
    pub result: Result<(), String>,
}

type BoxedFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// A node's hook.
#[derive(Clone)]
pub(super) enum Hook {
    /// Awaited on the fake's runtime.
    Async(Arc<dyn Fn(Applied) -> BoxedFuture + Send + Sync>),
    /// Run on a blocking thread.
    Blocking(Arc<dyn Fn(Applied) -> Result<(), String> + Send + Sync>),
}

impl Hook {
    /// An async hook from a closure returning a future.
    pub(super) fn asynchronous<F, Fut>(hook: F) -> Self
    where
        F: Fn(Applied) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        Self::Async(Arc::new(move |applied| Box::pin(hook(applied)) as BoxedFuture))
    }
}

/// Runs `hook` on the current runtime after the node's earlier hooks, recording its outcome.
pub(super) fn spawn(
    hook: Hook,
    applied: Applied,
    node_lock: Arc<tokio::sync::Mutex<()>>,
    runs: Arc<Mutex<Vec<HookRun>>>,
) {
    tokio::spawn(async move {
        let _one_at_a_time = node_lock.lock().await;
        let node = applied.node.clone();
        let result = match hook {
            Hook::Async(f) => f(applied).await,
            Hook::Blocking(f) => tokio::task::spawn_blocking(move || f(applied))
                .await
                .unwrap_or_else(|e| Err(format!("the hook panicked: {e}"))),
        };
        if let Err(e) = &result {
            eprintln!("fake Talos node {node}: the on-apply hook failed: {e}");
        }
        super::lock(&runs).push(HookRun {
            node,
            finished_at: Instant::now(),
            result,
        });
    });
}

/// The `--authentication-config` file Talos renders from the `KubeAuthenticationConfig`
/// document of the machine configuration `config`: its `configuration`, with `apiVersion` and
/// `kind` forced to `apiserver.config.k8s.io/v1beta1` and `AuthenticationConfiguration`.
/// `Ok(None)` when the configuration has no such document.
///
/// # Errors
/// When `config` is not UTF-8 multi-document YAML, or the document's `configuration` is not a
/// mapping.
pub fn authentication_config_file(config: &[u8]) -> anyhow::Result<Option<String>> {
    let text = std::str::from_utf8(config)?;
    let Some(document) = ichor_talos::machine_config::extract_document(text, "KubeAuthenticationConfig")?
    else {
        return Ok(None);
    };
    let value: serde_yaml::Value = serde_yaml::from_str(&document)?;
    let mut configuration = match value.get("configuration") {
        Some(serde_yaml::Value::Mapping(m)) => m.clone(),
        None | Some(serde_yaml::Value::Null) => serde_yaml::Mapping::new(),
        Some(_) => anyhow::bail!("KubeAuthenticationConfig: `configuration` is not a mapping"),
    };
    configuration.insert("apiVersion".into(), "apiserver.config.k8s.io/v1beta1".into());
    configuration.insert("kind".into(), "AuthenticationConfiguration".into());
    Ok(Some(serde_yaml::to_string(&configuration)?))
}

/// A blocking hook that does what Talos does after an apply on a control plane: restarts
/// apiserver `index` of `plane` with the authentication file rendered from the new
/// configuration ([`authentication_config_file`]; with no `KubeAuthenticationConfig` document,
/// the empty one), waiting up to `timeout` for its `/readyz`.
pub fn restart_apiserver_hook(
    plane: Arc<Mutex<ControlPlane>>,
    index: usize,
    timeout: Duration,
) -> impl Fn(Applied) -> Result<(), String> + Send + Sync + 'static {
    move |applied: Applied| {
        let file = authentication_config_file(&applied.config)
            .map_err(|e| format!("{}: {e:#}", applied.node))?
            .unwrap_or_else(|| EMPTY_AUTHENTICATION_CONFIG.to_owned());
        let mut plane = super::lock(&plane);
        plane
            .restart_apiserver(index, Some(&file), timeout)
            .map(|_| ())
            .map_err(|e| format!("{}: restarting kube-apiserver {index}: {e:#}", applied.node))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_authentication_file_is_the_configuration_with_the_kubernetes_type_forced() {
        let config = "version: v1alpha1\n---\napiVersion: v1alpha1\nkind: KubeAuthenticationConfig\n\
                      configuration:\n  apiVersion: apiserver.config.k8s.io/v1alpha1\n  jwt: []\n  \
                      anonymous: {enabled: true}\n";
        let file = authentication_config_file(config.as_bytes()).unwrap().unwrap();
        let value: serde_yaml::Value = serde_yaml::from_str(&file).unwrap();
        assert_eq!(value["apiVersion"], "apiserver.config.k8s.io/v1beta1");
        assert_eq!(value["kind"], "AuthenticationConfiguration");
        assert_eq!(value["anonymous"]["enabled"], true);
        assert!(value["jwt"].as_sequence().unwrap().is_empty());
        assert_eq!(authentication_config_file(b"version: v1alpha1\n").unwrap(), None);
    }
}
