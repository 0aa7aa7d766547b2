//! `ichor init --ui-url` on a real control plane with the real helm (built by
//! `hack/kube/build.sh` from `helm.sh/helm/v3`): the chart installed by `helm install` with users
//! off, its webhooks answered by the controller's webhook code ([`webhooks`]), a TalosCluster,
//! then the real `ichor` binary with the control plane's admin kubeconfig and helm found on its
//! PATH. What it did is read back from the apiserver and from helm: the credentials namespace
//! and no legacy credentials Secret, the first admin and its entry (in its own Secret), the
//! release's values and revision, the switch on the TalosCluster. On this default install (`controller.rollout.clusters` empty) init adds the
//! cluster to that list, and, the Secret `<cluster>-talosconfig` missing, prints the exact
//! `ichor init ... --talosconfig FILE --kube-ca FILE` command before `ichor config apply`;
//! `ichor config apply` of a cluster the controller does not roll out, or without that Secret,
//! fails at once saying what to do and creates no operation. A run with `--talosconfig` and
//! `--kube-ca` creates the Secret (bad files, and a talosconfig whose context is another
//! cluster's, are refused first, their content never shown) and changes nothing else. A second
//! run changes nothing; a run with another URL is refused, naming the URL in use, and changes
//! nothing either. With `--no-rollout` ([`no_rollout`]) the release's rollout list is left as it
//! was and no Secret is created.

mod no_rollout;
mod rollout;
mod webhooks;

use std::path::{Path, PathBuf};
use std::process::Output;

use base64::Engine as _;
use ichor_renderers::auth::{Password, credentials::CredentialsEntry, hash::verify_password};
use ichor_testkit::control_plane::{ControlPlane, Options};
use ichor_testkit::helm::Helm;
use ichor_testkit::install::{self, NAMESPACE};
use serde_json::{Value, json};

use self::webhooks::{CONFIGURATION, Webhooks};
use crate::support::{ichor_command, text};

/// Not the chart's name: init finds the release by its chart.
const RELEASE: &str = "identity";
const CLUSTER: &str = "prod";
const URL: &str = "https://ichor.example.test";
const OTHER_URL: &str = "https://other.example.test";
const CREDENTIALS: &str = "ichor-user-credentials";
const ADMIN: &str = "admin";
/// The admin's credentials Secret in [`CREDENTIALS_NAMESPACE`].
const ADMIN_SECRET: &str = "ichor-user-admin";
/// The operator's own value at install (kept by the upgrade).
const OPERATOR_VALUES: [&str; 2] = ["--set", "controller.replicas=1"];
/// What `ichor init` prints on stdout once the Talos credentials Secret exists: the one next
/// command.
const NEXT: &str = "ichor config apply --cluster prod\n";
/// What it prints before [`NEXT`] while that Secret is missing: itself again with the files (it
/// stores one context of the talosconfig), never a `kubectl create secret` of the whole file.
const CREATE_SECRET: &str = "ichor init --ui-url https://ichor.example.test --cluster prod \
                             --talosconfig ./talosconfig --kube-ca ./kube-ca.crt\n";
/// A second TalosCluster, which init is never run for.
const STAGING: &str = "\
apiVersion: ichor.maesh.dev/v1alpha1
kind: TalosCluster
metadata:
  name: staging
  namespace: ichor-system
spec:
  versionContract: v1.14
  endpoint: https://staging.example.test:6443
";

/// The TalosCluster, as Ichor core creates it: no `spec.authentication` yet.
const TALOS_CLUSTER: &str = "\
apiVersion: ichor.maesh.dev/v1alpha1
kind: TalosCluster
metadata:
  name: prod
  namespace: ichor-system
spec:
  versionContract: v1.14
  endpoint: https://prod.example.test:6443
";

/// `ichor init --ui-url url --cluster prod` as a person runs it: `KUBECONFIG` the admin's, Helm's
/// directories under `home`, helm found on `PATH` (no `--helm`, no `ICHOR_HELM`), and `tmp` as
/// its `TMPDIR`.
fn init(helm: &Helm, home: &Path, tmp: &Path, url: &str) -> Output {
    init_with(helm, home, tmp, url, &[])
}

