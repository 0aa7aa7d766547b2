//! The runtime settings of `--store kube`: `IchorInstallation.spec.users` (token TTL, refresh
//! lifetime, the kubeconfig server and `tls-server-name`, the second-factor policy), followed
//! through a watch so the next token issued after a change uses it, with the flags as the
//! fallback (the second-factor policy has no flag: see [`effective`]).
//!
//! The decision is pure and shared with the controller's key timeline
//! ([`ichor_renderers::crd::effective`]): the first installation by name is used; each field it
//! sets replaces the flag's value, each it leaves out keeps the flag's; a value out of range keeps
//! every flag value and is reported (the installation is the operator's to fix, and the issuer
//! must not stop issuing meanwhile).
//! [`InstallationSettings::follow`] is the I/O edge: a `list`+`watch` of `IchorInstallation`s
//! (cluster-scoped) that recomputes the settings on every change. Until the first list is
//! complete [`InstallationSettings`] reports not loaded, so `/readyz` waits for it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use ichor_renderers::crd::{UsersSettings, UsersSpec, effective};

use crate::oidc::Settings;
use ichor_server::metrics::ReloadStatus;

/// The name of this source in `/readyz` and the reload metrics.
pub const SOURCE_NAME: &str = "installation";

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
    /// Set while the cluster does not serve `IchorInstallation` (the sentence `/readyz` shows).
    unserved: std::sync::Mutex<Option<String>>,
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
            unserved: std::sync::Mutex::new(None),
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
        let second_factor = &next.settings.second_factor;
        tracing::info!(
            token_ttl = %next.settings.token_ttl,
            refresh_lifetime = %next.settings.refresh_lifetime,
            second_factor_default = second_factor.default_level().name(),
            second_factor_roles = ?second_factor
                .roles()
                .iter()
                .map(|(role, level)| format!("{role}={}", level.name()))
                .collect::<Vec<_>>(),
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
    fn not_ready_reason(&self) -> Option<String> {
        self.unserved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|m| format!("not ready: {m}"))
    }
}

#[cfg(feature = "watch")]
impl InstallationSettings {
    /// Follows the installations through `client` until the process ends; a failed list or
    /// watch is retried with back-off (the settings in force stay).
    pub async fn follow(self: Arc<Self>, client: kube::Client) {
        use ichor_renderers::crd::IchorInstallation;

        let api: kube::Api<IchorInstallation> = kube::Api::all(client);
        crate::follow::follow_by_name(
            api,
            "IchorInstallations",
            |i: IchorInstallation| i.spec.users,
            |known, listed| {
                self.apply(known);
                if listed {
                    self.loaded.store(true, Ordering::Release);
                }
            },
            &self.failures,
            &self.unserved,
        )
        .await;
    }
}
