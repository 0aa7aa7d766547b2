//! What stops `config apply` before it sends anything, or at the first node: a dry run, no terminal without `--yes`, a missing machine configuration or Kubernetes CA, a talosconfig without `os:admin`.

use super::*;

#[test]
fn a_dry_run_prints_the_plan_and_sends_nothing() {
    let h = Harness::start();
    let (code, stdout, stderr) = h.run(&h.args("5s"), &["--dry-run"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("Cluster prod: Restarts the Kubernetes API server"),
        "{stdout}"
    );
    for (i, (name, address)) in NODES.iter().enumerate() {
        assert!(
            stdout.contains(&format!("{}. {name} ({address})", i + 1)),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!(
                "{name}: in {}",
                h.path("machineconfigs").join(format!("{name}.yaml")).display()
            )),
            "{stdout}"
        );
    }
    assert!(stdout.contains("replaces the KubeAuthenticationConfig document"));
    assert!(stderr.contains("dry run: nothing was sent to any node"));
    assert!(h.talos.applies().is_empty());
    assert!(h.version_nodes().is_empty());
    assert!(h.apiservers.iter().all(|a| *a.hits.lock().unwrap() == 0));
    assert!(!h.path("manifests/.ichor").exists(), "a dry run records nothing");
}

#[test]
fn without_a_terminal_and_without_yes_it_refuses_and_touches_nothing() {
    let h = Harness::start();
    let (code, stdout, stderr) = h.run(&h.args("5s"), &[]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("1. cp-1 (127.0.0.1)"),
        "the plan is shown first:\n{stdout}"
    );
    assert!(stderr.contains("there is no terminal to ask on"), "{stderr}");
    assert!(stderr.contains("pass --yes"), "{stderr}");
    assert!(h.talos.applies().is_empty());
    assert!(h.version_nodes().is_empty());
}

#[test]
fn a_missing_machine_configuration_is_found_before_any_node_is_touched() {
    let h = Harness::start();
    std::fs::remove_file(h.path("machineconfigs/cp-3.yaml")).unwrap();
    let (code, _, stderr) = h.run(&h.args("5s"), &["--yes"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("cp-3.yaml: cannot read control plane cp-3's current machine configuration"),
        "{stderr}"
    );
    assert!(stderr.contains("nothing applied"));
    assert!(h.talos.applies().is_empty());
}

#[test]
fn without_the_kubernetes_ca_it_asks_for_it_or_the_explicit_skip_flag() {
    let h = Harness::start();
    let args: Vec<String> = h.args("5s");
    let i = args.iter().position(|a| a == "--kube-ca-file").unwrap();
    let mut args = args;
    args.drain(i..i + 2);
    let (code, _, stderr) = h.run(&args, &["--yes"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("--kube-ca-file FILE"), "{stderr}");
    assert!(stderr.contains("--insecure-skip-readyz-tls-verify"), "{stderr}");
    assert!(h.talos.applies().is_empty());

    let (code, _, stderr) = h.run(&args, &["--yes", "--insecure-skip-readyz-tls-verify"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(h.applied_nodes(), addresses(&["cp-1", "cp-2", "cp-3"]));
}

#[test]
fn a_talosconfig_without_the_os_admin_role_is_refused_by_the_node_and_stops_at_the_first() {
    let h = Harness::start_with_role("os:reader");
    let (code, stdout, stderr) = h.run(&h.args("5s"), &["--yes"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stderr.contains("PermissionDenied: not authorized"), "{stderr}");
    assert!(
        stderr.contains("needs a talosconfig whose certificate has the role os:admin"),
        "{stderr}"
    );
    assert!(stderr.contains("Not touched: cp-2, cp-3."), "{stderr}");
    assert_eq!(h.applied_nodes(), addresses(&["cp-1"]));
    assert_eq!(h.node_states(), ["cp-1=Failed", "cp-2=Pending", "cp-3=Pending"]);
}

#[test]
fn adopting_a_node_whose_document_trusts_a_hand_configured_idp_is_refused_before_any_node_is_touched() {
    let h = Harness::start();
    // cp-2 has never had Ichor's document applied, and trusts Dex by hand.
    let machines = std::fs::read_to_string(h.path("manifests/machines.yaml")).unwrap();
    let cp2 = "name: cp-2\n";
    let start = machines.find(cp2).unwrap();
    let status = start + machines[start..].find("status:\n").unwrap();
    let end = status + machines[status..].find("---").unwrap();
    let machines = format!("{}{}", &machines[..status], &machines[end..]);
    std::fs::write(h.path("manifests/machines.yaml"), machines).unwrap();
    std::fs::write(
        h.path("machineconfigs/cp-2.yaml"),
        format!(
            "{MAIN_DOC}---\napiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfiguration:\n  \
             apiVersion: apiserver.config.k8s.io/v1beta1\n  kind: AuthenticationConfiguration\n  jwt:\n  \
             - issuer: {{url: https://dex.example.com, audiences: [kubernetes]}}\n    \
             claimMappings: {{username: {{claim: email}}}}\n"
        ),
    )
    .unwrap();
    let (code, _, stderr) = h.run(&h.args("5s"), &["--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(
            "cp-2.yaml: document 2 (KubeAuthenticationConfig) already trusts https://dex.example.com"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("spec.authentication.external"), "{stderr}");
    assert!(stderr.contains("nothing applied"), "{stderr}");
    assert!(h.talos.applies().is_empty());
}
