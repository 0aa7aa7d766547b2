//! The README walkthrough (`helm/ichor/README.md`: Install, Turning users on), in order, on a
//! real node, each step using what the one before left, as a newcomer runs it:
//!
//! 1. the Ichor core kinds, a TalosCluster whose endpoint is the node's apiserver and its one
//!    control plane (what a site has before identity); then `helm install` of the chart with the
//!    images built here, two controller replicas: the pods become Ready under the chart's own
//!    security context and the controller issues keys, CA, leaf and the trust ConfigMap;
//! 2. `ichor init --ui-url … --cluster …` with the admin's kubeconfig: users on, the issuer's two
//!    pods Ready, the first admin's password printed once, and the next command printed;
//! 3. that command, `ichor config apply --cluster …`: the controller rolls the cluster's
//!    kube-apiserver through the test kit's Talos apid — here the very apiserver the node and the
//!    controller depend on (one control plane, self-hosted);
//! 4. the apiserver now reaches the issuer's internal listener through the Service's ClusterIP,
//!    via kube-proxy, as the rendered `discoveryURL` says: a token the issuer signs
//!    authenticates;
//! 5. the first admin signs in with headless Chromium through the issuer Service (must change,
//!    new password) and downloads the kubeconfig; kubectl with it — its exec plugin `ichor auth
//!    token` after `ichor auth login` — is `ichor:admin`;
//! 6. the admin creates an operator, whose kubectl can do what `ichor-operator` allows and is
//!    refused the rest; disabled, the operator loses kubectl within the token lifetime;
//! 7. faults an operator meets ([`super::faults`]): the controller leader's pod deleted (the
//!    other replica leads), an issuer pod deleted while a client refreshes (no refresh fails),
//!    and the issuer Service recreated with a new ClusterIP (new leaf, new discoveryURL, the
//!    rollout run again, kubectl works again), and a signing-key rotation on a shortened
//!    timeline (the key's 30 days moved back, a 1-minute publish lead): the new key reaches each
//!    issuer pod through the kubelet's Secret-volume sync, and no ID token fails across the switch.
//!
//! The site's public name for the issuer resolves to the issuer Service's ClusterIP for the
//! test's own clients (the site's DNS; nothing leaves the node's namespace), and the public
//! listener serves a certificate the site issued (`ichorUI.tls.secretName`).

use std::net::{IpAddr, SocketAddr};
use std::process::Command;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use base64::Engine as _;
use ichor_issuer::api::proto::{
    ChangeOwnPasswordRequest, CreateUserRequest, UpdateUserRequest, create_user_request,
    user_service_client::UserServiceClient,
};
use ichor_testkit::control_plane::EMPTY_AUTHENTICATION_CONFIG;
use ichor_testkit::helm::Helm;
use ichor_testkit::node::{Node, NodeOptions};
use ichor_testkit::pki::TestCa;
use ichor_testkit::talos::{
    FakeTalos, NodeOptions as TalosNode, Options as TalosOptions, authentication_config_file,
};
use ichor_testkit::wait;

use super::clients::{authed, cli_refresh_token, printed_password, run_printed, sign_in_as};
use super::cluster::{
    Admin, NAMESPACE, Record, channel, chart, core_objects, http_client, image, talos_objects, write,
};
use super::faults;
use super::site::{Site, browser_sign_in};
use crate::support::ichor_command;

