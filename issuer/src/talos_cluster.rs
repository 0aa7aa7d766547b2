//! The API server a kubeconfig names with `--store kube`: `TalosCluster.spec.endpoint` of the
//! cluster the issuer serves, followed through a watch, between the configured override and the
//! issuer's own client's server.
//!
//! The decisions are pure: [`pick_endpoint`] chooses the `TalosCluster` (the one named like
//! `--kube-cluster-name`, else the only one in [`NAMESPACE`]) and checks its endpoint;
//! [`choose_server`] orders the candidates: `kubeAPIServerURL` (the flag, or
//! `IchorInstallation.spec.users`) over the endpoint over the fallback.
//! [`ClusterEndpoint::follow`] is the I/O edge: a `list`+`watch` of the `TalosCluster`s of
//! [`NAMESPACE`] that recomputes the endpoint on every change.
//!
//! # Caveats
//! The endpoint is not part of readiness: a cluster without the `TalosCluster` kind, or an issuer
//! not allowed to list it, keeps serving kubeconfigs with the fallback server, and says so in its
//! log (at every change of what is known, and at every kubeconfig served with the fallback).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
pub use ichor_renderers::crd::NAMESPACE;

/// What is known of the cluster's endpoint: its URL (without a trailing `/`), or why there is
/// none to use.
pub type KnownEndpoint = Result<String, String>;

/// Where a kubeconfig's server came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerSource {
    /// `kubeAPIServerURL` (`--kube-api-server-url` or `IchorInstallation.spec.users`).
    Override,
    /// `TalosCluster.spec.endpoint`.
    ClusterEndpoint,
    /// The fallback (the issuer's own client's server), because the endpoint is unknown: why.
    Fallback(String),
}

/// The server a kubeconfig names, and why that one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerChoice<'a> {
    /// The URL written.
    pub server: &'a str,
    /// Where it came from.
    pub source: ServerSource,
}

/// The server of a kubeconfig: `override_url` when set (non-empty), else the cluster's known
/// `endpoint`, else `fallback`.
pub fn choose_server<'a>(
    override_url: Option<&'a str>,
    endpoint: &'a KnownEndpoint,
    fallback: &'a str,
) -> ServerChoice<'a> {
    if let Some(server) = override_url.filter(|u| !u.is_empty()) {
        return ServerChoice {
            server,
            source: ServerSource::Override,
        };
    }
    match endpoint {
        Ok(server) => ServerChoice {
            server,
            source: ServerSource::ClusterEndpoint,
        },
        Err(why) => ServerChoice {
            server: fallback,
            source: ServerSource::Fallback(why.clone()),
        },
    }
}

/// The endpoint of the cluster among `clusters` (name → `spec.endpoint`): the one named
/// `preferred`, else the only one; it must be an https URL with a host.
///
/// # Errors
/// Why no endpoint can be used: no cluster, several and none named `preferred`, or the chosen
/// one's endpoint empty or not an https URL.
pub fn pick_endpoint(clusters: &BTreeMap<String, String>, preferred: &str) -> KnownEndpoint {
    let mut only = clusters.iter();
    let (name, endpoint) = match (clusters.get_key_value(preferred), only.next(), only.next()) {
        (Some(named), _, _) => named,
        (None, Some(single), None) => single,
        (None, None, _) => return Err(format!("no TalosCluster in {NAMESPACE}")),
        (None, Some(_), Some(_)) => {
            return Err(format!(
                "{} TalosClusters in {NAMESPACE} and none is named {preferred:?} (--kube-cluster-name)",
                clusters.len()
            ));
        }
    };
    let endpoint = endpoint.trim();
    if endpoint.is_empty() {
        return Err(format!("TalosCluster {name} has no spec.endpoint"));
    }
    let usable = url::Url::parse(endpoint).is_ok_and(|u| {
        u.scheme() == "https"
            && u.host_str().is_some_and(|h| !h.is_empty())
            && u.username().is_empty()
            && u.password().is_none()
            && u.query().is_none()
            && u.fragment().is_none()
    });
    if !usable {
        return Err(format!(
            "TalosCluster {name} spec.endpoint {:?} is not an https URL with a host",
            endpoint.chars().take(256).collect::<String>()
        ));
    }
    Ok(endpoint.trim_end_matches('/').to_owned())
}

/// The followed endpoint of the cluster named `preferred` (or the only one), shared by the
/// `UserService` calls.
#[derive(Debug)]
pub struct ClusterEndpoint {
    current: ArcSwap<KnownEndpoint>,
    preferred: String,
    failures: AtomicU64,
    /// Set while the cluster does not serve `TalosCluster` (logged once; not part of readiness).
    #[cfg_attr(not(feature = "watch"), allow(dead_code))]
    unserved: std::sync::Mutex<Option<String>>,
}

impl ClusterEndpoint {
    /// Unknown until the first list; `preferred` is `--kube-cluster-name`.
    pub fn new(preferred: impl Into<String>) -> Self {
        Self {
            current: ArcSwap::from_pointee(Err("the TalosClusters are not listed yet".to_owned())),
            preferred: preferred.into(),
            failures: AtomicU64::new(0),
            unserved: std::sync::Mutex::new(None),
        }
    }

