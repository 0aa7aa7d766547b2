//! Two `ichor-controller run --leader-elect` replicas on a real control plane under the chart's
//! RBAC: one leader on the Lease, the owned Secrets and the trust ConfigMap created once, the
//! IchorUser status and the credentials garbage collection written, `kill -9` of the leader
//! survived by the standby within the lease's bounds with nothing created twice or lost, the
//! watches resumed across an apiserver restart without missing what changed meanwhile, every
//! webhook rule decided through the real apiserver ([`crate::webhooks`]), and every rule of the
//! chart's controller Roles used, none missing.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use base64::Engine as _;
use ichor_controller::run::leader::LeaseConfig;
use ichor_controller::run::watch::WEBHOOK_TLS_SECRET;
use ichor_controller_core::sim::fixtures::{Auth, cluster, control_plane};
use ichor_renderers::auth::credentials::{CREDENTIALS_SECRET_NAME, CredentialsEntry};
use ichor_renderers::trust::{CA_SECRET, SIGNING_SECRET, TLS_SECRET, TRUST_CONFIGMAP, UI_CA_CONFIGMAP};
use ichor_testkit::control_plane::{ControlPlane, Options};
use ichor_testkit::install::{self, CONTROLLER_SERVICE_ACCOUNT, NAMESPACE, ichor_user};
use ichor_testkit::{rbac, wait};
use serde_json::{Value, json};

use crate::replicas::{Replica, condition, get, lease_holder, merge_patch};

const OWNED_SECRETS: [&str; 4] = [SIGNING_SECRET, CA_SECRET, TLS_SECRET, WEBHOOK_TLS_SECRET];
/// Granted rules only a 409 Conflict makes the controller use: it reads the object again. A real
/// apiserver answers 409 only to a write that loses a race, which a test cannot arrange on
/// demand; the re-reads are tested against the scripted server (`tests/apply.rs`). (`get` on
/// `ichorusers` is not among them: the webhook reads the admin it relies on.)
const CONFLICT_ONLY: [(&str, &str); 4] = [
    (
        "Role ichor-system/ichor-controller rule 0: get secrets [\"ichor-oidc-signing\", \"ichor-oidc-ca\", \"ichor-oidc-tls\", \"ichor-webhook-tls\"]",
        "an effect's Secret write that met a conflict",
    ),
    (
        "ClusterRole ichor-controller rule 2: get validatingwebhookconfigurations [\"ichor-identity\"]",
        "a caBundle patch that met a conflict",
    ),
    (
        "Role ichor-system/ichor-controller rule 1: get secrets [\"ichor-user-credentials\"]",
        "a credentials key removal that met a conflict",
    ),
    (
        "Role ichor-system/ichor-controller rule 6: get talosmachines",
        "a status write that met a conflict",
    ),
];
/// The grants of the rollout (`controller.rollout.clusters: [prod]` in the chart's users-on
/// values), which only a `config` operation uses: `crate::rollout` checks them used.
pub const ROLLOUT_RULES: [(&str, &str); 3] = [
    (
        "Role ichor-system/ichor-controller rule 11: get secrets [\"prod-talosconfig\"]",
        "the Talos credentials of a rollout",
    ),
    (
        "Role ichor-system/ichor-controller rule 12: get talosoperations",
        "a rollout's status write that met a conflict",
    ),
    (
        "Role ichor-system/ichor-controller rule 13: patch talosoperations/status",
        "a rollout's progress",
    ),
];
/// Rules the move to one Secret per user uses, measured by `credentials_migration` (this test
/// starts from no IchorInstallation and a legacy Secret whose issuers never switch).
/// (`create` in the credentials namespace is not exempt: [`credentials_creates_held_by_policy`]
/// makes one the policies admit, as a server dry run, beside the ones they refuse.)
pub const MIGRATION_RULES: [(&str, &str); 3] = [
    (
        "Role ichor-system/ichor-controller rule 1: delete secrets [\"ichor-user-credentials\"]",
        "the deletion of the emptied legacy Secret",
    ),
    (
        "ClusterRole ichor-controller rule 3: patch ichorinstallations/status",
        "status.credentials and CredentialsNamespaceDedicated of an IchorInstallation",
    ),
    (
        "ClusterRole ichor-controller rule 4: get ichorinstallations",
        "an installation's status write that met a conflict",
    ),
];
const SETTLE: Duration = Duration::from_secs(60);
const HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$aWNob3ItY2x1c3Rlci10ZXN0$c29tZSBvdXRwdXQgYnl0ZXMgaGVyZSEhISEhISE";

