//! Whether the kube-apiserver trusts the provider Ichor's UI signs people in with, and names
//! them as Ichor's API does: the cluster's `TalosCluster.spec.authentication.external` entry for
//! the same issuer must accept the kubeconfig client's audience and map the same claims with the
//! same prefixes. Otherwise a person signed in to the UI gets a kubeconfig that `kubectl` refuses,
//! or RBAC bindings that match in one place and not the other; and it must not accept the UI's
//! client, or a browser's token is a cluster credential too. The UI warns ([`TrustCheck`] in
//! `/auth/config`). [`compare`] is pure; [`ExternalTrust`] follows the `TalosCluster`s.

use std::collections::BTreeMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use ichor_renderers::crd::ExternalIssuerSpec;
use serde::Serialize;

use super::provider::ExternalProvider;

/// The answer `/auth/config` carries as `externalTrust`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", content = "reason", rename_all = "camelCase")]
pub enum TrustCheck {
    /// The cluster trusts the provider and maps it as the API does.
    Matches,
    /// It does not, and why (an English sentence for the log and the UI's details).
    Differs(String),
    /// The cluster's configuration is not known (no `TalosCluster` read yet), and why.
    Unknown(String),
}

/// Compares the configured `provider` with the cluster's external entries. Pure.
pub fn compare(provider: &ExternalProvider, entries: &[ExternalIssuerSpec]) -> TrustCheck {
    let Some(entry) = entries.iter().find(|e| e.issuer_url == provider.issuer) else {
        return TrustCheck::Differs(format!(
            "the cluster's spec.authentication.external has no entry for {}: kubectl refuses its tokens",
            provider.issuer
        ));
    };
    if !entry.audiences.contains(&provider.kube_client_id) {
        return TrustCheck::Differs(format!(
            "the cluster accepts the audiences {:?} of this provider, not {:?} that kubeconfigs sign in for",
            entry.audiences, provider.kube_client_id
        ));
    }
    if entry.audiences.contains(&provider.client_id) {
        return TrustCheck::Differs(format!(
            "the cluster also accepts the audience {:?}, the UI's client: a token a browser signed in with is then a kubectl credential too; list only {:?}",
            provider.client_id, provider.kube_client_id
        ));
    }
    let pairs = [
        (
            "username claim",
            entry.username_claim(),
            provider.username_claim.as_str(),
        ),
        (
            "groups claim",
            entry.groups_claim(),
            provider.groups_claim.as_str(),
        ),
        (
            "username prefix",
            entry.username_prefix(),
            provider.username_prefix.as_str(),
        ),
        (
            "groups prefix",
            entry.groups_prefix(),
            provider.groups_prefix.as_str(),
        ),
    ];
    for (what, cluster, api) in pairs {
        if cluster != api {
            return TrustCheck::Differs(format!(
                "the cluster's {what} is {cluster:?}, Ichor's API uses {api:?}: kubectl and the UI name people differently"
            ));
        }
    }
    TrustCheck::Matches
}

/// The cluster's external entries, as followed (name → entries of each `TalosCluster`).
pub type ClusterEntries = BTreeMap<String, Vec<ExternalIssuerSpec>>;

/// The [`TrustCheck`] of the cluster named `preferred` (or the only one), kept current.
#[derive(Debug)]
pub struct ExternalTrust {
    provider: ExternalProvider,
    preferred: String,
    current: ArcSwap<TrustCheck>,
}

impl ExternalTrust {
    /// Unknown until the first list; `preferred` is `--kube-cluster-name`.
    pub fn new(provider: ExternalProvider, preferred: impl Into<String>) -> Self {
        Self {
            provider,
            preferred: preferred.into(),
            current: ArcSwap::from_pointee(TrustCheck::Unknown(
                "the TalosClusters are not listed yet".to_owned(),
            )),
        }
    }

    /// What is known now.
    pub fn get(&self) -> Arc<TrustCheck> {
        self.current.load_full()
    }