/// [`init`] with more arguments.
fn init_with(helm: &Helm, home: &Path, tmp: &Path, url: &str, more: &[&str]) -> Output {
    let mut args = vec!["init", "--ui-url", url, "--cluster", CLUSTER];
    args.extend(more);
    let mut cmd = ichor_command(home, &args);
    cmd.envs(helm.env()).env("TMPDIR", tmp).env_remove("ICHOR_HELM");
    for name in Helm::UNSET {
        cmd.env_remove(name);
    }
    let inherited = std::env::var_os("PATH").unwrap_or_default();
    let path = std::iter::once(helm.bin_dir().to_path_buf()).chain(std::env::split_paths(&inherited));
    cmd.env("PATH", std::env::join_paths(path).unwrap());
    cmd.output().unwrap()
}

/// The password of the message `ichor init` prints once: the indented line after it.
fn printed_password(stderr: &str) -> String {
    let mut lines = stderr.lines().skip_while(|l| !l.contains("shown only this once"));
    assert!(lines.next().is_some(), "no password message in: {stderr}");
    let line = lines.find(|l| !l.trim().is_empty()).unwrap();
    assert!(line.starts_with("    "), "{line:?}");
    line.trim().to_owned()
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file()
                && let Ok(bytes) = std::fs::read(entry.path())
                && bytes.windows(needle.len()).any(|w| w == needle)
            {
                found.push(entry.path());
            }
        }
    }
    found
}

/// `kind/name` in ichor-system as JSON; it must exist.
fn get(plane: &ControlPlane, kind: &str, name: &str) -> Value {
    plane
        .get_json(0, kind, NAMESPACE, name)
        .unwrap()
        .unwrap_or_else(|| panic!("no {kind} {NAMESPACE}/{name}"))
}

/// The admin's own credentials Secret (a fresh install keeps one Secret per user).
fn admin_secret(plane: &ControlPlane) -> Value {
    plane
        .get_json(0, "secret", CREDENTIALS_NAMESPACE, ADMIN_SECRET)
        .unwrap()
        .unwrap_or_else(|| panic!("no Secret {CREDENTIALS_NAMESPACE}/{ADMIN_SECRET}"))
}

/// The admin's credentials entry, from its Secret on the server.
fn admin_entry(plane: &ControlPlane) -> CredentialsEntry {
    let secret = admin_secret(plane);
    let b64 = secret["data"]["entry"]
        .as_str()
        .unwrap_or_else(|| panic!("{ADMIN_SECRET} has no entry: {secret}"));
    let json = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
    CredentialsEntry::parse(ADMIN, &json).unwrap()
}

fn resource_version(object: &Value) -> String {
    object["metadata"]["resourceVersion"].as_str().unwrap().to_owned()
}

/// What a run of init may not change when it has nothing to do: the admin, its credentials,
/// the TalosCluster (resource versions) and the release (revision, status, user values).
fn unchanged_state(plane: &ControlPlane, helm: &Helm) -> (Vec<String>, (u64, String), Value) {
    let mut versions: Vec<String> = [("ichoruser", ADMIN), ("taloscluster", CLUSTER)]
        .iter()
        .map(|(kind, name)| resource_version(&get(plane, kind, name)))
        .collect();
    versions.push(resource_version(&admin_secret(plane)));
    (
        versions,
        helm.revision(RELEASE).unwrap(),
        helm.user_values(RELEASE).unwrap(),
    )
}

/// The release after init's upgrade: revision 2, deployed; the operator's value kept and only
/// the two values of users on and the cluster in the controller's rollout added; and its
/// manifest exactly what the chart renders with those values, so the chart init wrote from the
/// release record is the chart (nothing else changed).
fn check_upgraded_once(helm: &Helm) {
    assert_eq!(helm.revision(RELEASE).unwrap(), (2, "deployed".to_owned()));
    assert_eq!(
        helm.user_values(RELEASE).unwrap(),
        json!({"controller": {"replicas": 1, "rollout": {"clusters": [CLUSTER]}},
            "ichorUI": {"users": {"enabled": true, "externalURL": URL}}})
    );
    let users_on = format!("ichorUI.users.externalURL={URL}");
    let mut values = vec![
        "--set",
        "ichorUI.users.enabled=true",
        "--set-string",
        &users_on,
        "--set",
        "controller.rollout.clusters={prod}",
    ];
    values.extend(OPERATOR_VALUES);
    let expected = helm.template_chart(RELEASE, &values).unwrap();
    assert_eq!(helm.manifest(RELEASE).unwrap().trim(), expected.trim());
}

