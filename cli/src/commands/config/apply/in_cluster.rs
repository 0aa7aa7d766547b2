//! `ichor config apply --cluster NAME` without `--dir`: the rollout runs in the cluster. The
//! command renders the plan from the cluster's own objects (the `TalosCluster`, its
//! `TalosMachine`s, `ichor-oidc-trust` and the `IchorInstallation`'s second-factor policy, as the
//! controller does), creates a `TalosOperation`
//! of kind `config` (or finds the one already rolling that cluster) and follows its status until
//! it ends, printing each node's progress like `kubectl rollout status`. The controller does the
//! work (`ichor_controller_core::identity::rollout`); stopping this command does not stop it. The
//! operation it creates is labelled `app.kubernetes.io/managed-by=ichor-identity`
//! ([`identity_operation`]), which is what makes the controller drive it; a `config` operation
//! without the label is Ichor core's, and this command neither follows nor adopts one.
//!
//! Before creating an operation (or following one nobody took up), the command checks that the
//! controller rolls the cluster out at all ([`super::preflight`]: the release's
//! `controller.rollout.clusters`, the controller's Deployment, the Secret `<cluster>-talosconfig`)
//! and, when it does not, fails at once saying what to set; `--dry-run` only warns.
//!
//! Then, for a cluster trusting Ichor's issuer whose `ichor-oidc-trust` is not published yet
//! (right after `ichor init`: the controller publishes it once the issuer Service exists and a
//! replica is ready, and init's upgrade restarts the controller's pods), it waits up to 120 s
//! for it, then fails saying what to check.
//!
//! Following reads the operation every second and waits out an API that does not answer (its
//! server restarting is what a rollout does). A kubeconfig that may not read `ichor-oidc-trust`
//! (none of the built-in roles may read ConfigMaps) cannot render the plan of a cluster trusting
//! Ichor's issuer: the command says so, shows no plan (a `--dry-run` then fails), and still
//! creates and follows the operation, whose plan the controller makes. The hidden variables
//! `ICHOR_TEST_TRUST_WAIT_SECS` (tests only) shortens the 120 s wait for the trust;
//! `ICHOR_TEST_UNCLAIMED_AFTER_SECS` (tests only) shortens the 30 s after which an operation
//! without any status is said not to be taken up: the check is made again then, and the command
//! fails when it now says the controller does not roll the cluster out, else warns and follows;
//! after ten times that without any status it stops following and exits 1 (the operation stays).

use std::{collections::BTreeMap, io::IsTerminal, process::ExitCode, time::Duration};

use anyhow::Context as _;
use ichor_renderers::{
    auth::second_factor_policy::SecondFactorPolicy,
    authn::RenderError,
    cluster::{installations_second_factor, render_cluster},
    crd::{
        IDENTITY_MANAGER, IchorInstallation, MANAGED_BY_LABEL, NodeState, OperationKind, OperationNodeResult,
        OperationPhase, TalosCluster, TalosMachine, TalosOperation, TalosOperationSpec,
        is_identity_operation,
    },
    rollout::RolloutPlan,
    trust::{IssuerTrust, NAMESPACE, TRUST_CONFIGMAP},
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
};

use super::{
    args::ApplyArgs,
    inputs::confirm,
    preflight::{self, Rollout},
};
use crate::OutputFormat;

/// How often the operation's status is read while following it.
const POLL: Duration = Duration::from_secs(1);
/// How long one read of the operation may take before the API counts as away (a control plane
/// that drops packets instead of refusing the connection).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// After this long without any status, the controller is said not to roll out.
const UNCLAIMED_AFTER: Duration = Duration::from_secs(30);
/// An operation without any status after this many times [`UNCLAIMED_AFTER`] (5 min) is given
/// up on: the command stops following it and exits 1.
const GIVE_UP_FACTOR: u32 = 10;
/// For tests only (not in `--help`): whole seconds that replace [`UNCLAIMED_AFTER`], so the
/// warning is seen without waiting 30 s (`cli/tests/it/apiserver/config_apply.rs`).
const UNCLAIMED_AFTER_ENV: &str = "ICHOR_TEST_UNCLAIMED_AFTER_SECS";