fn entry(name: &str) -> String {
    let now = jiff::Timestamp::now();
    let json = CredentialsEntry::new(HASH.to_owned(), now, false)
        .to_json(name)
        .unwrap();
    base64::engine::general_purpose::STANDARD.encode(json)
}

/// `create` of Secrets in the credentials namespace is granted without names (RBAC cannot name
/// the object of a POST); the policies `ichor-controller-secrets` and `ichor-credentials` hold it
/// to users' credentials Secrets. As the controller's own ServiceAccount (a TokenRequest token,
/// so the apiserver decides with the chart's RBAC and then the policies): a Secret of another
/// type, of another name pattern, labelled with another user, or with another key is refused by
/// a ValidatingAdmissionPolicy; a conforming one is admitted (a server dry run: nothing stored).
fn credentials_creates_held_by_policy(plane: &ControlPlane) -> anyhow::Result<()> {
    use ichor_renderers::contract::{
        CREDENTIALS_NAMESPACE, USER_CREDENTIALS_KEY, USER_CREDENTIALS_TYPE, USER_LABEL,
    };
    let kubeconfig = install::component_kubeconfig(plane, 0, CONTROLLER_SERVICE_ACCOUNT)?;
    let kubectl = |args: &[&str], body: &Value| {
        ichor_testkit::control_plane::Kubectl::new(plane.kubectl_bin(), &kubeconfig)
            .with_cache_dir(plane.dir().join("kube-cache-controller-creates"))
            .output(args, Some(&body.to_string()))
    };
    let secret = |name: &str, type_: &str, user: &str, key: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "type": type_,
            "metadata": {"name": name, "namespace": CREDENTIALS_NAMESPACE, "labels": {USER_LABEL: user}},
            "data": {key: entry(user)}})
    };
    let dry = ["create", "--dry-run=server", "-o", "name", "-f", "-"];
    // Admitted: the one kind of Secret the sweep creates there.
    let conforming = secret(
        "ichor-user-dora",
        USER_CREDENTIALS_TYPE,
        "dora",
        USER_CREDENTIALS_KEY,
    );
    if let Err(e) = kubectl(&dry, &conforming)? {
        anyhow::bail!("the controller may no longer create a user's credentials Secret: {e}");
    }
    let refused = [
        (
            "an Opaque Secret named as a user's",
            secret("ichor-user-dora", "Opaque", "dora", USER_CREDENTIALS_KEY),
        ),
        (
            "a ServiceAccount-token Secret",
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                "metadata": {"name": "ichor-user-dora", "namespace": CREDENTIALS_NAMESPACE,
                    "labels": {USER_LABEL: "dora"},
                    "annotations": {"kubernetes.io/service-account.name": "ichor-issuer"}}}),
        ),
        (
            "a credentials Secret of another name pattern",
            secret("dora", USER_CREDENTIALS_TYPE, "dora", USER_CREDENTIALS_KEY),
        ),
        (
            "a credentials Secret labelled with another user",
            secret(
                "ichor-user-dora",
                USER_CREDENTIALS_TYPE,
                "alice",
                USER_CREDENTIALS_KEY,
            ),
        ),
        (
            "a credentials Secret with another key",
            secret("ichor-user-dora", USER_CREDENTIALS_TYPE, "dora", "token"),
        ),
    ];
    for (what, body) in &refused {
        match kubectl(&["create", "-o", "name", "-f", "-"], body)? {
            Ok(out) => anyhow::bail!("the controller created {what}: {out}"),
            Err(e) => assert!(
                e.contains("ValidatingAdmissionPolicy") && e.contains("denied"),
                "{what}: refused, but not by an admission policy: {e}"
            ),
        }
    }
    for name in ["ichor-user-dora", "dora"] {
        assert!(
            plane
                .get_json(0, "secret", CREDENTIALS_NAMESPACE, name)?
                .is_none(),
            "Secret {CREDENTIALS_NAMESPACE}/{name} exists"
        );
    }
    Ok(())
}

/// Adds an entry for `name` to the credentials Secret through apiserver `on`, as the issuer
/// does when a password is set.
fn add_credentials_key(plane: &ControlPlane, on: usize, name: &str) -> anyhow::Result<()> {
    let mut args = vec![format!("--server={}", plane.url(on))];
    args.extend(merge_patch(
        "secret",
        CREDENTIALS_SECRET_NAME,
        &json!({"data": {name: entry(name)}}),
        false,
    ));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    plane.kubectl_run(&args, None)?;
    Ok(())
}

