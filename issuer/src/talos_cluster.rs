//! The API server a kubeconfig names with `--store kube`: `TalosCluster.spec.endpoint` of the
//! cluster the issuer serves, followed through a watch, between the configured override and the
//! issuer's own client's server.
//!
//! The decisions are pure: [`pick_endpoint`] chooses the `TalosCluster` (the one chosen with
//! `--kubeconfig-cluster`, the chart's [`CHOICE_VALUE`]; else the one named like
//! `--kube-cluster-name`, else the only one in [`NAMESPACE`]) and checks its endpoint;
//! [`choose_server`] orders the candidates: `kubeAPIServerURL` (the flag, or
//! `IchorInstallation.spec.users`) over the endpoint over the fallback, and refuses when the
//! clusters are there but none is the right one.
//! [`ClusterEndpoint::follow`] is the I/O edge: a `list`+`watch` of the `TalosCluster`s of
//! [`NAMESPACE`] that recomputes the endpoint on every change.
//!
//! # Caveats
//! The endpoint is not part of readiness: a cluster without the `TalosCluster` kind, or an issuer
//! not allowed to list it, keeps serving kubeconfigs with the fallback server, and says so in its
//! log (at every change of what is known, and at every kubeconfig served with the fallback).
//! Several `TalosCluster`s and no choice is not that case: the fallback (the issuer's in-cluster
//! address) is then never what a user's laptop reaches, so kubeconfigs are refused with the value
//! to set instead of served broken.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
pub use ichor_renderers::crd::NAMESPACE;

/// The chart value that chooses the `TalosCluster` of the kubeconfigs (the issuer's
/// `--kubeconfig-cluster`), named in every refusal.
pub const CHOICE_VALUE: &str = "ichorUI.users.kubeconfigCluster";
/// The chart value that overrides the server of the kubeconfigs (`--kube-api-server-url`).
pub const OVERRIDE_VALUE: &str = "ichorUI.users.kubeAPIServerURL";
/// At most this many cluster names are listed in a refusal.
const NAMES_LISTED: usize = 8;

/// Why no `TalosCluster` endpoint is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unknown {
    /// Nothing says which server to use (no `TalosCluster` listed yet or at all, or the only
    /// one's endpoint is unusable): kubeconfigs name the fallback, and the log says why.
    Fallback(String),
    /// The `TalosCluster`s are there but none is the one to use (several and none chosen, or
    /// the chosen one missing or with an unusable endpoint): a kubeconfig naming the fallback
    /// could not work from outside the cluster, so `GetMyKubeconfig` refuses with this sentence.
    Refuse(String),
}

/// What is known of the cluster's endpoint: its URL (without a trailing `/`), or why there is
/// none to use.
pub type KnownEndpoint = Result<String, Unknown>;

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
///
/// # Errors
/// The sentence of [`Unknown::Refuse`] when no override is set and the clusters leave no
/// server that a kubeconfig could use.
pub fn choose_server<'a>(
    override_url: Option<&'a str>,
    endpoint: &'a KnownEndpoint,
    fallback: &'a str,
) -> Result<ServerChoice<'a>, &'a str> {
    if let Some(server) = override_url.filter(|u| !u.is_empty()) {
        return Ok(ServerChoice {
            server,
            source: ServerSource::Override,
        });
    }
    match endpoint {
        Ok(server) => Ok(ServerChoice {
            server,
            source: ServerSource::ClusterEndpoint,
        }),
        Err(Unknown::Fallback(why)) => Ok(ServerChoice {
            server: fallback,
            source: ServerSource::Fallback(why.clone()),
        }),
        Err(Unknown::Refuse(why)) => Err(why),
    }
}