/// How long the command waits for `ichor-oidc-trust` of a cluster trusting Ichor's issuer
/// (right after `ichor init`, the controller's pods restart and then publish it).
const TRUST_WAIT: Duration = Duration::from_secs(120);
/// For tests only (not in `--help`): whole seconds that replace [`TRUST_WAIT`].
const TRUST_WAIT_ENV: &str = "ICHOR_TEST_TRUST_WAIT_SECS";

/// [`UNCLAIMED_AFTER`], or the seconds of [`UNCLAIMED_AFTER_ENV`].
fn unclaimed_after() -> Duration {
    std::env::var(UNCLAIMED_AFTER_ENV)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .map_or(UNCLAIMED_AFTER, Duration::from_secs)
}

/// [`TRUST_WAIT`], or the seconds of [`TRUST_WAIT_ENV`].
fn trust_wait() -> Duration {
    std::env::var(TRUST_WAIT_ENV)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .map_or(TRUST_WAIT, Duration::from_secs)
}

/// Reads `ichor-oidc-trust`: the trust and whether the caller may not read it. The built-in
/// roles (ichor:viewer, operator, admin) may not read ConfigMaps: without the trust, a cluster
/// trusting Ichor's issuer cannot be rendered here, but the controller makes the same plan from
/// the same objects, so the operation can still be created and followed. When the cluster
/// trusts Ichor's issuer and the ConfigMap does not exist yet (right after `ichor init`: the
/// controller publishes it once the issuer Service exists and a replica is ready), it is waited
/// for, up to [`TRUST_WAIT`].
async fn read_trust(client: &Client, trusts_ichor: bool) -> anyhow::Result<(Option<IssuerTrust>, bool)> {
    let api = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE);
    let started = tokio::time::Instant::now();
    let bound = trust_wait();
    let mut said = false;
    loop {
        let trust = match api.get_opt(TRUST_CONFIGMAP).await {
            Ok(cm) => cm.and_then(|cm| IssuerTrust::from_configmap(&cm).ok()),
            Err(kube::Error::Api(e)) if e.code == 403 => return Ok((None, true)),
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot read ConfigMap {NAMESPACE}/{TRUST_CONFIGMAP}"));
            }
        };
        if trust.is_some() || !trusts_ichor || started.elapsed() >= bound {
            if said && trust.is_some() {
                eprintln!("ConfigMap {NAMESPACE}/{TRUST_CONFIGMAP} is published.");
            }
            return Ok((trust, false));
        }
        if !std::mem::replace(&mut said, true) {
            eprintln!(
                "Waiting up to {}s for the controller to publish ConfigMap {NAMESPACE}/{TRUST_CONFIGMAP} (the \
                 issuer's discoveryURL and CA, published once the issuer Service exists)...",
                bound.as_secs()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The second-factor policy of the cluster's `IchorInstallation`s, as the controller renders it:
/// `None` when the caller may not list them (the plan cannot be shown then). A cluster that does
/// not serve the kind has no policy, as the controller counts it.
async fn read_second_factor(client: &Client) -> anyhow::Result<Option<SecondFactorPolicy>> {
    match Api::<IchorInstallation>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => Ok(Some(installations_second_factor(&list.items))),
        Err(kube::Error::Api(e)) if e.code == 403 => Ok(None),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Some(SecondFactorPolicy::default())),
        Err(e) => Err(e).context("cannot list IchorInstallations (the second-factor policy)"),
    }
}

/// `namespace/name` or `name` (in `ichor-system`).
fn split_cluster(arg: &str) -> (&str, &str) {
    arg.split_once('/').unwrap_or((NAMESPACE, arg))
}