    /// What is known now.
    pub fn get(&self) -> Arc<KnownEndpoint> {
        self.current.load_full()
    }

    /// Failed lists or watches since start.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Recomputes the endpoint from `clusters` (name → `spec.endpoint`), logging a change.
    pub fn apply(&self, clusters: &BTreeMap<String, String>) {
        let next = pick_endpoint(clusters, &self.preferred);
        if *self.current.load_full() == next {
            return;
        }
        match &next {
            Ok(server) => tracing::info!(%server, "kubeconfigs name the TalosCluster's spec.endpoint"),
            Err(why) => tracing::warn!(
                %why,
                "kubeconfigs name the issuer's own API server address (set kubeAPIServerURL to choose another)"
            ),
        }
        self.current.store(Arc::new(next));
    }
}

#[cfg(feature = "watch")]
impl ClusterEndpoint {
    /// Follows the `TalosCluster`s of [`NAMESPACE`] through `client` until the process ends; a
    /// failed list or watch is retried with back-off (the endpoint known stays).
    pub async fn follow(self: Arc<Self>, client: kube::Client) {
        use ichor_renderers::crd::TalosCluster;

        let api: kube::Api<TalosCluster> = kube::Api::namespaced(client, NAMESPACE);
        crate::follow::follow_by_name(
            api,
            "TalosClusters",
            |c: TalosCluster| c.spec.endpoint,
            |known, _| self.apply(known),
            &self.failures,
            &self.unserved,
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FALLBACK: &str = "https://10.96.0.1";

    fn clusters(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries
            .iter()
            .map(|(n, e)| ((*n).to_owned(), (*e).to_owned()))
            .collect()
    }

    #[test]
    fn the_override_wins_over_the_endpoint_and_the_fallback() {
        let endpoint = Ok("https://cp.example.com:6443".to_owned());
        let choice = choose_server(Some("https://lb.example.com"), &endpoint, FALLBACK);
        assert_eq!(
            choice,
            ServerChoice {
                server: "https://lb.example.com",
                source: ServerSource::Override
            }
        );
        let unknown = Err("no TalosCluster in ichor-system".to_owned());
        assert_eq!(
            choose_server(Some("https://lb.example.com"), &unknown, FALLBACK).source,
            ServerSource::Override
        );
    }

    #[test]
    fn without_an_override_the_cluster_endpoint_wins_over_the_fallback() {
        let endpoint = Ok("https://cp.example.com:6443".to_owned());
        for override_url in [None, Some("")] {
            assert_eq!(
                choose_server(override_url, &endpoint, FALLBACK),
                ServerChoice {
                    server: "https://cp.example.com:6443",
                    source: ServerSource::ClusterEndpoint
                }
            );
        }
    }

    #[test]
    fn an_unknown_endpoint_falls_back_and_says_why() {
        let unknown = Err("no TalosCluster in ichor-system".to_owned());
        assert_eq!(
            choose_server(None, &unknown, FALLBACK),
            ServerChoice {
                server: FALLBACK,
                source: ServerSource::Fallback("no TalosCluster in ichor-system".to_owned())
            }
        );
    }

    #[test]
    fn the_cluster_named_like_the_kubeconfig_cluster_is_picked_else_the_only_one() {
        let two = clusters(&[("prod", "https://prod:6443/"), ("stage", "https://stage:6443")]);
        assert_eq!(pick_endpoint(&two, "prod"), Ok("https://prod:6443".to_owned()));
        let one = clusters(&[("stage", "https://stage:6443")]);
        assert_eq!(pick_endpoint(&one, "ichor"), Ok("https://stage:6443".to_owned()));
    }

    #[test]
    fn no_cluster_or_several_unnamed_ones_leave_the_endpoint_unknown() {
        assert_eq!(
            pick_endpoint(&BTreeMap::new(), "ichor"),
            Err("no TalosCluster in ichor-system".to_owned())
        );
        let two = clusters(&[("prod", "https://prod:6443"), ("stage", "https://stage:6443")]);
        assert_eq!(
            pick_endpoint(&two, "ichor"),
            Err(
                "2 TalosClusters in ichor-system and none is named \"ichor\" (--kube-cluster-name)"
                    .to_owned()
            )
        );
    }

    #[test]
    fn an_empty_or_non_https_endpoint_is_not_used() {
        assert_eq!(
            pick_endpoint(&clusters(&[("prod", " ")]), "prod"),
            Err("TalosCluster prod has no spec.endpoint".to_owned())
        );
        for bad in ["http://prod:6443", "prod:6443", "https://user:pw@prod:6443"] {
            let why = pick_endpoint(&clusters(&[("prod", bad)]), "prod").unwrap_err();
            assert!(why.starts_with("TalosCluster prod spec.endpoint"), "{bad}: {why}");
        }
    }

    #[test]
    fn the_followed_endpoint_starts_unknown_and_follows_the_clusters() {
        let followed = ClusterEndpoint::new("prod");
        assert!(followed.get().is_err());
        followed.apply(&clusters(&[("prod", "https://prod:6443")]));
        assert_eq!(*followed.get(), Ok("https://prod:6443".to_owned()));
        followed.apply(&BTreeMap::new());
        assert!(followed.get().is_err());
    }
}
