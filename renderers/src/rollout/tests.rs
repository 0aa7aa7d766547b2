use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde_json::json;

use super::*;
use crate::crd::{REASON_APISERVER_RESTART_REQUIRED, TalosMachineSpec, TalosMachineStatus};

const AUTH: &str = "KubeAuthenticationConfig";

fn desired() -> BTreeMap<String, String> {
    BTreeMap::from([(AUTH.to_owned(), "new".to_owned())])
}

fn machine(
    name: &str,
    cluster: &str,
    role: MachineRole,
    address: &str,
    applied: &[(&str, &str)],
) -> TalosMachine {
    let mut m = TalosMachine::new(
        name,
        TalosMachineSpec {
            cluster: cluster.to_owned(),
            role,
            address: address.to_owned(),
        },
    );
    m.metadata.namespace = Some("ichor-system".to_owned());
    if !applied.is_empty() {
        m.status = Some(TalosMachineStatus {
            applied_document_hashes: applied
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..Default::default()
        });
    }
    m
}

fn cp(name: &str, address: &str, auth_hash: &str) -> TalosMachine {
    machine(
        name,
        "prod",
        MachineRole::ControlPlane,
        address,
        &[(AUTH, auth_hash), ("v1alpha1", "main")],
    )
}

fn worker(name: &str, address: &str) -> TalosMachine {
    machine(name, "prod", MachineRole::Worker, address, &[("v1alpha1", "w")])
}

fn snapshot(plan: &RolloutPlan) -> serde_json::Value {
    json!({"plan": plan, "text": plan.to_string().lines().collect::<Vec<_>>()})
}

#[test]
fn one_control_plane_plan_warns_that_the_api_is_unavailable() {
    let p = plan("prod", &[cp("cp-1", "10.0.0.11", "old")], &desired()).unwrap();
    assert_eq!(
        p.summary,
        "Restarts the Kubernetes API server on each control plane, one at a time; no reboot."
    );
    assert_eq!(p.warnings, vec![SINGLE_CONTROL_PLANE_WARNING.to_owned()]);
    assert_eq!(p.steps[0].readyz_url, "https://10.0.0.11:6443/readyz");
    insta::assert_yaml_snapshot!(snapshot(&p));
}

#[test]
fn three_control_planes_are_restarted_in_name_order_and_workers_never() {
    let machines = [
        worker("w-1", "10.0.0.21"),
        cp("cp-3", "10.0.0.13", "old"),
        cp("cp-1", "10.0.0.11", "old"),
        worker("w-2", "10.0.0.22"),
        cp("cp-2", "10.0.0.12", "old"),
    ];
    let p = plan("prod", &machines, &desired()).unwrap();
    let names: Vec<&str> = p.steps.iter().map(|s| s.machine.as_str()).collect();
    assert_eq!(names, ["cp-1", "cp-2", "cp-3"]);
    assert!(
        p.warnings.is_empty(),
        "three control planes keep the API available"
    );
    assert_eq!(p.control_planes, 3);
    insta::assert_yaml_snapshot!(snapshot(&p));
}

#[test]
fn a_cluster_whose_control_planes_run_the_rendered_configuration_has_nothing_to_do() {
    let machines = [cp("cp-1", "10.0.0.11", "new"), worker("w-1", "10.0.0.21")];
    let p = plan("prod", &machines, &desired()).unwrap();
    assert!(p.is_empty());
    assert!(p.warnings.is_empty(), "no warning when nothing restarts");
    insta::assert_yaml_snapshot!(snapshot(&p));
}

#[test]
fn a_machine_that_never_applied_anything_is_restarted() {
    let machines = [
        machine(
            "cp-1",
            "prod",
            MachineRole::ControlPlane,
            "cp-1.prod.example.com",
            &[],
        ),
        cp("cp-2", "10.0.0.12", "new"),
        cp("cp-3", "fd00::13", "new"),
    ];
    let p = plan("prod", &machines, &desired()).unwrap();
    assert_eq!(p.steps.len(), 1);
    assert!(p.steps[0].never_applied);
    insta::assert_yaml_snapshot!(snapshot(&p));
}