const CLUSTER: &str = "prod";
const RELEASE: &str = "ichor";
/// The site's public name of the issuer, and its URL (the Service's public port).
const UI_HOST: &str = "ichor.walkthrough.test";
const UI_PORT: u16 = 8443;
/// The certificate the site issued for [`UI_HOST`] (cert-manager's, in a real site).
const UI_TLS_SECRET: &str = "ichor-walkthrough-tls";
/// The ID token lifetime of the install (the chart's shortest), so a disabled user's kubectl
/// ends within a minute.
const TOKEN_TTL: &str = "1m";
/// How long a new signing key is published before it signs (the chart's shortest), so the
/// rotation of step 7 ends within minutes.
const PUBLISH_LEAD: &str = "1m";
/// A pod start, an image import or a rollout step on two cores.
const POD_TIMEOUT: Duration = Duration::from_secs(240);
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(300);
/// How long Talos gives the apiserver to come back after an apply.
const RESTART_TIMEOUT: Duration = Duration::from_secs(90);
/// The machine configuration of the control plane as Talos generated it (v1.14 contract: the
/// default `KubeAuthenticationConfig`, no `jwt`).
const INITIAL_CONFIG: &str = "version: v1alpha1\nmachine:\n  type: controlplane\ncluster:\n  clusterName: prod\n---\n\
apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfiguration:\n  apiVersion: apiserver.config.k8s.io/v1beta1\n  \
kind: AuthenticationConfiguration\n  jwt: []\n";

fn ui_url() -> String {
    format!("https://{UI_HOST}:{UI_PORT}")
}

#[test]
#[ignore = "needs the node and the Ichor images: hack/install-test-deps.sh, hack/kube/build.sh, hack/node/build.sh, hack/images/build.sh"]
fn the_readme_walkthrough_runs_in_order_on_a_real_node() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (Some(controller_image), Some(issuer_image)) = (image("ichor-controller"), image("ichor-issuer"))
    else {
        return Ok(());
    };
    let mut record = Record::default();
    record.step("0. node start");
    let Some(node) = Node::start(NodeOptions {
        images: vec![controller_image, issuer_image],
        ..NodeOptions::default()
    })?
    else {
        return Ok(());
    };
    record.figure(
        "node started in",
        format!("{:.1} s", node.started_in().as_secs_f64()),
    );
    let admin = Admin {
        kubectl: node.control_plane().kubectl_bin().to_owned(),
        kubeconfig: node.admin_kubeconfig().to_owned(),
    };
    let node = Arc::new(Mutex::new(node));
    let result = walk(&node, &admin, &mut record);
    record.end_step();
    for (component, kib) in lock(&node).rss_kib() {
        record.figure(&format!("RSS {component}"), format!("{} MiB", kib / 1024));
    }
    record.print();
    if let Err(e) = result {
        let kept = lock(&node).keep();
        return Err(e.context(format!(
            "the walkthrough failed (the node's directory is kept in {}); the pods:\n{}",
            kept.display(),
            admin.describe_pods()
        )));
    }
    Ok(())
}

fn lock(node: &Mutex<Node>) -> std::sync::MutexGuard<'_, Node> {
    node.lock().unwrap_or_else(PoisonError::into_inner)
}