/// Runs the cluster mode.
pub fn run(args: &ApplyArgs, output: OutputFormat) -> anyhow::Result<ExitCode> {
    let Some(cluster_arg) = args.cluster.as_deref() else {
        eprintln!(
            "error: --cluster NAME is required without --dir (the rollout runs in the cluster of your \
             kubeconfig); pass --dir DIR to render a manifests directory instead"
        );
        return Ok(ExitCode::FAILURE);
    };
    for (set, flag) in [
        (args.machine_config_dir.is_some(), "--machine-config-dir"),
        (args.resume, "--resume"),
        (args.kube_ca_file.is_some(), "--kube-ca-file"),
        (
            args.insecure_skip_readyz_tls_verify,
            "--insecure-skip-readyz-tls-verify",
        ),
    ] {
        if set {
            eprintln!(
                "error: {flag} goes with --dir only: in the cluster, the controller reads each node's \
                 configuration and the cluster's credentials itself"
            );
            return Ok(ExitCode::FAILURE);
        }
    }
    let (namespace, name) = split_cluster(cluster_arg);
    if let Some(bad) = [namespace, name]
        .into_iter()
        .find(|n| !ichor_renderers::crd::is_object_name(n))
    {
        eprintln!(
            "error: --cluster {cluster_arg:?}: {bad:?} is not a Kubernetes object name (lowercase \
             letters, digits, '-' and '.', starting and ending with a letter or digit)"
        );
        return Ok(ExitCode::FAILURE);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = Client::try_default()
            .await
            .context("cannot use your kubeconfig (KUBECONFIG or ~/.kube/config)")?;
        in_cluster(client, args, output, namespace, name).await
    })
}

