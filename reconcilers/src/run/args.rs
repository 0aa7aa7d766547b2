//! The flags of `ichor-controller run` and their checks against the ranges they accept (pure:
//! the settings the loop starts from, or the [`RunError`] naming the flag to fix).

use std::net::SocketAddr;
use std::path::PathBuf;

use ichor_controller_core::identity::rollout::RolloutSettings;
use ichor_renderers::contract;
use ichor_renderers::crd::{GoDuration, UsersSettings, UsersSettingsError, UsersSpec};
use ichor_renderers::rollout::APISERVER_PORT;
use ichor_renderers::trust::NAMESPACE;
use ichor_server::logging::LogFormat;

use super::RunError;

const EXAMPLES: &str = "\
Examples:
  # In a pod (the Helm chart sets every other flag through ICHOR_CONTROLLER_* variables):
  ichor-controller run --leader-elect --webhook-port 9443

  # One replica against the current kubeconfig, logging decisions without applying them:
  ichor-controller run --leader-elect=false --dry-run --log-format text --journal /tmp/ichor.journal

  # Then look at what it decided, offline:
  ichor-controller replay /tmp/ichor.journal";

/// The flags of `ichor-controller run`; each can also be set by its environment variable.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct RunArgs {
    /// Elect one leader on a Lease; only the leader applies (`--leader-elect=false`: a single
    /// replica, development).
    #[arg(long, env = "ICHOR_CONTROLLER_LEADER_ELECT", default_value_t = true,
        num_args = 0..=1, require_equals = true, default_missing_value = "true",
        action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// This replica's identity in the Lease (the pod name). Required with --leader-elect.
    #[arg(long, env = "ICHOR_CONTROLLER_POD_NAME")]
    pub pod_name: Option<String>,
    /// The least time between two batches of the credentials sweep, in milliseconds (the move
    /// of `ichor-user-credentials` into one Secret per user writes that Secret once a batch).
    #[arg(long, env = "ICHOR_CONTROLLER_CREDENTIALS_SWEEP_INTERVAL_MS", default_value_t = 2000,
        value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub credentials_sweep_interval_ms: u64,
    /// The namespace of every input and owned object (Ichor installs into ichor-system only).
    #[arg(long, env = "ICHOR_CONTROLLER_NAMESPACE", default_value = NAMESPACE)]
    pub namespace: String,
    /// The Lease of the leader election.
    #[arg(long, env = "ICHOR_CONTROLLER_LEASE_NAME", default_value = contract::CONTROLLER_LEASE)]
    pub lease_name: String,
    /// The HTTPS port of the admission webhooks (served by every replica).
    #[arg(long, env = "ICHOR_CONTROLLER_WEBHOOK_PORT", default_value_t = 9443)]
    pub webhook_port: u16,
    /// The directory of the webhook serving certificate (`tls.crt`, `tls.key`), reloaded on change.
    #[arg(
        long,
        env = "ICHOR_CONTROLLER_WEBHOOK_CERT_DIR",
        default_value = "/var/run/ichor/webhook-tls"
    )]
    pub webhook_cert_dir: PathBuf,
    /// The ValidatingWebhookConfiguration whose caBundles the controller keeps; its webhooks'
    /// Services are the DNS names of the serving certificate it issues.
    #[arg(
        long,
        env = "ICHOR_CONTROLLER_WEBHOOK_CONFIGURATION",
        default_value = contract::WEBHOOK_CONFIGURATION
    )]
    pub webhook_configuration: String,
    /// Where /metrics, /healthz and /readyz are served (plain HTTP).
    #[arg(long, env = "ICHOR_CONTROLLER_METRICS_LISTEN", default_value = "0.0.0.0:8080")]
    pub metrics_listen: SocketAddr,
    /// The label selector of the issuer Service (its ClusterIP goes into the Ichor leaf): the
    /// seed's label of the UI Service. The earlier chart's `app.kubernetes.io/component=issuer`
    /// still works when given here.
    #[arg(
        long,
        env = "ICHOR_CONTROLLER_ISSUER_SERVICE_SELECTOR",
        default_value = contract::ISSUER_SELECTOR
    )]
    pub issuer_service_selector: String,
    /// The name of the issuer Service (the chart's): only the Service of this name that also
    /// carries the label is the issuer's; another Service with the label is never used.
    #[arg(
        long,
        env = "ICHOR_CONTROLLER_ISSUER_SERVICE_NAME",
        default_value = contract::ISSUER_SERVICE
    )]
    pub issuer_service_name: String,
    /// Log line format.
    #[arg(long, env = "ICHOR_CONTROLLER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
    /// Also write every event to this journal (JSON lines, Secret data redacted to sha256),
    /// continued across restarts; `ichor-controller replay FILE` prints its decisions.
    #[arg(long, env = "ICHOR_CONTROLLER_JOURNAL")]
    pub journal: Option<PathBuf>,
    /// Seconds between full resyncs (every desired object diffed against the World).
    #[arg(long, env = "ICHOR_CONTROLLER_RESYNC_SECONDS", default_value_t = 600,
        value_parser = clap::value_parser!(u64).range(10..))]
    pub resync_seconds: u64,
    /// Decide and log, but apply nothing.
    #[arg(long, env = "ICHOR_CONTROLLER_DRY_RUN")]
    pub dry_run: bool,
    /// The issuer's ID-token lifetime when `IchorInstallation.spec.users` sets none: the same
    /// value as the issuer's `--token-ttl` (1m to 15m), so a superseded signing key is kept
    /// until the last token it signed expires.
    #[arg(
        long,
        env = "ICHOR_CONTROLLER_TOKEN_TTL",
        default_value = "5m",
        value_name = "DURATION"
    )]
    pub token_ttl: GoDuration,
    /// The issuer's refresh lifetime when `IchorInstallation.spec.users` sets none: the same
    /// value as the issuer's `--refresh-lifetime` (1h to 720h), so a key rotation never logs
    /// an idle session out.
    #[arg(
        long,
        env = "ICHOR_CONTROLLER_REFRESH_LIFETIME",
        default_value = "12h",
        value_name = "DURATION"
    )]
    pub refresh_lifetime: GoDuration,
    /// How long a new signing key is published (in `ichor-oidc-signing`, so in every issuer
    /// replica's JWKS and every kube-apiserver's cache) before it signs: longer than the
    /// kubelet's Secret-volume sync plus the apiservers' JWKS refresh (1m to 60m).
    #[arg(
        long,
        env = "ICHOR_CONTROLLER_KEY_PUBLISH_LEAD",
        default_value = "10m",
        value_name = "DURATION"
    )]
    pub key_publish_lead: GoDuration,
    /// Roll `TalosOperation`s of kind `config` (the apiserver restart, one control plane at a
    /// time) with each cluster's Talos credentials, the Secret `<cluster>-talosconfig`. Off, the
    /// controller leaves operations alone (the chart turns it on with `controller.rollout.clusters`).
    #[arg(long, env = "ICHOR_CONTROLLER_ROLLOUT", default_value_t = false,
        num_args = 0..=1, require_equals = true, default_missing_value = "true",
        action = clap::ArgAction::Set)]
    pub rollout: bool,
    /// How long one control plane of a `config` rollout may take, from its apply to its
    /// `/readyz` back, before its previous document is re-applied and the operation stops
    /// (10s to 1h).
    #[arg(
        long,
        env = "ICHOR_CONTROLLER_ROLLOUT_STEP_TIMEOUT",
        default_value = "5m",
        value_name = "DURATION"
    )]
    pub rollout_step_timeout: GoDuration,
    /// A control plane whose `/readyz` stays ready this long after its apply is done (its
    /// restart was quicker than the probes); at most the step timeout.
    #[arg(
        long,
        env = "ICHOR_CONTROLLER_ROLLOUT_RESTART_GRACE",
        default_value = "60s",
        value_name = "DURATION"
    )]
    pub rollout_restart_grace: GoDuration,
    /// Time between two `/readyz` probes of the control plane being restarted (1s to 1m).
    #[arg(
        long,
        env = "ICHOR_CONTROLLER_ROLLOUT_POLL_INTERVAL",
        default_value = "1s",
        value_name = "DURATION"
    )]
    pub rollout_poll_interval: GoDuration,
    /// The kube-apiserver port of the control planes, whose `/readyz` a rollout waits for.
    #[arg(long, env = "ICHOR_CONTROLLER_APISERVER_PORT", default_value_t = APISERVER_PORT)]
    pub apiserver_port: u16,
}