/// The endpoint of the cluster among `clusters` (name → `spec.endpoint`): the one `chosen`
/// (`--kubeconfig-cluster`) when given, else the one named `preferred` (`--kube-cluster-name`),
/// else the only one; it must be an https URL with a host.
///
/// # Errors
/// [`Unknown::Refuse`] for several clusters and none chosen or named `preferred`, and for a
/// `chosen` cluster that is missing or whose endpoint is unusable; [`Unknown::Fallback`] for no
/// cluster, or an unchosen cluster whose endpoint is empty or not an https URL.
pub fn pick_endpoint(
    clusters: &BTreeMap<String, String>,
    chosen: Option<&str>,
    preferred: &str,
) -> KnownEndpoint {
    if let Some(chosen) = chosen {
        let Some(endpoint) = clusters.get(chosen) else {
            return Err(Unknown::Refuse(format!(
                "TalosCluster {chosen:?} ({CHOICE_VALUE}) does not exist in {NAMESPACE} (there: {}); set \
                 {CHOICE_VALUE} to one that does",
                listed(clusters)
            )));
        };
        return usable_endpoint(chosen, endpoint).map_err(|why| {
            Unknown::Refuse(format!(
                "{why}: correct its spec.endpoint, or set {OVERRIDE_VALUE}"
            ))
        });
    }
    let mut only = clusters.iter();
    let (name, endpoint) = match (clusters.get_key_value(preferred), only.next(), only.next()) {
        (Some(named), _, _) => named,
        (None, Some(single), None) => single,
        (None, None, _) => return Err(Unknown::Fallback(format!("no TalosCluster in {NAMESPACE}"))),
        (None, Some(_), Some(_)) => {
            return Err(Unknown::Refuse(format!(
                "{} TalosClusters in {NAMESPACE} ({}) and none is chosen for kubeconfigs: set the chart \
                 value {CHOICE_VALUE} (ichor-issuer --kubeconfig-cluster) to the cluster whose \
                 spec.endpoint users reach, or {OVERRIDE_VALUE}",
                clusters.len(),
                listed(clusters)
            )));
        }
    };
    usable_endpoint(name, endpoint).map_err(Unknown::Fallback)
}