/// The printed password is in no file under `dirs` (the homes, the temporary directory the
/// release's chart was written to, the control plane with etcd's data) and not in the release
/// (values, manifest, notes).
fn check_written_nowhere(password: &str, dirs: &[&Path], helm: &Helm) {
    for dir in dirs {
        let found = files_containing(dir, password.as_bytes());
        assert!(found.is_empty(), "the password is written in {found:?}");
    }
    let record = helm.run(&["get", "all", RELEASE, "-n", NAMESPACE]).unwrap();
    assert!(!record.contains(password), "the password is in the release");
}

#[test]
#[ignore = "needs the control plane and helm: hack/kube/build.sh"]
fn init_turns_users_on_through_the_helm_release_once_and_refuses_another_url() {
    let options = Options {
        extra_args: vec!["--enable-aggregator-routing=true".to_owned()],
        ..Options::default()
    };
    let Some(plane) = ControlPlane::start(options).unwrap() else {
        return;
    };
    eprintln!("control plane ready in {:?}", plane.started_in());
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let Some(helm) = Helm::new(&plane, home.path()) else {
        return;
    };

    // The namespace and the CRDs (the TalosCluster's is Ichor core's), the cluster, then the
    // chart as an operator installs it: users off, one value of the operator's own.
    install::install_crds(&plane).unwrap();
    plane.apply(TALOS_CLUSTER).unwrap();
    plane.apply(STAGING).unwrap();
    helm.install_chart(RELEASE, &OPERATOR_VALUES).unwrap();
    assert_eq!(helm.revision(RELEASE).unwrap(), (1, "deployed".to_owned()));
    assert_eq!(
        helm.user_values(RELEASE).unwrap(),
        json!({"controller": {"replicas": 1}})
    );
    assert!(
        plane
            .get_json(0, "deployment", NAMESPACE, "ichor-issuer")
            .unwrap()
            .is_none(),
        "users off: no issuer"
    );
    let webhooks = Webhooks::serve(&plane, CLUSTER).unwrap();
    let reviewed_before = webhooks.count("talosclusters", true);

    // The first run.
    let started = std::time::Instant::now();
    let first = init(&helm, home.path(), tmp.path(), URL);
    eprintln!("ichor init took {:?}", started.elapsed());
    let (stdout, stderr) = (text(&first.stdout), text(&first.stderr));
    assert!(first.status.success(), "{stderr}");
    assert_eq!(stdout, format!("{CREATE_SECRET}{NEXT}"), "{stderr}");
    assert!(stderr.contains("controller.rollout.clusters=[prod]"), "{stderr}");
    let password = printed_password(&stderr);
    assert_eq!(
        format!("{stdout}{stderr}").matches(password.as_str()).count(),
        1,
        "the password is printed once: {stderr}"
    );
    assert!(
        stderr.contains(&format!("Helm release {NAMESPACE}/{RELEASE}: upgraded")),
        "{stderr}"
    );

    // No legacy credentials Secret; the first admin, whose password must change at first
    // sign-in, with its own credentials Secret.
    assert!(
        plane
            .get_json(0, "secret", NAMESPACE, CREDENTIALS)
            .unwrap()
            .is_none()
    );
    let secret = admin_secret(&plane);
    assert_eq!(secret["type"], "ichor.maesh.dev/user-credentials");
    assert_eq!(secret["metadata"]["labels"]["ichor.maesh.dev/user"], ADMIN);
    let admin = get(&plane, "ichoruser", ADMIN);
    assert_eq!(admin["spec"]["roles"], json!(["admin"]));
    let entry = admin_entry(&plane);
    assert!(entry.must_change);
    assert!(
        verify_password(&Password::new(password.clone()), &entry.hash)
            .unwrap()
            .is_valid(),
        "the printed password is the admin's"
    );

    // The release: one upgrade, the operator's values kept, the two of users on added.
    check_upgraded_once(&helm);
    let issuer = get(&plane, "deployment", "ichor-issuer");
    let issuer_args = issuer["spec"]["template"]["spec"]["containers"].to_string();
    assert!(issuer_args.contains(URL), "{issuer_args}");
    // The upgrade kept the caBundle the chart never sets, and the webhooks' Service reference.
    let configuration = get(&plane, "validatingwebhookconfiguration", CONFIGURATION);
    for hook in configuration["webhooks"].as_array().unwrap() {
        assert_eq!(hook["clientConfig"]["caBundle"], webhooks.ca_bundle(), "{hook}");
        assert_eq!(
            hook["clientConfig"]["service"]["name"],
            "ichor-controller-webhook"
        );
    }

    // The switch, reviewed by the TalosCluster webhook after the upgrade.
    let cluster = get(&plane, "taloscluster", CLUSTER);
    assert_eq!(
        cluster["spec"]["authentication"]["ichor"],
        json!({"enabled": true, "url": URL})
    );
    assert_eq!(cluster["spec"]["endpoint"], "https://prod.example.test:6443");
    assert!(
        webhooks.count("talosclusters", true) > reviewed_before,
        "the switch went through the webhook"
    );
    assert_eq!(webhooks.count("talosclusters", false), 0);

    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "the release's chart directory is removed"
    );
    check_written_nowhere(&password, &[home.path(), tmp.path(), plane.dir()], &helm);
    assert!(
        !files_containing(plane.dir(), URL.as_bytes()).is_empty(),
        "the search finds what etcd holds (the TalosCluster's URL)"
    );

    // What the first run left: the rollout needs the Talos credentials; another cluster is not
    // rolled out. `ichor config apply` says so at once and creates nothing.
    let state = unchanged_state(&plane, &helm);
    rollout::apply_fails_fast_naming_what_to_set(&plane, home.path());
    let credentials = rollout::created_from_the_flags(&plane, &helm, home.path(), tmp.path());
    assert_eq!(
        unchanged_state(&plane, &helm),
        state,
        "only the Secret was created"
    );
    rollout::apply_waits_for_the_trust(&plane, home.path());

    // The second run: nothing to do, no password, the same next command.
    let second = init_with(&helm, home.path(), tmp.path(), URL, &credentials.args());
    let stderr = text(&second.stderr);
    assert!(second.status.success(), "{stderr}");
    assert_eq!(text(&second.stdout), NEXT, "{stderr}");
    assert!(stderr.contains("exists already; it was kept"), "{stderr}");
    assert!(!stderr.contains("shown only this once"), "{stderr}");
    assert!(stderr.contains("exists already"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "runs the issuer at {URL} and rolls out cluster {CLUSTER} already"
        )),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("already trusts {URL}")), "{stderr}");
    assert_eq!(unchanged_state(&plane, &helm), state);
    assert_eq!(admin_entry(&plane).hash, entry.hash, "the password is kept");

    // Another URL: refused, naming the URL in use, and nothing changes.
    let other = init(&helm, home.path(), tmp.path(), OTHER_URL);
    let stderr = text(&other.stderr);
    assert!(!other.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("already runs the issuer at {URL}, not {OTHER_URL}")),
        "{stderr}"
    );
    assert!(text(&other.stdout).is_empty(), "no next command");
    assert_eq!(unchanged_state(&plane, &helm), state);
    assert_eq!(
        get(&plane, "taloscluster", CLUSTER)["spec"]["authentication"]["ichor"]["url"],
        URL
    );
}