async fn in_cluster(
    client: Client,
    args: &ApplyArgs,
    output: OutputFormat,
    namespace: &str,
    name: &str,
) -> anyhow::Result<ExitCode> {
    let clusters: Api<TalosCluster> = Api::namespaced(client.clone(), namespace);
    let Some(cluster) = clusters
        .get_opt(name)
        .await
        .with_context(|| format!("cannot read TalosCluster {namespace}/{name}"))?
    else {
        eprintln!("error: TalosCluster {namespace}/{name} does not exist (kubectl get talosclusters -A)");
        return Ok(ExitCode::FAILURE);
    };
    let machines: Vec<TalosMachine> = Api::<TalosMachine>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .with_context(|| format!("cannot list TalosMachines in {namespace}"))?
        .items;
    let operations: Api<TalosOperation> = Api::namespaced(client.clone(), namespace);
    let running = running_operation(
        operations
            .list(&ListParams::default())
            .await
            .with_context(|| format!("cannot list TalosOperations in {namespace}"))?
            .items,
        name,
    );
    // An operation the controller has taken up shows that it rolls the cluster out.
    let taken_up = running
        .as_ref()
        .is_some_and(|op| op.status.as_ref().and_then(|s| s.phase).is_some());
    if !taken_up && let Rollout::Off(why) = preflight::check(&client, namespace, name).await {
        if args.dry_run {
            eprintln!("warning: {why}");
        } else {
            eprintln!("error: {why}");
            eprintln!("No operation was created.");
            return Ok(ExitCode::FAILURE);
        }
    }
    let trusts_ichor = cluster
        .spec
        .authentication
        .as_ref()
        .and_then(|a| a.ichor.as_ref())
        .is_some_and(|i| i.enabled);
    let (trust, trust_forbidden) = read_trust(&client, trusts_ichor).await?;
    let second_factor = if trusts_ichor {
        read_second_factor(&client).await?
    } else {
        Some(SecondFactorPolicy::default())
    };
    let render = render_cluster(
        &cluster,
        &machines,
        trust.as_ref(),
        second_factor.as_ref().unwrap_or(&SecondFactorPolicy::default()),
    );

    let plan = match (&render.authentication, &render.rollout) {
        _ if second_factor.is_none() => {
            eprintln!(
                "Your kubeconfig may not list IchorInstallations (the second-factor policy, which decides \
                 rules of cluster {name}'s authentication), so the plan cannot be shown here; the \
                 controller makes it from the same objects and the operation's status lists its control \
                 planes."
            );
            None
        }
        (Err(RenderError::WaitingForIchorTrust), _) if trust_forbidden => {
            eprintln!(
                "Your kubeconfig may not read ConfigMap {NAMESPACE}/{TRUST_CONFIGMAP} (the issuer's trust, \
                 which cluster {name} needs), so the plan cannot be shown here; the controller makes it \
                 from the same objects and the operation's status lists its control planes."
            );
            None
        }
        (Err(e), _) => {
            eprintln!("error: cluster {namespace}/{name} renders no authentication document: {e}");
            if matches!(e, RenderError::WaitingForIchorTrust) {
                eprintln!(
                    "The controller publishes it once the issuer Service exists (users on) and a controller \
                     replica is ready: kubectl -n {NAMESPACE} rollout status deploy/ichor-controller (its \
                     /readyz says what it waits for), then run this command again."
                );
            }
            return Ok(ExitCode::FAILURE);
        }
        (Ok(_), Some(Err(e))) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::FAILURE);
        }
        (Ok(_), Some(Ok(plan))) => Some(plan.clone()),
        (Ok(_), None) => {
            eprintln!("error: cluster {namespace}/{name}: no rollout plan was made");
            return Ok(ExitCode::FAILURE);
        }
    };
    if let Some(plan) = &plan {
        match output {
            OutputFormat::Table => println!("{}", plan.to_string().trim_end()),
            OutputFormat::Json => println!("{}", serde_json::to_string_pretty(plan)?),
            OutputFormat::Yaml => print!("{}", serde_yaml::to_string(plan)?),
        }
    }
    if args.dry_run {
        if plan.is_none() {
            eprintln!("error: dry run without a plan: no operation was created");
            return Ok(ExitCode::FAILURE);
        }
        eprintln!("dry run: no operation was created");
        return Ok(ExitCode::SUCCESS);
    }
    let op_name = match running {
        Some(op) => {
            let op_name = op.metadata.name.clone().unwrap_or_default();
            eprintln!("Operation {namespace}/{op_name} is already rolling cluster {name}; following it.");
            op_name
        }
        None if plan.as_ref().is_some_and(RolloutPlan::is_empty) => {
            eprintln!("nothing to do: every control plane runs the rendered configuration");
            return Ok(ExitCode::SUCCESS);
        }
        None => {
            if !args.yes {
                let which = plan.as_ref().map_or_else(
                    || "the control planes".to_owned(),
                    |p| format!("{} control plane(s)", p.steps.len()),
                );
                let question =
                    format!("Restart the Kubernetes API server on {which} of {name}, one at a time? [y/N] ");
                match confirm(&question) {
                    Ok(true) => {}
                    Ok(false) => {
                        eprintln!("aborted: no operation was created");
                        return Ok(ExitCode::FAILURE);
                    }
                    Err(message) => {
                        eprintln!("error: {message}");
                        return Ok(ExitCode::FAILURE);
                    }
                }
            }
            let op = identity_operation(namespace, name);
            let created = operations
                .create(&PostParams::default(), &op)
                .await
                .with_context(|| format!("cannot create a TalosOperation in {namespace}"))?;
            let op_name = created.metadata.name.unwrap_or_default();
            eprintln!("Created operation {namespace}/{op_name}.");
            op_name
        }
    };
    follow(&client, &operations, namespace, &op_name, name).await
}