#[test]
fn only_the_named_cluster_is_planned() {
    let machines = [
        cp("cp-1", "10.0.0.11", "old"),
        machine(
            "other-cp",
            "staging",
            MachineRole::ControlPlane,
            "10.1.0.11",
            &[(AUTH, "old")],
        ),
    ];
    let p = plan("prod", &machines, &desired()).unwrap();
    assert_eq!(p.steps.len(), 1);
    assert_eq!(p.control_planes, 1);
}

#[test]
fn documents_the_caller_does_not_render_are_not_compared() {
    // The machine also reports HostnameConfig; it is another subsystem's, so no reboot refusal.
    let m = machine(
        "cp-1",
        "prod",
        MachineRole::ControlPlane,
        "10.0.0.11",
        &[(AUTH, "old"), ("HostnameConfig", "h")],
    );
    let p = plan("prod", &[m], &desired()).unwrap();
    assert_eq!(p.steps[0].documents, vec![AUTH.to_owned()]);
}

#[test]
fn a_reboot_required_change_is_refused() {
    let mut want = desired();
    want.insert("v1alpha1".to_owned(), "changed".to_owned());
    let err = plan(
        "prod",
        &[cp("cp-2", "10.0.0.12", "old"), cp("cp-1", "10.0.0.11", "new")],
        &want,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cluster prod: control plane cp-1 needs a reboot to apply v1alpha1: an API server restart rollout \
         never reboots a machine, so this plan is refused; roll that change with a reboot-capable config \
         operation first"
    );
}

#[test]
fn a_control_plane_without_a_usable_address_is_refused() {
    for bad in ["", "10.0.0.1:6443", "https://cp-1", "cp 1", "-cp.example.com"] {
        let err = plan("prod", &[cp("cp-1", bad, "old")], &desired()).unwrap_err();
        assert!(matches!(err, RolloutError::InvalidAddress { .. }), "{bad:?}");
        assert!(err.to_string().contains("set spec.address"));
    }
}

#[test]
fn readyz_urls_bracket_ipv6_and_accept_dns_names() {
    assert_eq!(
        readyz_url("fd00::1").as_deref(),
        Some("https://[fd00::1]:6443/readyz")
    );
    assert_eq!(
        readyz_url("CP-1.Example.com").as_deref(),
        Some("https://cp-1.example.com:6443/readyz")
    );
    assert_eq!(readyz_url("cp-1/x"), None);
}

fn with_ready(mut m: TalosMachine, status: &str, reason: &str) -> TalosMachine {
    let cond = Condition {
        type_: "Ready".to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: String::new(),
        last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::UNIX_EPOCH,
        ),
        observed_generation: None,
    };
    m.status
        .get_or_insert_with(Default::default)
        .conditions
        .push(cond);
    m
}

#[test]
fn control_planes_behind_the_rendered_configuration_report_restart_required() {
    let machines = [
        cp("cp-2", "10.0.0.12", "old"),
        cp("cp-1", "10.0.0.11", "new"),
        worker("w-1", "10.0.0.21"),
        with_ready(
            cp("cp-3", "10.0.0.13", "new"),
            "False",
            REASON_APISERVER_RESTART_REQUIRED,
        ),
        with_ready(cp("cp-4", "10.0.0.14", "new"), "False", "SomethingElse"),
    ];
    let got = restart_required(&machines, &desired());
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["cp-2", "cp-3"],
        "cp-1 is up to date, cp-4's reason is not identity's, workers never"
    );
    let (_, required) = &got[0];
    assert!(!required.status);
    assert_eq!(required.reason, "APIServerRestartRequired");
    assert_eq!(
        required.message,
        "KubeAuthenticationConfig changed: the Kubernetes API server must restart to apply it (no reboot); \
         run `ichor config apply` to restart the control planes one at a time"
    );
    let (_, back) = &got[1];
    assert!(back.status);
    assert_eq!(back.reason, REASON_CONFIGURATION_APPLIED);

    let cond = required.to_condition(jiff::Timestamp::UNIX_EPOCH, Some(3));
    assert_eq!((cond.type_.as_str(), cond.status.as_str()), ("Ready", "False"));
    assert_eq!(cond.observed_generation, Some(3));
}
