//! The offline commands as a user runs them: `ichor authn validate` and `ichor render`, through
//! the real binary, with their exit codes and the messages that name the file and field.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{path::Path, process::Command};

fn ichor(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ichor"))
        .args(args)
        .output()
        .expect("run ichor");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

const VALID: &str = r#"
apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: https://issuer.example.com
    audiences: [kube]
  claimMappings:
    username: {claim: sub, prefix: "oidc:"}
anonymous:
  enabled: true
  conditions: [{path: /livez}]
"#;

#[test]
fn authn_validate_accepts_a_valid_file_with_exit_code_zero() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "ok.yaml", VALID);
    let (code, stdout, stderr) = ichor(&["authn", "validate", &f]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.is_empty());
    assert!(stderr.contains("valid"));
}

#[test]
fn authn_validate_prints_every_error_as_path_colon_message_and_exits_one() {
    let dir = tempfile::tempdir().unwrap();
    let bad = VALID
        .replace("https://issuer.example.com", "http://issuer.example.com")
        .replace("audiences: [kube]", "audiences: [kube, other]");
    let f = write(dir.path(), "bad.yaml", &bad);
    let (code, stdout, _) = ichor(&["authn", "validate", &f]);
    assert_eq!(code, 1);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            r#"jwt[0].issuer.url: Invalid value: "http://issuer.example.com": URL scheme must be https"#,
            r#"jwt[0].issuer.audienceMatchPolicy: Invalid value: "": audienceMatchPolicy must be MatchAny for multiple audiences"#,
        ]
    );
}

#[test]
fn authn_validate_refuses_the_service_account_issuer() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "ok.yaml", VALID);
    let (code, stdout, _) = ichor(&[
        "authn",
        "validate",
        &f,
        "--disallowed-issuer",
        "https://issuer.example.com",
    ]);
    assert_eq!(code, 1);
    assert!(
        stdout.contains("URL must not overlap with disallowed issuers"),
        "{stdout}"
    );
}

#[test]
fn authn_validate_names_an_unknown_field_and_a_wrong_type() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "unknown.yaml",
        &VALID.replace("audiences:", "audience:"),
    );
    let (code, stdout, _) = ichor(&["authn", "validate", &f]);
    assert_eq!(code, 1);
    assert!(
        stdout.contains("jwt[0].issuer") && stdout.contains("audience"),
        "{stdout}"
    );
    let f = write(
        dir.path(),
        "types.yaml",
        &VALID.replace("enabled: true", "enabled: [1]"),
    );
    let (code, stdout, _) = ichor(&["authn", "validate", &f]);
    assert_eq!(code, 1);
    assert!(stdout.contains("anonymous.enabled"), "{stdout}");
}

#[test]
fn authn_validate_json_output_is_machine_readable() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "bad.yaml", &VALID.replace("https://", "http://"));
    let (code, stdout, _) = ichor(&["authn", "validate", &f, "-o", "json"]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["valid"], false);
    assert_eq!(v["errors"][0]["path"], "jwt[0].issuer.url");
}

#[test]
fn authn_validate_refuses_an_oversized_file_without_reading_it_all() {
    let dir = tempfile::tempdir().unwrap();
    let big = format!("{VALID}\n#{}\n", "x".repeat(2 * 1024 * 1024));
    let f = write(dir.path(), "big.yaml", &big);
    let (code, _, stderr) = ichor(&["authn", "validate", &f]);
    assert_eq!(code, 1);
    assert!(stderr.contains("larger than"), "{stderr}");
}

#[test]
fn render_prints_the_document_machines_and_plan_of_a_fixture() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../golden/fixtures/single-control-plane");
    let (code, stdout, stderr) = ichor(&["render", "--dir", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("kind: KubeAuthenticationConfig"));
    assert!(
        stdout
            .contains("Restarts the Kubernetes API server on each control plane, one at a time; no reboot.")
    );
    assert!(stdout.contains("one control plane"));
}

#[test]
fn render_yaml_output_is_stamped_with_now() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../golden/fixtures/ichor-only");
    let (code, stdout, _) = ichor(&[
        "render",
        "--dir",
        dir.to_str().unwrap(),
        "-o",
        "yaml",
        "--now",
        "2027-01-01T00:00:00Z",
    ]);
    assert_eq!(code, 0);
    let v: serde_yaml::Value = serde_yaml::from_str(&stdout).unwrap();
    assert_eq!(v["renderedAt"], "2027-01-01T00:00:00Z");
}

#[test]
fn render_reports_every_bad_file_with_its_field_and_renders_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "broken.yaml", "kind: [unclosed\n");
    write(
        dir.path(),
        "user.yaml",
        "apiVersion: ichor.maesh.dev/v1alpha1\nkind: IchorUser\nmetadata: {name: a, namespace: ichor-system}\nspec: {roles: admin, colour: red}\n",
    );
    let (code, stdout, stderr) = ichor(&["render", "--dir", dir.path().to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("broken.yaml") && stderr.contains("line 1"),
        "{stderr}"
    );
    assert!(
        stderr.contains("user.yaml") && stderr.contains("spec.roles"),
        "{stderr}"
    );
    assert!(stderr.contains("nothing rendered"), "{stderr}");
}
