//! The runtime settings of `--store kube`: `IchorInstallation.spec.users` (token TTL, refresh
//! lifetime, the kubeconfig server and `tls-server-name`), followed through a watch so the next
//! token issued after a change uses it, with the flags as the fallback.
//!
//! The decision is pure ([`effective`]): the first installation by name is used, as the
//! controller's key timeline does; each field it sets replaces the flag's value, each it leaves
//! out keeps the flag's; a value out of range keeps every flag value and is reported (the
//! installation is the operator's to fix, and the issuer must not stop issuing meanwhile).
//! [`InstallationSettings::follow`] is the I/O edge: a `list`+`watch` of `IchorInstallation`s
//! (cluster-scoped) that recomputes the settings on every change. Until the first list is
//! complete [`InstallationSettings`] reports not loaded, so `/readyz` waits for it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use ichor_renderers::crd::{UsersSettings, UsersSpec};

use crate::oidc::Settings;
use ichor_server::metrics::ReloadStatus;

/// The name of this source in `/readyz` and the reload metrics.
pub const SOURCE_NAME: &str = "installation";

/// The settings in force and, when the installation's could not be used as given, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    /// What the issuer uses.
    pub settings: UsersSettings,
    /// Why some of the installation's values are not used (logged once per change).
    pub problem: Option<String>,
}

/// The settings from `installations` (name → `spec.users`) over `fallback` (the flags).
pub fn effective(fallback: &UsersSettings, installations: &BTreeMap<String, Option<UsersSpec>>) -> Effective {
    let Some((name, spec)) = installations.iter().next() else {
        return Effective {
            settings: fallback.clone(),
            problem: None,
        };
    };
    let spec = spec.clone().unwrap_or_default();
    let merged = UsersSpec {
        token_ttl: spec.token_ttl.or(Some(fallback.token_ttl)),
        refresh_lifetime: spec.refresh_lifetime.or(Some(fallback.refresh_lifetime)),
        kube_api_server_url: spec
            .kube_api_server_url
            .filter(|u| !u.is_empty())
            .or_else(|| fallback.kube_api_server_url.clone()),
        kube_api_tls_server_name: spec
            .kube_api_tls_server_name
            .filter(|s| !s.is_empty())
            .or_else(|| fallback.kube_api_tls_server_name.clone()),
    };
    let more = (installations.len() > 1).then(|| {
        format!(
            "{} IchorInstallations exist; the settings of {name} are used",
            installations.len()
        )
    });
    match UsersSettings::resolve(Some(&merged)) {
        Ok(settings) => Effective {
            settings,
            problem: more,
        },
        Err(e) => Effective {
            settings: fallback.clone(),
            problem: Some(format!(
                "IchorInstallation {name}: {e}; the issuer's flags are used instead"
            )),
        },
    }
}

/// [`Settings`] that follow the cluster's `IchorInstallation`s; a [`ReloadStatus`] for
/// readiness and metrics.
#[derive(Debug)]
pub struct InstallationSettings {
    settings: Arc<Settings>,
    // Read only by the watch (an `ichor dev` build follows no installation).
    #[cfg_attr(not(feature = "watch"), allow(dead_code))]
    fallback: UsersSettings,
    loaded: AtomicBool,
    failures: AtomicU64,
    #[cfg_attr(not(feature = "watch"), allow(dead_code))]
    problem: std::sync::Mutex<Option<String>>,
}

impl InstallationSettings {
    /// Settings starting at `fallback` (the flags) until the first list.
    pub fn new(fallback: UsersSettings) -> Self {
        Self {
            settings: Arc::new(Settings::new(fallback.clone())),
            fallback,
            loaded: AtomicBool::new(false),
            failures: AtomicU64::new(0),
            problem: std::sync::Mutex::new(None),
        }
    }

    /// The settings the issuer and the `UserService` read.
    pub fn settings(&self) -> Arc<Settings> {
        Arc::clone(&self.settings)
    }

    #[cfg_attr(not(feature = "watch"), allow(dead_code))]
    fn apply(&self, installations: &BTreeMap<String, Option<UsersSpec>>) {
        let next = effective(&self.fallback, installations);
        {
            let mut last = self
                .problem
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *last != next.problem {
                if let Some(problem) = &next.problem {
                    tracing::warn!(%problem, "IchorInstallation settings");
                }
                last.clone_from(&next.problem);
            }
        }
        if *self.settings.get() == next.settings {
            return;
        }
        tracing::info!(
            token_ttl = %next.settings.token_ttl,
            refresh_lifetime = %next.settings.refresh_lifetime,
            "runtime settings changed"
        );
        self.settings.store(next.settings);
    }
}

