//! `ichor init --ui-url` on a real control plane with the real helm (built by
//! `hack/kube/build.sh` from `helm.sh/helm/v3`): the chart installed by `helm install` with users
//! off, its webhooks answered by the controller's webhook code ([`webhooks`]), a TalosCluster,
//! then the real `ichor` binary with the control plane's admin kubeconfig and helm found on its
//! PATH. What it did is read back from the apiserver and from helm: the credentials Secret, the
//! first admin and its entry, the release's values and revision, the switch on the
//! TalosCluster. On this default install (`controller.rollout.clusters` empty) init adds the
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

/// The admin's credentials entry, from the Secret on the server.
fn admin_entry(plane: &ControlPlane) -> CredentialsEntry {
    let secret = get(plane, "secret", CREDENTIALS);
    let b64 = secret["data"][ADMIN]
        .as_str()
        .unwrap_or_else(|| panic!("{CREDENTIALS} has no entry {ADMIN}: {secret}"));
    let json = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
    CredentialsEntry::parse(ADMIN, &json).unwrap()
}

fn resource_version(object: &Value) -> String {
    object["metadata"]["resourceVersion"].as_str().unwrap().to_owned()
}

/// What a run of init may not change when it has nothing to do: the admin, its credentials,
/// the TalosCluster (resource versions) and the release (revision, status, user values).
fn unchanged_state(plane: &ControlPlane, helm: &Helm) -> (Vec<String>, (u64, String), Value) {
    let versions = [
        ("ichoruser", ADMIN),
        ("secret", CREDENTIALS),
        ("taloscluster", CLUSTER),
    ]
    .iter()
    .map(|(kind, name)| resource_version(&get(plane, kind, name)))
    .collect();
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

    // The credentials Secret and the first admin, whose password must change at first sign-in.
    let secret = get(&plane, "secret", CREDENTIALS);
    assert_eq!(secret["type"], "Opaque");
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