    /// Recomputes from `clusters`, logging a change.
    pub fn apply(&self, clusters: &ClusterEntries) {
        let next = match clusters.get(&self.preferred) {
            Some(entries) => compare(&self.provider, entries),
            None if clusters.len() == 1 => compare(
                &self.provider,
                clusters.values().next().map(Vec::as_slice).unwrap_or_default(),
            ),
            None if clusters.is_empty() => TrustCheck::Unknown("no TalosCluster in ichor-system".to_owned()),
            None => TrustCheck::Unknown(format!(
                "several TalosClusters and none named {:?} (--kube-cluster-name)",
                self.preferred
            )),
        };
        if *self.current.load_full() == next {
            return;
        }
        if let TrustCheck::Differs(why) = &next {
            tracing::warn!(%why, "the kube-apiserver does not trust the external provider as Ichor's API does");
        }
        self.current.store(Arc::new(next));
    }
}

#[cfg(feature = "watch")]
impl ExternalTrust {
    /// Follows the `TalosCluster`s of `ichor-system` through `client` until the process ends.
    pub async fn follow(self: Arc<Self>, client: kube::Client, failures: Arc<std::sync::atomic::AtomicU64>) {
        use ichor_renderers::crd::{NAMESPACE, TalosCluster};

        let api: kube::Api<TalosCluster> = kube::Api::namespaced(client, NAMESPACE);
        crate::follow::follow_by_name(
            api,
            "TalosClusters",
            |c: TalosCluster| c.spec.authentication.map(|a| a.external).unwrap_or_default(),
            |known, _| self.apply(known),
            &failures,
            &std::sync::Mutex::new(None),
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> ExternalProvider {
        ExternalProvider::example()
    }

    fn entry() -> ExternalIssuerSpec {
        ExternalIssuerSpec {
            issuer_url: "https://idp.example.com".into(),
            audiences: vec!["kubernetes".into()],
            ..ExternalIssuerSpec::default()
        }
    }

    #[test]
    fn the_same_issuer_audience_claims_and_prefixes_match_and_each_difference_is_named() {
        assert_eq!(compare(&provider(), &[entry()]), TrustCheck::Matches);
        let differs = |e: ExternalIssuerSpec, needle: &str| match compare(&provider(), &[e]) {
            TrustCheck::Differs(why) => assert!(why.contains(needle), "{why}"),
            other => panic!("{other:?}"),
        };
        differs(
            ExternalIssuerSpec {
                issuer_url: "https://other.example.com".into(),
                ..entry()
            },
            "no entry for https://idp.example.com",
        );
        differs(
            ExternalIssuerSpec {
                audiences: vec!["ichor-ui".into()],
                ..entry()
            },
            "not \"kubernetes\"",
        );
        differs(
            ExternalIssuerSpec {
                audiences: vec!["kubernetes".into(), "ichor-ui".into()],
                ..entry()
            },
            "also accepts the audience \"ichor-ui\", the UI's client",
        );
        differs(
            ExternalIssuerSpec {
                username_prefix: Some("corp:".into()),
                ..entry()
            },
            "username prefix is \"corp:\"",
        );
        differs(
            ExternalIssuerSpec {
                username_claim: Some("sub".into()),
                ..entry()
            },
            "username claim is \"sub\"",
        );
    }

    #[test]
    fn the_followed_check_picks_the_named_or_only_cluster_and_is_unknown_otherwise() {
        let trust = ExternalTrust::new(provider(), "prod");
        assert!(matches!(*trust.get(), TrustCheck::Unknown(_)));
        trust.apply(&[("dev".to_owned(), vec![entry()])].into());
        assert_eq!(*trust.get(), TrustCheck::Matches);
        trust.apply(&[("dev".to_owned(), vec![entry()]), ("prod".to_owned(), vec![])].into());
        assert!(matches!(*trust.get(), TrustCheck::Differs(_)));
        trust.apply(&[("a".to_owned(), vec![]), ("b".to_owned(), vec![])].into());
        assert!(matches!(*trust.get(), TrustCheck::Unknown(_)));
        trust.apply(&ClusterEntries::new());
        assert!(matches!(*trust.get(), TrustCheck::Unknown(_)));
    }
}