impl RunArgs {
    /// The issuer settings the flags give, checked against the issuer's bounds.
    ///
    /// # Errors
    /// [`RunError::UsersFlag`], naming the flag.
    pub fn users_fallback(&self) -> Result<UsersSettings, RunError> {
        let spec = UsersSpec {
            token_ttl: Some(self.token_ttl),
            refresh_lifetime: Some(self.refresh_lifetime),
            ..UsersSpec::default()
        };
        UsersSettings::resolve(Some(&spec)).map_err(|e| {
            let (flag, range) = match e {
                UsersSettingsError::TokenTtl(_) => ("--token-ttl (ICHOR_CONTROLLER_TOKEN_TTL)", "1m to 15m"),
                _ => (
                    "--refresh-lifetime (ICHOR_CONTROLLER_REFRESH_LIFETIME)",
                    "1h to 720h",
                ),
            };
            RunError::UsersFlag { flag, range }
        })
    }

    /// The key publish lead, checked against its range.
    ///
    /// # Errors
    /// [`RunError::KeysFlag`], naming the flag.
    pub fn key_publish_lead(&self) -> Result<jiff::SignedDuration, RunError> {
        let lead = self.key_publish_lead.as_secs();
        if !(60..=3600).contains(&lead) {
            return Err(RunError::KeysFlag {
                flag: "--key-publish-lead (ICHOR_CONTROLLER_KEY_PUBLISH_LEAD)",
                range: "1m to 60m",
            });
        }
        Ok(self.key_publish_lead.as_signed())
    }

