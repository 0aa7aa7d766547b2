//! After `ichor init` on a default install: what `ichor config apply` meets (a cluster the
//! controller does not roll out, a missing Talos credentials Secret), and the Secret created from
//! `--talosconfig` and `--kube-ca`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use ichor_testkit::control_plane::ControlPlane;
use ichor_testkit::helm::Helm;
use ichor_testkit::install::NAMESPACE;
use ichor_testkit::talos::FakeTalos;

use super::{CLUSTER, CREATE_SECRET, URL, get, init_with};
use crate::support::{ichor_command, text};

/// Well within the 30 s after which an operation nobody took up is looked at again: the answer
/// comes from the checks made before any operation is created.
const FAIL_FAST: Duration = Duration::from_secs(15);

/// `ichor config apply --cluster <cluster> --yes` with the admin's kubeconfig: its exit code,
/// stderr and how long it took.
fn apply(plane: &ControlPlane, home: &Path, cluster: &str) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let out = ichor_command(home, &["config", "apply", "--cluster", cluster, "--yes"])
        .env("KUBECONFIG", plane.admin_kubeconfig())
        .output()
        .unwrap();
    (out.status.code(), text(&out.stderr), started.elapsed())
}

fn operations(plane: &ControlPlane) -> String {
    plane
        .kubectl_run(&["get", "talosoperations", "-n", NAMESPACE, "-o", "name"], None)
        .unwrap()
}

/// `staging`, which the release does not list, fails at once with the exact `helm upgrade` that
/// adds it; `prod`, listed by init, fails at once with the exact command that creates its
/// missing Secret. Neither creates an operation.
pub fn apply_fails_fast_naming_what_to_set(plane: &ControlPlane, home: &Path) {
    let (code, stderr, took) = apply(plane, home, "staging");
    eprintln!("config apply of a cluster not rolled out failed in {took:?}");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(took < FAIL_FAST, "{took:?}: {stderr}");
    for expected in [
        "the controller does not roll out cluster staging: Helm release ichor-system/identity has \
         controller.rollout.clusters=[prod]",
        "helm upgrade identity helm/ichor -n ichor-system --reuse-values --set-json \
         'controller.rollout.clusters=[\"prod\",\"staging\"]'",
        "No operation was created.",
    ] {
        assert!(stderr.contains(expected), "{expected:?} not in:\n{stderr}");
    }

    let (code, stderr, took) = apply(plane, home, CLUSTER);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(took < FAIL_FAST, "{took:?}: {stderr}");
    assert!(
        stderr.contains("Secret ichor-system/prod-talosconfig does not exist"),
        "{stderr}"
    );
    assert!(stderr.contains(CREATE_SECRET.trim_end()), "{stderr}");
    assert!(
        operations(plane).trim().is_empty(),
        "no operation: {}",
        operations(plane)
    );
}

/// The files init was given.
pub struct Credentials {
    talosconfig: PathBuf,
    kube_ca: PathBuf,
}

impl Credentials {
    /// `--talosconfig FILE --kube-ca FILE --talos-context test` (the test kit's talosconfig
    /// names its one context `test`, not like the cluster).
    pub fn args(&self) -> Vec<&str> {
        vec![
            "--talosconfig",
            self.talosconfig.to_str().unwrap(),
            "--kube-ca",
            self.kube_ca.to_str().unwrap(),
            "--talos-context",
            "test",
        ]
    }
}