/// The first administrator as a fresh installation may already have it (kept by init, so this
/// test writes no credentials entry: where an entry goes is the store's, tested with it).
const ADMIN_USER: &str = "\
apiVersion: ichor.maesh.dev/v1alpha1
kind: IchorUser
metadata:
  name: admin
  namespace: ichor-system
spec:
  roles: [admin]
";
/// The namespace of the per-user credentials Secrets.
const CREDENTIALS_NAMESPACE: &str = "ichor-credentials";

/// The Secrets of `namespace`, by name.
fn secret_names(plane: &ControlPlane, namespace: &str) -> Vec<String> {
    let out = plane
        .kubectl_run(&["get", "secrets", "-n", namespace, "-o", "name"], None)
        .unwrap();
    out.lines().map(str::to_owned).collect()
}

/// A fresh installation: the chart installed with users off and no credentials Secret of an
/// earlier release. Before init, turning users on in the chart is refused naming `ichor init`
/// (the chart's check finds no credentials namespace). Init creates the namespace, labelled
/// part of Ichor, and no Secret anywhere (not `ichor-user-credentials`, nothing in the
/// namespace); the upgrade renders the issuer's and the controller's Roles there. A second run
/// keeps the namespace (same uid, same resourceVersion); a credentials Secret of an earlier
/// release that appears is kept byte for byte by a third.
#[test]
#[ignore = "needs the control plane and helm: hack/kube/build.sh"]
fn creates_the_credentials_namespace_once_and_no_legacy_secret_on_a_fresh_install() {
    let options = Options {
        extra_args: vec!["--enable-aggregator-routing=true".to_owned()],
        ..Options::default()
    };
    let Some(plane) = ControlPlane::start(options).unwrap() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let Some(helm) = Helm::new(&plane, home.path()) else {
        return;
    };
    install::install_crds(&plane).unwrap();
    plane.apply(TALOS_CLUSTER).unwrap();
    plane.apply(ADMIN_USER).unwrap();
    helm.install_chart(RELEASE, &OPERATOR_VALUES).unwrap();
    let namespace = |plane: &ControlPlane| plane.get_json(0, "namespace", "", CREDENTIALS_NAMESPACE).unwrap();
    assert!(namespace(&plane).is_none(), "the chart does not create it");
    let system_secrets = secret_names(&plane, NAMESPACE);

    // Users on without the namespace: the chart's check refuses the upgrade, naming the command.
    let chart = ichor_testkit::consumers::repo_root().join("helm/ichor");
    let external_url = format!("ichorUI.users.externalURL={URL}");
    let upgrade: Vec<&std::ffi::OsStr> = vec![
        "upgrade".as_ref(),
        RELEASE.as_ref(),
        chart.as_os_str(),
        "-n".as_ref(),
        NAMESPACE.as_ref(),
        "--reuse-values".as_ref(),
        "--set".as_ref(),
        "ichorUI.users.enabled=true".as_ref(),
        "--set-string".as_ref(),
        external_url.as_ref(),
    ];
    let refused = helm
        .run(&upgrade)
        .expect_err("users on without the credentials namespace must be refused");
    let refused = format!("{refused:#}");
    assert!(
        refused.contains(CREDENTIALS_NAMESPACE) && refused.contains("ichor init"),
        "{refused}"
    );
    assert_eq!(helm.revision(RELEASE).unwrap(), (1, "deployed".to_owned()));

    let _webhooks = Webhooks::serve(&plane, CLUSTER).unwrap();
    let first = init(&helm, home.path(), tmp.path(), URL);
    let stderr = text(&first.stderr);
    assert!(first.status.success(), "{stderr}");
    assert!(stderr.contains("Created Namespace ichor-credentials"), "{stderr}");
    assert!(
        !stderr.contains("shown only this once"),
        "the admin existed: {stderr}"
    );
    let created = namespace(&plane).expect("init creates the namespace");
    assert_eq!(
        created["metadata"]["labels"]["app.kubernetes.io/part-of"], "ichor",
        "{created}"
    );
    assert!(
        plane
            .get_json(0, "secret", NAMESPACE, CREDENTIALS)
            .unwrap()
            .is_none(),
        "no legacy Secret on a fresh install"
    );
    let new_secrets: Vec<String> = secret_names(&plane, NAMESPACE)
        .into_iter()
        .filter(|s| !system_secrets.contains(s))
        .collect();
    assert_eq!(
        new_secrets,
        [format!("secret/sh.helm.release.v1.{RELEASE}.v2")],
        "init created no Secret in {NAMESPACE} (the upgrade its release record)"
    );
    assert!(secret_names(&plane, CREDENTIALS_NAMESPACE).is_empty());
    check_upgraded_once(&helm);
    for role in ["ichor-issuer", "ichor-controller"] {
        assert!(
            plane
                .get_json(0, "role", CREDENTIALS_NAMESPACE, role)
                .unwrap()
                .is_some(),
            "the upgrade renders Role {role} into the namespace"
        );
    }

    // A second run: the namespace kept as it is.
    let second = init(&helm, home.path(), tmp.path(), URL);
    let stderr = text(&second.stderr);
    assert!(second.status.success(), "{stderr}");
    assert!(!stderr.contains("Created Namespace"), "{stderr}");
    let kept = namespace(&plane).unwrap();
    assert_eq!(kept["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(resource_version(&kept), resource_version(&created));

    // The one Secret of an earlier release, as an installation upgraded to this one has it:
    // a third run leaves it exactly as it is.
    plane
        .apply(&format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {CREDENTIALS}\n  namespace: {NAMESPACE}\ntype: Opaque\ndata:\n  alice: e30=\n"
        ))
        .unwrap();
    let legacy = get(&plane, "secret", CREDENTIALS);
    let third = init(&helm, home.path(), tmp.path(), URL);
    assert!(third.status.success(), "{}", text(&third.stderr));
    assert_eq!(get(&plane, "secret", CREDENTIALS), legacy);
    assert!(secret_names(&plane, CREDENTIALS_NAMESPACE).is_empty());
}

/// Someone made `ichor-credentials` before Ichor did (a tenant's self-service namespace): `ichor
/// init` refuses it while it grants anyone else anything there, and, in an installation that
/// keeps its credentials in the legacy Secret, while it holds any user's Secret (nothing has
/// moved one out: it was planted, and would be read before the real entry). It writes nothing:
/// no admin, no upgrade, no switch.
#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn init_refuses_a_credentials_namespace_someone_else_made_and_planted() {
    let options = Options {
        extra_args: vec!["--enable-aggregator-routing=true".to_owned()],
        ..Options::default()
    };
    let Some(plane) = ControlPlane::start(options).unwrap() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let Some(helm) = Helm::new(&plane, home.path()) else {
        return;
    };
    install::install_crds(&plane).unwrap();
    plane.apply(TALOS_CLUSTER).unwrap();
    plane.apply(ADMIN_USER).unwrap();
    helm.install_chart(RELEASE, &OPERATOR_VALUES).unwrap();
    // The legacy Secret of an earlier release, holding the real admin's entry.
    plane
        .apply(&format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {CREDENTIALS}\n  namespace: {NAMESPACE}\ntype: Opaque\ndata:\n  admin: e30=\n"
        ))
        .unwrap();
    // mallory's namespace, her admin binding, and an entry of her own for the admin.
    let planted = CredentialsEntry::new(
        ichor_renderers::auth::hash::DUMMY_PHC.to_owned(),
        jiff::Timestamp::now(),
        false,
    );
    let value = base64::engine::general_purpose::STANDARD.encode(planted.to_json(ADMIN).unwrap());
    plane
        .apply(
            &json!({"apiVersion": "v1", "kind": "List", "items": [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CREDENTIALS_NAMESPACE}},
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": {"name": "tenant-admin", "namespace": CREDENTIALS_NAMESPACE},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "mallory"}]},
                {"apiVersion": "v1", "kind": "Secret", "type": "ichor.maesh.dev/user-credentials",
                    "metadata": {"name": ADMIN_SECRET, "namespace": CREDENTIALS_NAMESPACE,
                        "labels": {"ichor.maesh.dev/user": ADMIN}},
                    "data": {"entry": value}}]})
            .to_string(),
        )
        .unwrap();
    let _webhooks = Webhooks::serve(&plane, CLUSTER).unwrap();

    let refused = init(&helm, home.path(), tmp.path(), URL);
    let stderr = text(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    for named in [
        "RoleBinding tenant-admin",
        "User:/mallory",
        "Secret ichor-user-admin",
    ] {
        assert!(stderr.contains(named), "{named} is not named: {stderr}");
    }
    assert_eq!(
        helm.revision(RELEASE).unwrap(),
        (1, "deployed".to_owned()),
        "no upgrade"
    );

    // Her binding gone, the planted entry is still refused: the legacy Secret holds the users.
    plane
        .kubectl_run(
            &[
                "delete",
                "rolebinding",
                "tenant-admin",
                "-n",
                CREDENTIALS_NAMESPACE,
            ],
            None,
        )
        .unwrap();
    let refused = init(&helm, home.path(), tmp.path(), URL);
    let stderr = text(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(stderr.contains("Secret ichor-user-admin"), "{stderr}");
    assert!(!stderr.contains("RoleBinding"), "{stderr}");
    assert_eq!(
        helm.revision(RELEASE).unwrap(),
        (1, "deployed".to_owned()),
        "no upgrade"
    );
}