/// The credentials Secret as the issuer keeps it, with an entry per name.
fn credentials(names: &[&str]) -> String {
    let data: serde_json::Map<String, Value> =
        names.iter().map(|n| ((*n).to_owned(), json!(entry(n)))).collect();
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": CREDENTIALS_SECRET_NAME, "namespace": NAMESPACE},
        "data": data})
    .to_string()
}

/// A fixture object as kubectl applies it (no server-set metadata).
fn manifest(mut value: Value) -> String {
    if let Some(meta) = value["metadata"].as_object_mut() {
        meta.remove("generation");
    }
    if let Some(map) = value.as_object_mut() {
        map.remove("status");
    }
    value.to_string()
}

fn credential_keys(plane: &ControlPlane, on: usize) -> anyhow::Result<Vec<String>> {
    Ok(get(plane, on, "secret", CREDENTIALS_SECRET_NAME)?
        .and_then(|s| s["data"].as_object().map(|d| d.keys().cloned().collect()))
        .unwrap_or_default())
}

/// Each owned Secret's uid and data: what must survive a failover unchanged.
fn owned(plane: &ControlPlane) -> anyhow::Result<BTreeMap<&'static str, (Value, Value)>> {
    let mut out = BTreeMap::new();
    for name in OWNED_SECRETS {
        let s = get(plane, 0, "secret", name)?.ok_or_else(|| anyhow::anyhow!("Secret {name} is gone"))?;
        out.insert(name, (s["metadata"]["uid"].clone(), s["data"].clone()));
    }
    Ok(out)
}

fn wait_status(plane: &ControlPlane, name: &str, kind: &str, want: &str) -> anyhow::Result<()> {
    wait::until(&format!("IchorUser {name} {kind}={want}"), SETTLE, || {
        Ok(get(plane, 0, "ichoruser", name)?.filter(|u| condition(u, kind).as_deref() == Some(want)))
    })
    .map(|_| ())
}

fn wait_keys(plane: &ControlPlane, want: &[&str]) -> anyhow::Result<()> {
    wait::until(&format!("credentials keys {want:?}"), SETTLE, || {
        let mut keys = credential_keys(plane, 0)?;
        keys.sort();
        Ok((keys == want).then_some(()))
    })
}

/// The field managers of one object, `manager operation subresource → fields`.
fn managers(plane: &ControlPlane, kind: &str, name: &str) -> anyhow::Result<Vec<(String, Value)>> {
    let out = plane.kubectl_run(
        &[
            "get",
            kind,
            name,
            "-n",
            NAMESPACE,
            "-o",
            "json",
            "--show-managed-fields",
        ],
        None,
    )?;
    let object: Value = serde_json::from_str(&out)?;
    Ok(object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let key = format!(
                "{} {} {}",
                m["manager"].as_str().unwrap_or_default(),
                m["operation"].as_str().unwrap_or_default(),
                m["subresource"].as_str().unwrap_or("-")
            );
            (key, m["fieldsV1"].clone())
        })
        .collect())
}

/// Server-side apply as the apiserver recorded it: the trust ConfigMap applied by the
/// controller's field manager, and of an IchorUser the controller owns `status` only, through
/// the status subresource (the spec stays the person's).
fn field_ownership(plane: &ControlPlane) -> anyhow::Result<()> {
    let cm = managers(plane, "configmap", TRUST_CONFIGMAP)?;
    let applied = cm.iter().find(|(k, _)| k == "ichor-controller Apply -");
    let fields = applied
        .map(|(_, f)| f)
        .ok_or_else(|| anyhow::anyhow!("no Apply of ichor-controller: {cm:?}"))?;
    assert!(
        fields["f:data"].is_object(),
        "the controller owns the data: {fields}"
    );
    let alice = managers(plane, "ichoruser", "alice")?;
    let ours: Vec<&(String, Value)> = alice
        .iter()
        .filter(|(k, _)| k.starts_with("ichor-controller "))
        .collect();
    assert_eq!(ours.len(), 1, "{alice:?}");
    assert_eq!(ours[0].0, "ichor-controller Apply status", "{alice:?}");
    let owned: Vec<&String> = ours[0]
        .1
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    assert_eq!(
        owned,
        ["f:status"],
        "the controller owns nothing of alice but her status"
    );
    Ok(())
}