fn walk(node: &Arc<Mutex<Node>>, admin: &Admin, record: &mut Record) -> anyhow::Result<()> {
    let work = tempfile::tempdir()?;
    let home = work.path().join("home");
    std::fs::create_dir_all(&home)?;
    let (helm, address, apiserver, auth_file) = {
        let n = lock(node);
        (
            Helm::new(n.control_plane(), &home).context("the helm binary")?,
            IpAddr::from(n.address()),
            n.control_plane().socket_addr(0),
            n.control_plane().authentication_config_file(0).to_path_buf(),
        )
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;

    // The site before identity: Ichor core's kinds, the cluster, its control plane.
    record.step("1a. Ichor core kinds, TalosCluster and its control plane");
    admin.apply(&core_objects()?)?;
    admin.run(&ichor_testkit::install::WAIT_CRDS_ESTABLISHED, None)?;
    admin.apply(&talos_objects(CLUSTER, apiserver))?;

    // Talos: the control plane's apid, on the node's address (the controller's pods reach it
    // there); an apply restarts the node's own kube-apiserver with the new authentication file,
    // as Talos re-renders the static pod.
    let talos = FakeTalos::start(TalosOptions {
        nodes: vec![TalosNode::new(&address.to_string()).with_config(INITIAL_CONFIG)],
        listen: address,
        ..TalosOptions::default()
    })?;
    let restarts = Arc::new(Mutex::new(Vec::<Duration>::new()));
    {
        let node = Arc::clone(node);
        let restarts = Arc::clone(&restarts);
        talos.on_apply_blocking(&address.to_string(), move |applied| {
            let file = authentication_config_file(&applied.config)
                .map_err(|e| format!("{e:#}"))?
                .unwrap_or_else(|| EMPTY_AUTHENTICATION_CONFIG.to_owned());
            let took = lock(&node)
                .control_plane_mut()
                .restart_apiserver(0, Some(&file), RESTART_TIMEOUT)
                .map_err(|e| format!("restarting the node's kube-apiserver: {e:#}"))?;
            restarts.lock().unwrap_or_else(PoisonError::into_inner).push(took);
            Ok(())
        });
    }

    record.step("1b. helm install (2 controller replicas)");
    let site_ca = TestCa::new("walkthrough site CA")?;
    let ui_pair = site_ca.serving_for_name(UI_HOST, UI_HOST)?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    admin.apply(&serde_json::to_string(&serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": UI_TLS_SECRET, "namespace": NAMESPACE},
        "data": {"tls.crt": b64(&ui_pair.cert_pem), "tls.key": b64(&ui_pair.key_pem)}}))?)?;
    let port = apiserver.port().to_string();
    let out = Command::new(helm.bin())
        .envs(helm.env())
        .args(["install", RELEASE])
        .arg(chart())
        .args(["-n", NAMESPACE, "--wait=false"])
        .args(["--set", "controller.replicas=2", "--set", "issuer.replicas=2"])
        .args(["--set", &format!("controller.rollout.apiserverPort={port}")])
        .args(["--set-string", &format!("ichorUI.tls.secretName={UI_TLS_SECRET}")])
        .args(["--set-string", &format!("ichorUI.users.tokenTTL={TOKEN_TTL}")])
        .args([
            "--set-string",
            &format!("controller.keys.publishLead={PUBLISH_LEAD}"),
        ])
        .output()?;
    ensure!(
        out.status.success(),
        "helm install: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ready = admin.wait_ready("ichor-controller", POD_TIMEOUT)?;
    record.figure(
        "controller pods ready after helm install",
        format!("{:.1} s", ready.as_secs_f64()),
    );
    // Users are off: the signing keys and the webhooks' certificate.
    for name in ["ichor-oidc-signing", "ichor-webhook-tls"] {
        wait::until(&format!("secret {name}"), POD_TIMEOUT, || {
            admin.get("secret", name)
        })?;
    }

    // 2. ichor init, as the README says, with the admin's kubeconfig and helm on PATH.
    record.step("2. ichor init");
    // The rollout's Talos credentials: an os:admin talosconfig and the Kubernetes CA, as files.
    // Its context is named after the cluster, as `talosctl gen config <cluster>` names it.
    let test_context = "context: test\ncontexts:\n  test:";
    ensure!(
        talos.talosconfig().contains(test_context),
        "the test kit's talosconfig has its context `test`"
    );
    let own = talos.talosconfig().replacen(
        test_context,
        &format!("context: {CLUSTER}\ncontexts:\n  {CLUSTER}:"),
        1,
    );
    let talosconfig = write(work.path(), "talosconfig", &own)?;
    let kube_ca = write(work.path(), "kube-ca.crt", lock(node).control_plane().ca_pem())?;
    let (talosconfig, kube_ca) = (talosconfig.display().to_string(), kube_ca.display().to_string());
    let mut init = ichor_command(
        &home,
        &[
            "init",
            "--ui-url",
            &ui_url(),
            "--cluster",
            CLUSTER,
            "--talosconfig",
            &talosconfig,
            "--kube-ca",
            &kube_ca,
        ],
    );
    init.envs(helm.env()).env("TMPDIR", work.path());
    let inherited = std::env::var_os("PATH").unwrap_or_default();
    let path = std::iter::once(helm.bin_dir().to_path_buf()).chain(std::env::split_paths(&inherited));
    init.env("PATH", std::env::join_paths(path)?);
    let out = init.output()?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    ensure!(out.status.success(), "ichor init failed: {stderr}");
    let first_password = printed_password(&stderr)?;
    let next = String::from_utf8_lossy(&out.stdout).into_owned();
    ensure!(
        admin.get("secret", &format!("{CLUSTER}-talosconfig"))?.is_some(),
        "init created the cluster's Talos credentials"
    );
    let ready = admin.wait_ready("ichor-issuer", POD_TIMEOUT)?;
    record.figure(
        "issuer pods ready after init",
        format!("{:.1} s", ready.as_secs_f64()),
    );
    // init's upgrade also changed the controller's rollout settings: its pods are replaced.
    let ready = admin.wait_ready("ichor-controller", POD_TIMEOUT)?;
    record.figure(
        "controller pods replaced after init",
        format!("{:.1} s", ready.as_secs_f64()),
    );

    // 3. The command init printed: the rollout of the node's own apiserver.
    record.step("3. ichor config apply (the node's own apiserver rolled)");
    let apply_line = next
        .lines()
        .rev()
        .find(|l| l.starts_with("ichor config apply"))
        .with_context(|| format!("init printed no `ichor config apply` line: {next:?}"))?;
    // Without a terminal to confirm on, as the command says: review the plan, then `--yes`.
    let plan = run_printed(&home, admin, &format!("{apply_line} --dry-run"), ROLLOUT_TIMEOUT)?;
    ensure!(
        plan.contains(&format!("{CLUSTER}-cp-1")),
        "the plan names the control plane: {plan}"
    );
    run_printed(&home, admin, &format!("{apply_line} --yes"), ROLLOUT_TIMEOUT)?;
    let restarted = restarts.lock().unwrap_or_else(PoisonError::into_inner).clone();
    ensure!(
        restarted.len() == 1,
        "one restart of the node's apiserver: {restarted:?}"
    );
    record.figure(
        "apiserver restart (stop, new file, ready)",
        format!("{:.1} s", restarted[0].as_secs_f64()),
    );

    // 4. The apiserver trusts the issuer through the Service's ClusterIP (discoveryURL).
    record.step("4. discoveryURL through the ClusterIP");
    let issuer_ip = admin.cluster_ip("ichor-issuer")?;
    let file = std::fs::read_to_string(&auth_file)?;
    ensure!(
        file.contains(&ui_url()),
        "the apiserver's authentication file names the issuer URL: {file}"
    );
    ensure!(
        file.contains(&format!("https://{issuer_ip}:8444")),
        "the discoveryURL is the issuer Service's ClusterIP ({issuer_ip}): {file}"
    );
    let public = SocketAddr::new(issuer_ip, UI_PORT);
    let http = http_client(&site_ca.pem, UI_HOST, public)?;

    // 5. The first admin signs in with Chromium through the issuer Service (must change, a new
    // password) and downloads the kubeconfig; kubectl with it, through its exec plugin, is
    // ichor:admin.
    record.step("5. the first admin in Chromium, then kubectl with the downloaded kubeconfig");
    let admin_password = "the walkthrough admin's own password";
    let site_ca_file = write(work.path(), "site-ca.crt", &site_ca.pem)?;
    let downloaded = work.path().join("admin-kubeconfig.yaml");
    let steps = browser_sign_in(
        &ui_url(),
        issuer_ip,
        &site_ca_file,
        "admin",
        &first_password,
        admin_password,
        &downloaded,
    )?;
    record.figure("Chromium steps (ms)", steps);
    let kubeconfig = std::fs::read_to_string(&downloaded)?;
    ensure!(
        kubeconfig.contains(&format!("server: https://{apiserver}")) && kubeconfig.contains(&ui_url()),
        "the downloaded kubeconfig names the cluster's endpoint and the issuer: {kubeconfig}"
    );
    let site = Site::new(work.path(), UI_HOST, &ui_url(), issuer_ip, &site_ca_file, &home)?;
    runtime.block_on(site.login(&http, "admin", admin_password))?;
    let whoami = wait::until(
        "kubectl auth whoami with the downloaded kubeconfig",
        Duration::from_secs(60),
        || {
            let out = site.kubectl(&admin.kubectl, &downloaded, &["auth", "whoami", "-o", "json"])?;
            Ok(Some(serde_json::from_str::<serde_json::Value>(&out)?))
        },
    )?;
    let info = &whoami["status"]["userInfo"];
    ensure!(info["username"] == "ichor:admin", "kubectl auth whoami: {whoami}");
    ensure!(
        info["groups"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g == "ichor:admin")),
        "{whoami}"
    );
    // The issuer's shared password-check threads run at nice 10 under the chart's restricted
    // security context (seccomp RuntimeDefault, no capabilities): no pod said it could not.
    for pod in admin.pods("issuer")? {
        let log = admin.run(&["logs", "-n", NAMESPACE, &pod], None)?;
        ensure!(
            !log.contains("could not lower the priority"),
            "{pod} could not nice its password checks:\n{log}"
        );
    }
    let admin_ui = runtime.block_on(sign_in_as(
        &http,
        &ui_url(),
        "ichor-ui",
        None,
        "admin",
        admin_password,
    ))?;

    // 6. An operator: allowed what ichor-operator allows, refused the rest, and disabled.
    record.step("6. an operator, its rights, and disabled");
    let operator_password = "the operator's own password, changed";
    let operator_kube = runtime.block_on(async {
        let mut api = UserServiceClient::new(channel(&site_ca.pem, UI_HOST, public).await?);
        let first = "the operator's first password";
        api.create_user(authed(
            CreateUserRequest {
                name: "ops".into(),
                roles: vec!["operator".into()],
                initial_password: Some(create_user_request::InitialPassword::Password(first.into())),
                ..Default::default()
            },
            &admin_ui,
        ))
        .await
        .context("CreateUser ops")?;
        let ui = sign_in_as(&http, &ui_url(), "ichor-ui", None, "ops", first).await?;
        api.change_own_password(authed(
            ChangeOwnPasswordRequest {
                old_password: first.into(),
                new_password: operator_password.into(),
                code: String::new(),
            },
            &ui,
        ))
        .await
        .context("ops: ChangeOwnPassword")?;
        sign_in_as(
            &http,
            &ui_url(),
            "ichor-cli",
            Some("ichor-kube"),
            "ops",
            operator_password,
        )
        .await
    })?;
    let ops = Admin {
        kubectl: admin.kubectl.clone(),
        kubeconfig: write(
            work.path(),
            "ops.kubeconfig",
            &lock(node)
                .control_plane()
                .token_kubeconfig_yaml(0, &operator_kube),
        )?,
    };
    ops.run(&["get", "pods", "-n", NAMESPACE], None)
        .context("the operator lists pods")?;
    ops.run(&["get", "talosclusters", "-n", NAMESPACE], None)
        .context("the operator reads TalosClusters")?;
    let refused = ops
        .run(&["get", "secrets", "-n", NAMESPACE], None)
        .err()
        .context("the operator read Secrets")?;
    ensure!(format!("{refused:#}").contains("Forbidden"), "{refused:#}");
    let refused = ops
        .run(
            &["delete", "pod", "--all", "-n", NAMESPACE, "--dry-run=server"],
            None,
        )
        .err()
        .context("the operator may delete pods")?;
    ensure!(format!("{refused:#}").contains("Forbidden"), "{refused:#}");

    let disabled_at = Instant::now();
    runtime.block_on(async {
        let mut api = UserServiceClient::new(channel(&site_ca.pem, UI_HOST, public).await?);
        api.update_user(authed(
            UpdateUserRequest {
                name: "ops".into(),
                disabled: Some(true),
                ..Default::default()
            },
            &admin_ui,
        ))
        .await
        .context("disabling ops")?;
        anyhow::Ok(())
    })?;
    // Every issuer replica follows the IchorUser: sign-ins stop within seconds.
    wait::until(
        "the disabled operator's sign-ins to be refused",
        Duration::from_secs(30),
        || {
            let attempt = runtime.block_on(sign_in_as(
                &http,
                &ui_url(),
                "ichor-cli",
                Some("ichor-kube"),
                "ops",
                operator_password,
            ));
            Ok(attempt.is_err().then_some(()))
        },
    )?;
    record.figure(
        "disabled operator's sign-ins refused after",
        format!("{:.1} s", disabled_at.elapsed().as_secs_f64()),
    );
    wait::until(
        "the disabled operator's kubectl to be refused",
        Duration::from_secs(60 + 30),
        || match ops.run(&["get", "pods", "-n", NAMESPACE], None) {
            Ok(_) => Ok(None),
            Err(e) if format!("{e:#}").contains("Unauthorized") => Ok(Some(())),
            Err(e) => Err(e),
        },
    )?;
    record.figure(
        "disabled operator's kubectl refused after",
        format!(
            "{:.1} s (token lifetime {TOKEN_TTL})",
            disabled_at.elapsed().as_secs_f64()
        ),
    );

    // 7. Faults an operator will meet.
    record.step("7a. the controller leader's pod deleted");
    faults::leader_pod_deleted(admin, record)?;

    record.step("7b. an issuer pod deleted while a client refreshes");
    let refresh_token = runtime.block_on(cli_refresh_token(&http, &ui_url(), "admin", admin_password))?;
    let ca = site_ca.pem.clone();
    faults::issuer_pod_deleted_mid_refresh(
        admin,
        &runtime,
        move || http_client(&ca, UI_HOST, public),
        &ui_url(),
        refresh_token,
        record,
    )?;

    // The Service recreated: a new ClusterIP, a new leaf and discoveryURL; the operator runs
    // the rollout again (the site's DNS follows the new address), and kubectl works again.
    record.step("7c. the issuer Service recreated with a new ClusterIP, rolled out again");
    let new_ip = faults::issuer_service_recreated(admin, record)?;
    site.resolve_to(new_ip)?;
    let http = http_client(&site_ca.pem, UI_HOST, SocketAddr::new(new_ip, UI_PORT))?;
    let again = Instant::now();
    run_printed(&home, admin, &format!("{apply_line} --yes"), ROLLOUT_TIMEOUT)?;
    let restarted = restarts.lock().unwrap_or_else(PoisonError::into_inner).len();
    // Exactly one more: the apply restarts the apiserver the controller writes the step's status
    // to, and a retry after that lost write must not restart it again.
    ensure!(
        restarted == 2,
        "one more restart of the node's apiserver, no second one: {restarted} in all"
    );
    let file = std::fs::read_to_string(&auth_file)?;
    ensure!(
        file.contains(&format!("https://{new_ip}:8444")),
        "the discoveryURL is the new ClusterIP ({new_ip}): {file}"
    );
    runtime.block_on(site.login(&http, "admin", admin_password))?;
    wait::until(
        "kubectl to work again after the new ClusterIP's rollout",
        Duration::from_secs(180),
        || {
            let out = site.kubectl(&admin.kubectl, &downloaded, &["auth", "whoami", "-o", "json"])?;
            Ok(out.contains("ichor:admin").then_some(()))
        },
    )?;
    record.figure(
        "kubectl works again after the rollout for the new ClusterIP",
        format!("{:.1} s", again.elapsed().as_secs_f64()),
    );

    // A signing-key rotation on a shortened timeline (the key's period run out, the install's
    // 1-minute publish lead): no ID token fails at the apiserver across the switch.
    record.step("7d. a signing-key rotation on a shortened timeline");
    let refresh_token = runtime.block_on(cli_refresh_token(&http, &ui_url(), "admin", admin_password))?;
    let ca = site_ca.pem.clone();
    faults::signing_key_rotation(
        admin,
        &runtime,
        |to| http_client(&ca, UI_HOST, to),
        &ui_url(),
        refresh_token,
        |token| lock(node).control_plane().whoami_with_token(0, token).map(|_| ()),
        record,
    )?;
    Ok(())
}