/// `endpoint` of cluster `name`, trimmed, when it is an https URL with a host and nothing but a
/// path; else why not.
fn usable_endpoint(name: &str, endpoint: &str) -> Result<String, String> {
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

/// The names of `clusters`, comma-separated, at most [`NAMES_LISTED`] of them (`none` when
/// empty).
fn listed(clusters: &BTreeMap<String, String>) -> String {
    if clusters.is_empty() {
        return "none".to_owned();
    }
    let mut names: Vec<&str> = clusters.keys().take(NAMES_LISTED).map(String::as_str).collect();
    if clusters.len() > NAMES_LISTED {
        names.push("…");
    }
    names.join(", ")
}

/// The followed endpoint of the cluster chosen (or named `preferred`, or the only one), shared
/// by the `UserService` calls.
#[derive(Debug)]
pub struct ClusterEndpoint {
    current: ArcSwap<KnownEndpoint>,
    chosen: Option<String>,
    preferred: String,
    failures: AtomicU64,
    /// Set while the cluster does not serve `TalosCluster` (logged once; not part of readiness).
    #[cfg_attr(not(feature = "watch"), allow(dead_code))]
    unserved: std::sync::Mutex<Option<String>>,
}

impl ClusterEndpoint {
    /// Unknown until the first list; `preferred` is `--kube-cluster-name`, and no cluster is
    /// chosen.
    pub fn new(preferred: impl Into<String>) -> Self {
        Self::with_choice(preferred, None)
    }

    /// [`ClusterEndpoint::new`] with the cluster `chosen` by `--kubeconfig-cluster` (`None`:
    /// the one named `preferred`, else the only one).
    pub fn with_choice(preferred: impl Into<String>, chosen: Option<String>) -> Self {
        Self {
            current: ArcSwap::from_pointee(Err(Unknown::Fallback(
                "the TalosClusters are not listed yet".to_owned(),
            ))),
            chosen: chosen.filter(|c| !c.is_empty()),
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
        let next = pick_endpoint(clusters, self.chosen.as_deref(), &self.preferred);
        if *self.current.load_full() == next {
            return;
        }
        match &next {
            Ok(server) => tracing::info!(%server, "kubeconfigs name the TalosCluster's spec.endpoint"),
            Err(Unknown::Fallback(why)) => tracing::warn!(
                %why,
                "kubeconfigs name the issuer's own API server address (set kubeAPIServerURL to choose another)"
            ),
            Err(Unknown::Refuse(why)) => tracing::warn!(
                %why,
                "kubeconfigs are refused until the cluster is chosen (unless kubeAPIServerURL is set)"
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

    fn refusal(known: KnownEndpoint) -> String {
        match known {
            Err(Unknown::Refuse(why)) => why,
            other => panic!("not a refusal: {other:?}"),
        }
    }

    #[test]
    fn the_override_wins_over_the_endpoint_the_fallback_and_a_refusal() {
        let endpoint = Ok("https://cp.example.com:6443".to_owned());
        let choice = choose_server(Some("https://lb.example.com"), &endpoint, FALLBACK);
        assert_eq!(
            choice,
            Ok(ServerChoice {
                server: "https://lb.example.com",
                source: ServerSource::Override
            })
        );
        let unknown = Err(Unknown::Fallback("no TalosCluster in ichor-system".to_owned()));
        assert_eq!(
            choose_server(Some("https://lb.example.com"), &unknown, FALLBACK).map(|c| c.source),
            Ok(ServerSource::Override)
        );
        let ambiguous = Err(Unknown::Refuse("2 TalosClusters".to_owned()));
        assert_eq!(
            choose_server(Some("https://lb.example.com"), &ambiguous, FALLBACK).map(|c| c.server),
            Ok("https://lb.example.com")
        );
    }

    #[test]
    fn without_an_override_the_cluster_endpoint_wins_over_the_fallback() {
        let endpoint = Ok("https://cp.example.com:6443".to_owned());
        for override_url in [None, Some("")] {
            assert_eq!(
                choose_server(override_url, &endpoint, FALLBACK),
                Ok(ServerChoice {
                    server: "https://cp.example.com:6443",
                    source: ServerSource::ClusterEndpoint
                })
            );
        }
    }

    #[test]
    fn an_unknown_endpoint_falls_back_and_says_why() {
        let unknown = Err(Unknown::Fallback("no TalosCluster in ichor-system".to_owned()));
        assert_eq!(
            choose_server(None, &unknown, FALLBACK),
            Ok(ServerChoice {
                server: FALLBACK,
                source: ServerSource::Fallback("no TalosCluster in ichor-system".to_owned())
            })
        );
    }

    #[test]
    fn a_refusal_without_an_override_is_the_answer_not_the_fallback() {
        let ambiguous = Err(Unknown::Refuse("set ichorUI.users.kubeconfigCluster".to_owned()));
        for override_url in [None, Some("")] {
            assert_eq!(
                choose_server(override_url, &ambiguous, FALLBACK),
                Err("set ichorUI.users.kubeconfigCluster")
            );
        }
    }

    #[test]
    fn the_cluster_named_like_the_kubeconfig_cluster_is_picked_else_the_only_one() {
        let two = clusters(&[("prod", "https://prod:6443/"), ("stage", "https://stage:6443")]);
        assert_eq!(
            pick_endpoint(&two, None, "prod"),
            Ok("https://prod:6443".to_owned())
        );
        let one = clusters(&[("stage", "https://stage:6443")]);
        assert_eq!(
            pick_endpoint(&one, None, "ichor"),
            Ok("https://stage:6443".to_owned())
        );
    }

    #[test]
    fn the_chosen_cluster_wins_over_the_named_one_and_must_exist_with_a_usable_endpoint() {
        let two = clusters(&[("prod", "https://prod:6443/"), ("stage", "https://stage:6443")]);
        assert_eq!(
            pick_endpoint(&two, Some("stage"), "prod"),
            Ok("https://stage:6443".to_owned())
        );
        let one = clusters(&[("stage", "https://stage:6443")]);
        assert_eq!(
            refusal(pick_endpoint(&one, Some("prod"), "ichor")),
            "TalosCluster \"prod\" (ichorUI.users.kubeconfigCluster) does not exist in ichor-system \
             (there: stage); set ichorUI.users.kubeconfigCluster to one that does"
        );
        assert!(
            refusal(pick_endpoint(&BTreeMap::new(), Some("prod"), "ichor")).contains("(there: none)"),
            "chosen but no cluster at all: refused, not the fallback"
        );
        let bad = clusters(&[("prod", "http://prod:6443"), ("stage", "https://stage:6443")]);
        assert_eq!(
            refusal(pick_endpoint(&bad, Some("prod"), "ichor")),
            "TalosCluster prod spec.endpoint \"http://prod:6443\" is not an https URL with a host: \
             correct its spec.endpoint, or set ichorUI.users.kubeAPIServerURL"
        );
    }

    #[test]
    fn no_cluster_falls_back_and_several_unchosen_ones_are_refused_naming_the_chart_value() {
        assert_eq!(
            pick_endpoint(&BTreeMap::new(), None, "ichor"),
            Err(Unknown::Fallback("no TalosCluster in ichor-system".to_owned()))
        );
        let two = clusters(&[("prod", "https://prod:6443"), ("stage", "https://stage:6443")]);
        assert_eq!(
            refusal(pick_endpoint(&two, None, "ichor")),
            "2 TalosClusters in ichor-system (prod, stage) and none is chosen for kubeconfigs: set the \
             chart value ichorUI.users.kubeconfigCluster (ichor-issuer --kubeconfig-cluster) to the \
             cluster whose spec.endpoint users reach, or ichorUI.users.kubeAPIServerURL"
        );
        let many: BTreeMap<String, String> = (0..20)
            .map(|i| (format!("c{i:02}"), "https://c:6443".to_owned()))
            .collect();
        let why = refusal(pick_endpoint(&many, None, "ichor"));
        assert!(
            why.starts_with("20 TalosClusters in ichor-system (c00, c01, c02, c03, c04, c05, c06, c07, …)"),
            "{why}"
        );
    }

    #[test]
    fn an_empty_or_non_https_endpoint_of_an_unchosen_cluster_falls_back() {
        assert_eq!(
            pick_endpoint(&clusters(&[("prod", " ")]), None, "prod"),
            Err(Unknown::Fallback(
                "TalosCluster prod has no spec.endpoint".to_owned()
            ))
        );
        for bad in ["http://prod:6443", "prod:6443", "https://user:pw@prod:6443"] {
            let Err(Unknown::Fallback(why)) = pick_endpoint(&clusters(&[("prod", bad)]), None, "prod") else {
                panic!("{bad}: not a fallback");
            };
            assert!(why.starts_with("TalosCluster prod spec.endpoint"), "{bad}: {why}");
        }
    }

    #[test]
    fn the_followed_endpoint_starts_unknown_and_follows_the_clusters() {
        let followed = ClusterEndpoint::new("prod");
        assert!(matches!(*followed.get(), Err(Unknown::Fallback(_))));
        followed.apply(&clusters(&[("prod", "https://prod:6443")]));
        assert_eq!(*followed.get(), Ok("https://prod:6443".to_owned()));
        followed.apply(&BTreeMap::new());
        assert!(followed.get().is_err());
    }

    #[test]
    fn the_followed_endpoint_of_a_choice_follows_the_chosen_cluster() {
        let followed = ClusterEndpoint::with_choice("ichor", Some("stage".to_owned()));
        let two = clusters(&[("prod", "https://prod:6443"), ("stage", "https://stage:6443")]);
        followed.apply(&two);
        assert_eq!(*followed.get(), Ok("https://stage:6443".to_owned()));
        followed.apply(&clusters(&[("prod", "https://prod:6443")]));
        assert!(
            matches!(*followed.get(), Err(Unknown::Refuse(_))),
            "{:?}",
            followed.get()
        );
        let unchosen = ClusterEndpoint::with_choice("ichor", Some(String::new()));
        unchosen.apply(&two);
        assert!(
            matches!(*unchosen.get(), Err(Unknown::Refuse(_))),
            "an empty choice is no choice"
        );
    }
}