impl ReloadStatus for InstallationSettings {
    fn name(&self) -> &str {
        SOURCE_NAME
    }
    fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }
    fn reload_failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }
}

#[cfg(feature = "watch")]
impl InstallationSettings {
    /// Follows the installations through `client` until the process ends; a failed list or
    /// watch is retried with back-off (the settings in force stay).
    pub async fn follow(self: Arc<Self>, client: kube::Client) {
        use futures::StreamExt as _;
        use ichor_renderers::crd::IchorInstallation;
        use kube::runtime::{WatchStreamExt as _, watcher};
        use kube::{Api, ResourceExt as _};

        let api: Api<IchorInstallation> = Api::all(client);
        let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()).default_backoff());
        let mut known: BTreeMap<String, Option<UsersSpec>> = BTreeMap::new();
        let mut listing: BTreeMap<String, Option<UsersSpec>> = BTreeMap::new();
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => listing.clear(),
                Ok(watcher::Event::InitApply(i)) => {
                    listing.insert(i.name_any(), i.spec.users);
                }
                Ok(watcher::Event::InitDone) => {
                    known = std::mem::take(&mut listing);
                    self.apply(&known);
                    self.loaded.store(true, Ordering::Release);
                }
                Ok(watcher::Event::Apply(i)) => {
                    known.insert(i.name_any(), i.spec.users);
                    self.apply(&known);
                }
                Ok(watcher::Event::Delete(i)) => {
                    known.remove(&i.name_any());
                    self.apply(&known);
                }
                Err(error) => {
                    self.failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%error, "cannot follow IchorInstallations; the settings in force stay");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ichor_renderers::crd::GoDuration;

    fn flags() -> UsersSettings {
        UsersSettings {
            token_ttl: GoDuration::from_secs(600),
            refresh_lifetime: GoDuration::from_secs(24 * 3600),
            kube_api_server_url: Some("https://k8s.example.com".into()),
            kube_api_tls_server_name: None,
        }
    }

    fn users(ttl: Option<&str>, life: Option<&str>) -> Option<UsersSpec> {
        Some(UsersSpec {
            token_ttl: ttl.map(|t| t.parse().unwrap()),
            refresh_lifetime: life.map(|l| l.parse().unwrap()),
            ..Default::default()
        })
    }

    #[test]
    fn without_an_installation_the_flags_are_used() {
        let e = effective(&flags(), &BTreeMap::new());
        assert_eq!(
            e,
            Effective {
                settings: flags(),
                problem: None
            }
        );
    }

    #[test]
    fn each_field_the_installation_sets_replaces_the_flag_and_the_rest_stay() {
        let installations = BTreeMap::from([("ichor".to_owned(), users(Some("2m"), None))]);
        let e = effective(&flags(), &installations);
        assert_eq!(e.settings.token_ttl.as_secs(), 120);
        assert_eq!(e.settings.refresh_lifetime.as_secs(), 24 * 3600);
        assert_eq!(
            e.settings.kube_api_server_url.as_deref(),
            Some("https://k8s.example.com")
        );
        assert_eq!(e.problem, None);
        let empty = BTreeMap::from([("ichor".to_owned(), None)]);
        assert_eq!(effective(&flags(), &empty).settings, flags());
    }

    #[test]
    fn the_first_installation_by_name_is_used_and_the_others_are_reported() {
        let installations = BTreeMap::from([
            ("b".to_owned(), users(Some("3m"), None)),
            ("a".to_owned(), users(Some("2m"), None)),
        ]);
        let e = effective(&flags(), &installations);
        assert_eq!(e.settings.token_ttl.as_secs(), 120);
        assert_eq!(
            e.problem.as_deref(),
            Some("2 IchorInstallations exist; the settings of a are used")
        );
    }

    #[test]
    fn a_value_out_of_range_keeps_every_flag_and_names_the_field() {
        let installations = BTreeMap::from([("ichor".to_owned(), users(Some("2m"), Some("721h")))]);
        let e = effective(&flags(), &installations);
        assert_eq!(e.settings, flags());
        let problem = e.problem.unwrap();
        assert!(
            problem.starts_with("IchorInstallation ichor: spec.users.refreshLifetime: 721h"),
            "{problem}"
        );
    }
}