/// A new `config` operation of `namespace/cluster` for the controller of this subsystem: a
/// generated name `config-<cluster>-…` and the label [`MANAGED_BY_LABEL`]`=`[`IDENTITY_MANAGER`]
/// that tells it apart from Ichor core's rollouts (only a labelled operation is driven).
fn identity_operation(namespace: &str, cluster: &str) -> TalosOperation {
    let mut op = TalosOperation::new(
        "",
        TalosOperationSpec {
            cluster: cluster.to_owned(),
            kind: OperationKind::Config,
            action: None,
            machines: Vec::new(),
            paused: false,
        },
    );
    op.metadata.name = None;
    op.metadata.generate_name = Some(format!("config-{cluster}-"));
    op.metadata.namespace = Some(namespace.to_owned());
    op.metadata.labels = Some(BTreeMap::from([(
        MANAGED_BY_LABEL.to_owned(),
        IDENTITY_MANAGER.to_owned(),
    )]));
    op
}

/// The `config` operation of `cluster` this subsystem drives that has not ended, if any: one
/// the controller runs (or paused) first, else one still pending (waiting for its turn, or not
/// yet taken up). Ichor core's operations (without the identity label) are never followed: the
/// controller would never move them, and a new one of ours waits for them to end.
fn running_operation(operations: Vec<TalosOperation>, cluster: &str) -> Option<TalosOperation> {
    let mut open: Vec<TalosOperation> = operations
        .into_iter()
        .filter(|op| op.spec.kind == OperationKind::Config && op.spec.cluster == cluster)
        .filter(|op| is_identity_operation(op.metadata.labels.as_ref()))
        .filter(|op| {
            !matches!(
                op.status.as_ref().and_then(|s| s.phase),
                Some(OperationPhase::Succeeded | OperationPhase::Failed)
            )
        })
        .collect();
    let started = |op: &TalosOperation| {
        matches!(
            op.status.as_ref().and_then(|s| s.phase),
            Some(OperationPhase::Running | OperationPhase::Paused)
        )
    };
    match open.iter().position(started) {
        Some(i) => Some(open.swap_remove(i)),
        None => open.into_iter().next(),
    }
}

/// The line printed for a node whose state or message changed.
fn node_line(i: usize, total: usize, node: &OperationNodeResult) -> String {
    let detail = node
        .message
        .as_deref()
        .map(|m| format!(": {m}"))
        .unwrap_or_default();
    format!("[{}/{total}] {}: {}{detail}", i + 1, node.machine, node.state)
}