/// Flags alone or with a bad file are refused before any write, never showing a file's content;
/// so is a talosconfig whose current context is not named like the cluster, unless
/// `--talos-context` names it; both good files create `prod-talosconfig` with their bytes, and
/// the next command is the rollout's alone.
pub fn created_from_the_flags(plane: &ControlPlane, helm: &Helm, home: &Path, tmp: &Path) -> Credentials {
    let talos = FakeTalos::with_nodes(&["127.0.0.1"], None).unwrap();
    let dir = home.join("credentials");
    std::fs::create_dir_all(&dir).unwrap();
    let credentials = Credentials {
        talosconfig: dir.join("talosconfig"),
        kube_ca: dir.join("kube-ca.crt"),
    };
    std::fs::write(&credentials.talosconfig, talos.talosconfig()).unwrap();
    std::fs::copy(plane.ca_file(), &credentials.kube_ca).unwrap();
    let secret_exists = || {
        plane
            .get_json(0, "secret", NAMESPACE, "prod-talosconfig")
            .unwrap()
            .is_some()
    };

    // One flag without the other: clap refuses, naming the missing one.
    let alone = init_with(helm, home, tmp, URL, &credentials.args()[..2]);
    assert_eq!(alone.status.code(), Some(2), "{}", text(&alone.stderr));
    assert!(
        text(&alone.stderr).contains("--kube-ca"),
        "{}",
        text(&alone.stderr)
    );

    // Not a talosconfig: refused, naming the flag and file, without quoting it.
    let bad = dir.join("not-a-talosconfig");
    std::fs::write(&bad, "context: [do-not-print-me\n").unwrap();
    let refused = init_with(
        helm,
        home,
        tmp,
        URL,
        &[
            "--talosconfig",
            bad.to_str().unwrap(),
            "--kube-ca",
            credentials.kube_ca.to_str().unwrap(),
        ],
    );
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("--talosconfig {}: not a talosconfig", bad.display())),
        "{stderr}"
    );
    assert!(!stderr.contains("do-not-print-me"), "{stderr}");
    assert!(text(&refused.stdout).is_empty());
    assert!(!secret_exists(), "nothing was written");

    // The file's current context is `test`, not `prod`: refused, naming the file's contexts and
    // the flag, before any write.
    let refused = init_with(helm, home, tmp, URL, &credentials.args()[..4]);
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    for expected in [
        "no context named \"prod\" and its current context is \"test\"",
        "its contexts: \"test\"",
        "pass --talos-context NAME",
    ] {
        assert!(stderr.contains(expected), "{expected:?} not in: {stderr}");
    }
    assert!(text(&refused.stdout).is_empty());
    assert!(!secret_exists(), "nothing was written");

    // Both files: the Secret, with their content (the file's one context, the CA certificate);
    // printed nowhere.
    let created = init_with(helm, home, tmp, URL, &credentials.args());
    let (stdout, stderr) = (text(&created.stdout), text(&created.stderr));
    assert!(created.status.success(), "{stderr}");
    assert_eq!(stdout, super::NEXT, "{stderr}");
    assert!(
        stderr.contains("Created Secret ichor-system/prod-talosconfig (keys talosconfig and ca.crt)"),
        "{stderr}"
    );
    let key = talos
        .talosconfig()
        .lines()
        .find_map(|l| l.trim().strip_prefix("key: "))
        .unwrap()
        .to_owned();
    assert!(
        !format!("{stdout}{stderr}").contains(&key),
        "the client key is never printed"
    );
    let secret = get(plane, "secret", "prod-talosconfig");
    let b64 = |path: &Path| base64::engine::general_purpose::STANDARD.encode(std::fs::read(path).unwrap());
    let stored = base64::engine::general_purpose::STANDARD
        .decode(secret["data"]["talosconfig"].as_str().unwrap())
        .unwrap();
    let as_yaml = |bytes: &[u8]| serde_yaml::from_slice::<serde_yaml::Value>(bytes).unwrap();
    assert_eq!(
        as_yaml(&stored),
        as_yaml(&std::fs::read(&credentials.talosconfig).unwrap()),
        "the file's one context, as written"
    );
    assert_eq!(secret["data"]["ca.crt"], b64(&credentials.kube_ca));
    credentials
}

/// Right after init the controller has not published `ichor-oidc-trust` yet (no controller
/// runs here): `ichor config apply` waits for it, bounded, and fails with what to check when it
/// does not come; once it is published while the command waits, the command goes on (here:
/// nothing to do, the cluster has no control planes), creating no operation.
pub fn apply_waits_for_the_trust(plane: &ControlPlane, home: &Path) {
    use std::io::BufRead as _;
    use std::process::Stdio;

    let (code, stderr, took) = {
        let started = Instant::now();
        let out = ichor_command(home, &["config", "apply", "--cluster", CLUSTER, "--yes"])
            .env("KUBECONFIG", plane.admin_kubeconfig())
            .env("ICHOR_TEST_TRUST_WAIT_SECS", "2")
            .output()
            .unwrap();
        (out.status.code(), text(&out.stderr), started.elapsed())
    };
    assert_eq!(code, Some(1), "{stderr}");
    assert!(took < FAIL_FAST, "{took:?}: {stderr}");
    for expected in [
        "Waiting up to 2s for the controller to publish ConfigMap ichor-system/ichor-oidc-trust",
        "renders no authentication document: spec.authentication.ichor: waiting for ichor-oidc-trust",
        "kubectl -n ichor-system rollout status deploy/ichor-controller",
    ] {
        assert!(stderr.contains(expected), "{expected:?} not in:\n{stderr}");
    }

    // Published while the command waits: it goes on at once.
    let mut child = ichor_command(home, &["config", "apply", "--cluster", CLUSTER, "--yes"])
        .env("KUBECONFIG", plane.admin_kubeconfig())
        .env("ICHOR_TEST_TRUST_WAIT_SECS", "60")
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no wait for the trust announced:\n{}", seen.join("\n")));
        let waiting = line.starts_with("Waiting up to 60s");
        seen.push(line);
        if waiting {
            break;
        }
    }
    let trust = ichor_renderers::trust::IssuerTrust {
        discovery_url: "https://10.96.0.10:8444".to_owned(),
        ca_pem: plane.ca_pem().to_owned(),
    };
    let configmap = ichor_renderers::trust::render_trust_configmap(&trust);
    plane.apply(&serde_json::to_string(&configmap).unwrap()).unwrap();
    let published = Instant::now();
    let status = child.wait().unwrap();
    reader.join().unwrap();
    seen.extend(rx.try_iter());
    let all = seen.join("\n");
    eprintln!(
        "config apply went on {:?} after the trust was published",
        published.elapsed()
    );
    assert!(status.success(), "{all}");
    assert!(published.elapsed() < FAIL_FAST, "{all}");
    assert!(
        all.contains("ConfigMap ichor-system/ichor-oidc-trust is published."),
        "{all}"
    );
    assert!(all.contains("nothing to do"), "{all}");
    assert!(
        operations(plane).trim().is_empty(),
        "no operation: {}",
        operations(plane)
    );
}