/// The issuer Service deleted, and the trust ConfigMap made unreadable meanwhile: the controller
/// deletes it as an orphan. The Service created again at another ClusterIP: the Ichor leaf is
/// issued again for the new address and the ConfigMap comes back.
fn issuer_service_recreated(plane: &ControlPlane) -> anyhow::Result<()> {
    let old_ip = get(plane, 0, "service", "ichor-issuer")?
        .and_then(|s| s["spec"]["clusterIP"].as_str().map(str::to_owned))
        .ok_or_else(|| anyhow::anyhow!("the issuer Service has no ClusterIP"))?;
    let tls_before = get(plane, 0, "secret", TLS_SECRET)?.map(|s| s["data"].clone());
    plane.kubectl_run(&["delete", "service", "ichor-issuer", "-n", NAMESPACE], None)?;
    let unreadable = r#"[{"op": "remove", "path": "/data"}]"#;
    plane.kubectl_run(
        &[
            "patch",
            "configmap",
            TRUST_CONFIGMAP,
            "-n",
            NAMESPACE,
            "--type=json",
            "-p",
            unreadable,
        ],
        None,
    )?;
    wait::until(
        "the unreadable trust ConfigMap deleted as an orphan",
        SETTLE,
        || {
            Ok(get(plane, 0, "configmap", TRUST_CONFIGMAP)?
                .is_none()
                .then_some(()))
        },
    )?;
    let mut service = install::chart_object("Service", "ichor-issuer")?;
    // A ClusterIP no Service holds (the chart's other Services took theirs at random).
    let taken = plane.kubectl_run(
        &[
            "get",
            "services",
            "-A",
            "-o",
            "jsonpath={.items[*].spec.clusterIP}",
        ],
        None,
    )?;
    let taken: Vec<&str> = taken.split_whitespace().collect();
    let new_ip = (200..=250)
        .map(|last| format!("10.0.0.{last}"))
        .find(|ip| *ip != old_ip && !taken.contains(&ip.as_str()))
        .expect("a free ClusterIP in 10.0.0.200-250");
    service["spec"]["clusterIP"] = json!(new_ip);
    plane.apply(&service.to_string())?;
    wait::until("the trust ConfigMap back", SETTLE, || {
        get(plane, 0, "configmap", TRUST_CONFIGMAP)
    })?;
    wait::until(
        "the Ichor leaf issued again for the new ClusterIP",
        SETTLE,
        || {
            Ok(get(plane, 0, "secret", TLS_SECRET)?
                .filter(|s| Some(&s["data"]) != tls_before.as_ref())
                .map(|_| ()))
        },
    )?;
    Ok(())
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn two_replicas_elect_one_leader_fail_over_after_kill_9_and_resume_their_watches() -> anyhow::Result<()> {
    let options = Options {
        apiservers: 2,
        audit: true,
        // Webhook Services resolved through their endpoints (crate::webhooks).
        extra_args: vec!["--enable-aggregator-routing=true".to_owned()],
        ..Options::default()
    };
    let Some(mut plane) = ControlPlane::start(options)? else {
        return Ok(());
    };
    // The clusters exist before the chart's webhooks do (`legacy` with Cilium values that its
    // check would refuse today: the webhook ratchets them).
    install::install_crds(&plane)?;
    plane.apply(&manifest(cluster("prod", 1, Auth::Ichor).value))?;
    plane.apply(&manifest(
        control_plane("prod-cp-1", "prod", "10.0.1.5", &[]).value,
    ))?;
    let mut legacy = cluster("legacy", 2, Auth::Ichor).value;
    legacy["spec"]["cni"] = json!({"preset": "cilium", "cilium": {"values": {"totallyUnknownKey": 1}}});
    plane.apply(&manifest(legacy))?;
    install::install_chart(&plane)?;
    plane.apply(&ichor_user("alice", &["admin"]))?;
    // The issuer keeps this Secret; `ghost` has no IchorUser (its key is garbage).
    plane.apply(&credentials(&["alice", "ghost"]))?;

    let dir = tempfile::tempdir()?;
    let kubeconfig = install::component_kubeconfig(&plane, 0, CONTROLLER_SERVICE_ACCOUNT)?;
    let mut replicas = [
        Replica::start(dir.path(), "ichor-controller-a", &kubeconfig)?,
        Replica::start(dir.path(), "ichor-controller-b", &kubeconfig)?,
    ];
    let logs = |replicas: &[Replica]| {
        replicas
            .iter()
            .map(|r| format!("--- {} ---\n{}", r.pod, r.log_tail()))
            .collect::<Vec<_>>()
            .join("\n")
    };

    // One leader; the owned objects, the status and the garbage collection.
    let holder = wait::until("a Lease holder", SETTLE, || lease_holder(&plane))
        .map_err(|e| e.context(logs(&replicas)))?;
    let settled = (|| -> anyhow::Result<()> {
        for name in OWNED_SECRETS {
            wait::until(&format!("Secret {name} with data"), SETTLE, || {
                Ok(get(&plane, 0, "secret", name)?
                    .filter(|s| s["data"].as_object().is_some_and(|d| !d.is_empty())))
            })?;
        }
        let trust = wait::until("the trust ConfigMap", SETTLE, || {
            get(&plane, 0, "configmap", TRUST_CONFIGMAP)
        })?;
        let ui_ca = wait::until("the ichor-ui-ca ConfigMap", SETTLE, || {
            get(&plane, 0, "configmap", UI_CA_CONFIGMAP)
        })?;
        assert_eq!(
            ui_ca["data"],
            json!({"ca.crt": trust["data"]["ca.crt"]}),
            "ichor-ui-ca publishes the trust CA alone"
        );
        install::wait_webhook_ca_bundles(&plane, "ichor-identity", SETTLE)?;
        wait_status(&plane, "alice", "PasswordSet", "True")?;
        wait_status(&plane, "alice", "Ready", "True")?;
        wait_keys(&plane, &["alice"])?;
        for replica in &replicas {
            crate::webhooks::mount_certificate(&plane, replica)?;
        }
        wait::until("both replicas ready", SETTLE, || {
            Ok(replicas.iter().all(|r| r.readyz() == Some(200)).then_some(()))
        })
    })();
    settled.map_err(|e| e.context(logs(&replicas)))?;
    field_ownership(&plane)?;
    let before = owned(&plane)?;

    // kill -9 of the leader: the standby takes the Lease once its record stood still.
    let lease = LeaseConfig::new(NAMESPACE, "ichor-controller", "");
    let transitions = |plane: &ControlPlane| -> anyhow::Result<i64> {
        Ok(get(plane, 0, "lease", "ichor-controller")?
            .and_then(|l| l["spec"]["leaseTransitions"].as_i64())
            .unwrap_or(0))
    };
    let transitions_before = transitions(&plane)?;
    let (leader, standby) = if replicas[0].pod == holder { (0, 1) } else { (1, 0) };
    let lease_time = |plane: &ControlPlane, field: &str| -> anyhow::Result<jiff::Timestamp> {
        let l = get(plane, 0, "lease", "ichor-controller")?.ok_or_else(|| anyhow::anyhow!("no Lease"))?;
        let t = l["spec"][field]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("the Lease has no {field}: {l}"))?;
        Ok(t.parse()?)
    };
    let killed = Instant::now();
    replicas[leader].kill();
    // The dead leader's last renewal (read at once: a takeover takes seconds).
    let last_renewal = lease_time(&plane, "renewTime")?;
    let standby_pod = replicas[standby].pod.clone();
    wait::until("the standby holds the Lease", lease.duration * 3, || {
        Ok((lease_holder(&plane)?.as_deref() == Some(standby_pod.as_str())).then_some(()))
    })
    .map_err(|e| e.context(logs(&replicas)))?;
    let failover = killed.elapsed();
    let acquired = lease_time(&plane, "acquireTime")?;
    let after_renewal = Duration::try_from(acquired.duration_since(last_renewal))?;
    eprintln!("leader failover after kill -9: {failover:?} ({after_renewal:?} after its last renewal)");
    // The standby takes the Lease once the record stood still for the lease duration, counted
    // from when it saw the record (after the renewal), and looks every retry_every.
    assert!(
        after_renewal >= lease.duration,
        "the standby took the Lease {after_renewal:?} after the last renewal, before the record stood still for {:?}",
        lease.duration
    );
    assert!(
        after_renewal <= lease.duration + lease.retry_every * 2 + Duration::from_secs(2),
        "the standby took the Lease {after_renewal:?} after the last renewal: more than the lease \
         duration ({:?}) and two looks",
        lease.duration
    );
    assert!(
        transitions(&plane)? > transitions_before,
        "a takeover is a lease transition"
    );

    // The new leader decides from what exists: nothing created twice, nothing lost.
    plane.apply(&ichor_user("bob", &["viewer"]))?;
    // Seen by the new leader before his password is set (as the issuer would set it).
    wait_status(&plane, "bob", "PasswordSet", "False").map_err(|e| e.context(logs(&replicas)))?;
    add_credentials_key(&plane, 0, "bob")?;
    wait_status(&plane, "bob", "PasswordSet", "True").map_err(|e| e.context(logs(&replicas)))?;
    // bob also has a Secret of his own (what a move to the per-user layout leaves when it is cut
    // short): collected with his key when he goes.
    plane.apply(&crate::credentials::per_user_secret(
        "bob",
        &crate::credentials::entry("bob")?,
    ))?;
    let after = owned(&plane)?;
    for name in OWNED_SECRETS {
        assert!(
            before[name].0 == after[name].0,
            "Secret {name} was created again after the failover"
        );
        assert!(
            before[name].1 == after[name].1,
            "Secret {name} changed after the failover"
        );
    }
    wait_keys(&plane, &["alice", "bob"])?;
    issuer_service_recreated(&plane).map_err(|e| e.context(logs(&replicas)))?;
    let after = owned(&plane)?;

    // A watch cut mid-stream: the replica's apiserver goes away while others write through the
    // second one; once it is back, the watches resume and miss nothing.
    plane.stop_apiserver(0)?;
    let server = format!("--server={}", plane.url(1));
    plane.kubectl_run(
        &[
            &server,
            "apply",
            "--server-side",
            "--field-manager=ichor-test",
            "-f",
            "-",
        ],
        Some(&ichor_user("carol", &[])),
    )?;
    plane.kubectl_run(&[&server, "delete", "ichoruser", "bob", "-n", NAMESPACE], None)?;
    add_credentials_key(&plane, 1, "ghost2")?;
    plane.start_apiserver(0, Duration::from_secs(60))?;
    let resumed = (|| -> anyhow::Result<()> {
        wait_status(&plane, "carol", "PasswordSet", "False")?;
        // bob's deletion and ghost2's arrival happened while the watch was cut.
        wait_keys(&plane, &["alice"])?;
        wait::until("bob's own credentials Secret collected", SETTLE, || {
            Ok(crate::credentials::own(&plane, "bob")?.is_none().then_some(()))
        })
    })();
    resumed.map_err(|e| e.context(logs(&replicas)))?;
    replicas[standby].check_running()?;
    assert!(
        owned(&plane)? == after,
        "the owned Secrets changed across the apiserver restart"
    );

    // Before the webhooks' phase, which ends by deleting the namespaces.
    credentials_creates_held_by_policy(&plane)?;

    // The webhooks as the apiserver calls them, served by the surviving replica.
    let mut golden = String::new();
    crate::webhooks::phase(&plane, &mut replicas[standby], &mut golden)
        .map_err(|e| e.context(logs(&replicas)))?;
    insta::assert_snapshot!("webhook_refusals", golden);

    // The chart's RBAC, measured: nothing refused, nothing allowed by another grant, and every
    // verb of every rule used.
    let usage = install::chart_rbac_usage(&plane, CONTROLLER_SERVICE_ACCOUNT)?;
    eprintln!(
        "controller requests: {:#?}\nrefused while granted (an apiserver just started): {}",
        usage.requests, usage.refused_while_granted
    );
    usage.check_granted("the controller")?;
    let exempt: Vec<&str> = CONFLICT_ONLY
        .iter()
        .chain(&ROLLOUT_RULES)
        .chain(&MIGRATION_RULES)
        .map(|(rule, _)| *rule)
        .collect();
    usage.check_all_used("the controller", &exempt)?;
    let grants = rbac::grants_for(&install::chart_manifest()?, NAMESPACE, CONTROLLER_SERVICE_ACCOUNT)?;
    // Matched against no request, every granted verb is unused: each exemption must be one.
    let every = rbac::usage(&grants, &[], "").unused;
    for &(rule, why) in CONFLICT_ONLY.iter().chain(&ROLLOUT_RULES).chain(&MIGRATION_RULES) {
        assert!(
            every.iter().any(|u| u == rule),
            "the exemption {rule:?} ({why}) is no granted rule: {every:#?}"
        );
    }
    Ok(())
}