    /// The rollout's settings the flags give, checked against their ranges.
    ///
    /// # Errors
    /// [`RunError::RolloutFlag`], naming the flag.
    pub fn rollout_settings(&self) -> Result<RolloutSettings, RunError> {
        let timeout = self.rollout_step_timeout.as_secs();
        let grace = self.rollout_restart_grace.as_secs();
        let poll = self.rollout_poll_interval.as_secs();
        if !(10..=3600).contains(&timeout) {
            return Err(RunError::RolloutFlag {
                flag: "--rollout-step-timeout (ICHOR_CONTROLLER_ROLLOUT_STEP_TIMEOUT)",
                range: "10s to 1h",
            });
        }
        if !(0..=timeout).contains(&grace) {
            return Err(RunError::RolloutFlag {
                flag: "--rollout-restart-grace (ICHOR_CONTROLLER_ROLLOUT_RESTART_GRACE)",
                range: "0s to the step timeout",
            });
        }
        if !(1..=60).contains(&poll) {
            return Err(RunError::RolloutFlag {
                flag: "--rollout-poll-interval (ICHOR_CONTROLLER_ROLLOUT_POLL_INTERVAL)",
                range: "1s to 1m",
            });
        }
        let secs = |n: i64| u64::try_from(n).unwrap_or_default();
        Ok(RolloutSettings {
            step_timeout_secs: secs(timeout),
            restart_grace_secs: secs(grace),
            poll_interval_millis: secs(poll) * 1000,
            apiserver_port: self.apiserver_port,
            ..RolloutSettings::default()
        })
    }
}
