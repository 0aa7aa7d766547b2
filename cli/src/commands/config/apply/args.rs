//! The flags of `ichor config apply` and the duration format they take.

use std::{path::PathBuf, time::Duration};

use clap::Args;
use ichor_renderers::rollout::APISERVER_PORT;

/// Arguments of `ichor config apply`.
#[derive(Debug, Args)]
#[command(after_help = "\
Restarts the Kubernetes API server on each control plane that needs the rendered
KubeAuthenticationConfig, one at a time, with no reboot and no drain: for each node the Talos API
ApplyConfiguration (mode NO_REBOOT) with the node's full machine configuration, in which the
rendered document replaces the old one, then the wait for https://<address>:6443/readyz to go
down and come back (or to stay ready past the restart grace). The next node starts only after
that; a node whose API server does not come back is restarted with its previous document and
the rollout stops there.

In the cluster (no --dir): the command renders the plan from the cluster's objects, creates a
TalosOperation of kind config (or finds the one already rolling the cluster) and follows it
until it ends, printing each node's progress. The controller does the work with the cluster's
Talos credentials (chart value controller.rollout.clusters, Secret <cluster>-talosconfig);
Ctrl-C stops following, not the rollout.

Offline (--dir): this process renders the manifests directory and does the rollout itself, with
each control plane's current configuration from --machine-config-dir (one <machine>.yaml each,
e.g. `talosctl -n <address> get machineconfig -o jsonpath='{.spec}'`; keep that directory
outside --dir) and progress in DIR/.ichor/operations/<cluster>.yaml. It runs the controller's
reconcile loop: a node whose API server does not come back is rolled back, and every event is
journaled to DIR/.ichor/journal/<cluster>-<time>.jsonl (`ichor-controller replay FILE`
shows its decisions). The first failure stops it, leaves later nodes untouched and prints the
command that resumes at the failed node.

Exit code: 0 applied (or nothing to do, or a dry run), 1 refused or stopped on a failure.

Examples:
  ichor config apply --cluster prod --dry-run       # the plan, from the cluster
  ichor config apply --cluster prod                 # roll it in the cluster and follow it
  ichor config apply --dir ./clusters/prod --dry-run
  ichor config apply --dir ./clusters/prod --machine-config-dir ./machineconfigs \\
      --kube-ca-file ./kube-ca.crt --yes")]
pub struct ApplyArgs {
    /// Roll offline from this directory of manifests (as `ichor render --dir`) instead of in
    /// the cluster of your kubeconfig.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The TalosCluster (name or namespace/name; namespace ichor-system by default); with
    /// --dir it may be left out when DIR has one cluster.
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,
    /// Print the plan and check the inputs; send nothing to any node.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Continue the interrupted operation of this cluster at its first node not done.
    #[arg(long)]
    pub resume: bool,
    /// The directory of each control plane's current machine configuration, `<machine>.yaml`.
    #[arg(long, value_name = "DIR")]
    pub machine_config_dir: Option<PathBuf>,
    /// The talosconfig with the os:admin client certificate [default: ~/.talos/config].
    #[arg(long, value_name = "FILE", env = "TALOSCONFIG")]
    pub talosconfig: Option<PathBuf>,
    /// The talosconfig context to use instead of its current one.
    #[arg(long, value_name = "NAME")]
    pub talos_context: Option<String>,
    /// The Kubernetes CA (PEM) that signs the kube-apiserver certificates, to verify /readyz.
    #[arg(long, value_name = "FILE")]
    pub kube_ca_file: Option<PathBuf>,
    /// Do not verify the kube-apiserver certificate on /readyz (the Talos API is always verified).
    #[arg(long, conflicts_with = "kube_ca_file")]
    pub insecure_skip_readyz_tls_verify: bool,
    /// How long one node may take, from the apply to /readyz back.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub node_timeout: Duration,
    /// After the apply, a /readyz never seen down counts as restarted once this has passed.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub restart_grace: Duration,
    /// The time between two /readyz probes.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub poll_interval: Duration,
    /// The kube-apiserver port (KubeAPIServerConfig.apiPort when the cluster moved it).
    #[arg(long, value_name = "PORT", default_value_t = APISERVER_PORT)]
    pub apiserver_port: u16,
}

/// `5m`, `90s`, `250ms`, `1h30m` (jiff's friendly format) as a non-negative duration.
pub(super) fn parse_duration(s: &str) -> Result<Duration, String> {
    let d: jiff::SignedDuration = s
        .parse()
        .map_err(|e| format!("{s:?} is not a duration like 5m, 90s or 250ms ({e})"))?;
    Duration::try_from(d).map_err(|_| format!("{s:?}: a duration must not be negative"))
}