/// Follows the operation until it ends; the API being away (its server restarting) is waited out.
async fn follow(
    client: &Client,
    operations: &Api<TalosOperation>,
    namespace: &str,
    op_name: &str,
    cluster: &str,
) -> anyhow::Result<ExitCode> {
    let interactive = std::io::stderr().is_terminal();
    if interactive {
        eprintln!("Following it (Ctrl-C stops following; the operation goes on in the cluster).");
    }
    let started = tokio::time::Instant::now();
    let unclaimed_after = unclaimed_after();
    let mut seen: BTreeMap<usize, (String, Option<String>)> = BTreeMap::new();
    let mut last_message: Option<String> = None;
    let mut warned_unclaimed = false;
    let mut away = false;
    loop {
        let read = match tokio::time::timeout(REQUEST_TIMEOUT, operations.get_opt(op_name)).await {
            Ok(read) => read,
            Err(_) => Err(kube::Error::Service(
                format!("no answer within {}s", REQUEST_TIMEOUT.as_secs()).into(),
            )),
        };
        let op = match read {
            Ok(Some(op)) => {
                if away {
                    eprintln!("The API is back.");
                    away = false;
                }
                op
            }
            Ok(None) => {
                eprintln!("error: operation {namespace}/{op_name} was deleted");
                return Ok(ExitCode::FAILURE);
            }
            Err(e) => {
                if !away {
                    eprintln!("The API did not answer ({e}); its server may be restarting. Retrying.");
                    away = true;
                }
                tokio::time::sleep(POLL).await;
                continue;
            }
        };
        let status = op.status.clone().unwrap_or_default();
        if status.phase.is_none() && !warned_unclaimed && started.elapsed() >= unclaimed_after {
            warned_unclaimed = true;
            match preflight::check(client, namespace, cluster).await {
                Rollout::Off(why) => {
                    eprintln!(
                        "error: the controller has not taken operation {namespace}/{op_name} up after {}s: {why}.\n\
                         The operation stays pending and starts once the controller rolls the cluster out; \
                         run this command again to follow it, or delete it: kubectl -n {namespace} delete \
                         talosoperation {op_name}",
                        unclaimed_after.as_secs()
                    );
                    return Ok(ExitCode::FAILURE);
                }
                // The release lists the cluster and its Secret exists: the controller's pods may
                // still be restarting after the upgrade that turned the rollout on.
                Rollout::On => eprintln!(
                    "warning: the controller has not taken the operation up after {}s, though it is set to roll \
                     out cluster {cluster} and Secret {namespace}/{cluster}-talosconfig exists. Its pods may \
                     still be restarting after an upgrade (kubectl -n {namespace} rollout status \
                     deploy/ichor-controller) or not be ready (their /readyz says why). Still following.",
                    unclaimed_after.as_secs()
                ),
                Rollout::Unknown => eprintln!(
                    "warning: the controller has not taken the operation up after {}s. Is the rollout on (chart \
                     value controller.rollout.clusters={{{cluster}}}) and does Secret {namespace}/{cluster}-talosconfig exist?",
                    unclaimed_after.as_secs()
                ),
            }
        }
        // Nobody took it up in ten times that: the command stops following rather than wait
        // forever (the operation stays and starts whenever a controller takes it up).
        if status.phase.is_none() && started.elapsed() >= unclaimed_after * GIVE_UP_FACTOR {
            eprintln!(
                "error: no controller has taken operation {namespace}/{op_name} up in {}s, so this command \
                 stops following it. It stays pending and starts once a controller rolls out cluster \
                 {cluster} (chart value controller.rollout.clusters, Secret {namespace}/{cluster}-talosconfig, \
                 a ready ichor-controller replica); run this command again to follow it, or delete it: \
                 kubectl -n {namespace} delete talosoperation {op_name}",
                (unclaimed_after * GIVE_UP_FACTOR).as_secs()
            );
            return Ok(ExitCode::FAILURE);
        }
        let total = status.nodes.len();
        for (i, node) in status.nodes.iter().enumerate() {
            let now = (node.state.clone(), node.message.clone());
            if seen.get(&i) != Some(&now) && node.state != NodeState::Pending {
                eprintln!("{}", node_line(i, total, node));
                seen.insert(i, now);
            }
        }
        if status.message != last_message {
            if let Some(m) = &status.message
                && !matches!(
                    status.phase,
                    Some(OperationPhase::Succeeded | OperationPhase::Failed)
                )
            {
                eprintln!("{m}");
            }
            last_message = status.message.clone();
        }
        match status.phase {
            Some(OperationPhase::Succeeded) => {
                println!(
                    "operation {namespace}/{op_name} succeeded: {}",
                    status.message.as_deref().unwrap_or("done")
                );
                return Ok(ExitCode::SUCCESS);
            }
            Some(OperationPhase::Failed) => {
                eprintln!(
                    "operation {namespace}/{op_name} failed: {}",
                    status.message.as_deref().unwrap_or("no reason given")
                );
                return Ok(ExitCode::FAILURE);
            }
            _ => tokio::time::sleep(POLL).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_without_a_namespace_is_in_ichor_system() {
        assert_eq!(split_cluster("prod"), ("ichor-system", "prod"));
        assert_eq!(split_cluster("team/prod"), ("team", "prod"));
    }

    fn operation(
        name: &str,
        cluster: &str,
        kind: OperationKind,
        phase: Option<OperationPhase>,
    ) -> TalosOperation {
        let mut op = TalosOperation::new(
            name,
            TalosOperationSpec {
                cluster: cluster.into(),
                kind,
                action: None,
                machines: Vec::new(),
                paused: false,
            },
        );
        op.status = phase.map(|phase| ichor_renderers::crd::TalosOperationStatus {
            phase: Some(phase),
            ..Default::default()
        });
        op.metadata.labels = Some(BTreeMap::from([(
            MANAGED_BY_LABEL.to_owned(),
            IDENTITY_MANAGER.to_owned(),
        )]));
        op
    }

    #[test]
    fn the_operation_created_is_labelled_as_this_subsystems_with_a_generated_name() {
        let op = identity_operation("ichor-system", "prod");
        assert_eq!(op.metadata.name, None);
        assert_eq!(op.metadata.generate_name.as_deref(), Some("config-prod-"));
        assert_eq!(op.metadata.namespace.as_deref(), Some("ichor-system"));
        assert_eq!(
            op.metadata.labels,
            Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_owned(),
                "ichor-identity".to_owned()
            )]))
        );
        assert!(is_identity_operation(op.metadata.labels.as_ref()));
        assert_eq!(op.spec.kind, OperationKind::Config);
        assert_eq!(op.spec.cluster, "prod");
    }

    #[test]
    fn a_rollout_of_ichor_core_is_never_followed() {
        let mut core = operation(
            "a-core",
            "prod",
            OperationKind::Config,
            Some(OperationPhase::Running),
        );
        core.metadata.labels = None;
        let mut other_manager = core.clone();
        other_manager.metadata.name = Some("b-core".into());
        other_manager.metadata.labels = Some(BTreeMap::from([(
            MANAGED_BY_LABEL.to_owned(),
            "ichor".to_owned(),
        )]));
        assert_eq!(
            running_operation(vec![core.clone(), other_manager.clone()], "prod"),
            None
        );
        let ours = operation("z-ours", "prod", OperationKind::Config, None);
        assert_eq!(
            running_operation(vec![core, other_manager, ours], "prod")
                .and_then(|o| o.metadata.name)
                .as_deref(),
            Some("z-ours")
        );
    }

    #[test]
    fn the_operation_followed_is_the_started_one_of_the_cluster_else_a_pending_one() {
        let name = |op: Option<TalosOperation>| op.and_then(|o| o.metadata.name);
        let ended = operation(
            "a-done",
            "prod",
            OperationKind::Config,
            Some(OperationPhase::Succeeded),
        );
        let failed = operation(
            "b-failed",
            "prod",
            OperationKind::Config,
            Some(OperationPhase::Failed),
        );
        let waiting = operation(
            "c-waiting",
            "prod",
            OperationKind::Config,
            Some(OperationPhase::Pending),
        );
        let fresh = operation("d-fresh", "prod", OperationKind::Config, None);
        let running = operation(
            "e-running",
            "prod",
            OperationKind::Config,
            Some(OperationPhase::Running),
        );
        let other_cluster = operation("a-other", "staging", OperationKind::Config, None);
        let other_kind = operation("a-upgrade", "prod", OperationKind::Other("upgrade".into()), None);
        let all = vec![
            other_cluster.clone(),
            other_kind.clone(),
            ended.clone(),
            failed.clone(),
            waiting.clone(),
            fresh.clone(),
            running,
        ];
        assert_eq!(name(running_operation(all, "prod")).as_deref(), Some("e-running"));
        let pending = vec![other_kind.clone(), ended.clone(), waiting, fresh];
        assert_eq!(
            name(running_operation(pending, "prod")).as_deref(),
            Some("c-waiting")
        );
        assert_eq!(
            running_operation(vec![ended, failed, other_cluster, other_kind], "prod"),
            None
        );
    }

    #[test]
    fn a_node_line_counts_from_one_and_carries_the_message() {
        let node = OperationNodeResult {
            machine: "cp-2".into(),
            state: NodeState::WaitingReady.into(),
            message: Some("applied; waiting for /readyz".into()),
            ..OperationNodeResult::default()
        };
        assert_eq!(
            node_line(1, 3, &node),
            "[2/3] cp-2: WaitingReady: applied; waiting for /readyz"
        );
    }
}
