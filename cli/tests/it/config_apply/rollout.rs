//! The rollout: one control plane at a time in plan order waiting for each `/readyz`, stopping at a node that fails or never comes back, and resuming there.

use super::*;

#[test]
fn applies_to_one_control_plane_at_a_time_in_plan_order_waiting_for_each_readyz() {
    let h = Harness::start();
    let (code, stdout, stderr) = h.run(&h.args("5s"), &["--yes"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");

    assert_eq!(h.applied_nodes(), addresses(&["cp-1", "cp-2", "cp-3"]));
    assert_eq!(h.version_nodes(), addresses(&["cp-1", "cp-2", "cp-3"]));
    let applies = h.talos.applies();
    let rendered = h.rendered_document();
    for a in &applies {
        assert_eq!(
            a.mode,
            Some(Mode::NoReboot as i32),
            "mode NO_REBOOT, never REBOOT (0)"
        );
        assert_eq!(
            a.organizations,
            ["os:admin"],
            "the talosconfig's admin certificate was presented"
        );
        assert_eq!(
            a.data_text(),
            format!("{MAIN_DOC}---\n{rendered}---\n{HOSTNAME_DOC}"),
            "the full configuration with only the KubeAuthenticationConfig document replaced"
        );
        assert!(!a.data_text().contains("old-trust"));
    }
    // The next apply happens only after the previous node's /readyz was back.
    for i in 0..2 {
        let back = h.apiservers[i]
            .came_back_at
            .lock()
            .unwrap()
            .expect("readyz came back");
        assert!(
            applies[i].at + DOWN_FOR <= back,
            "node {i} was waited for while down"
        );
        assert!(
            back <= applies[i + 1].at,
            "node {} was applied before node {i} was ready",
            i + 1
        );
    }

    assert!(
        stdout
            .contains("Restarts the Kubernetes API server on each control plane, one at a time; no reboot.")
    );
    assert!(stdout.contains("1. cp-1 (127.0.0.1)"), "{stdout}");
    for line in [
        "[1/3] cp-1: Talos v1.14.3",
        "[1/3] cp-1: applied: Applied configuration without a reboot",
        "[1/3] cp-1: /readyz not ready: HTTP 503",
        "[1/3] cp-1: the API server restarted and is ready",
        "[3/3] cp-3: done in ",
        "Done: 3 control plane(s) of prod run the rendered configuration.",
    ] {
        assert!(stderr.contains(line), "missing {line:?} in:\n{stderr}");
    }
    assert_eq!(h.node_states(), ["cp-1=Done", "cp-2=Done", "cp-3=Done"]);
    assert_eq!(h.operation()["status"]["phase"], "Succeeded");
    assert_eq!(h.operation()["spec"]["kind"], "config");

    // The manifests still show the old hashes (a GitOps tree lags); the record says it is done.
    let (code, _, again) = h.run(&h.args("5s"), &["--yes"]);
    assert_eq!(code, 0, "{again}");
    assert!(again.contains("already applied this render"), "{again}");
    assert_eq!(h.talos.applies().len(), 3, "nothing applied again");
    eprintln!("--- progress as printed ---\n{stderr}");
}

#[test]
fn a_node_whose_readyz_never_returns_stops_the_rollout_and_a_rerun_resumes_there() {
    let h = Harness::start();
    *h.apiservers[1].never_back.lock().unwrap() = true;
    let started = Instant::now();
    let (code, stdout, stderr) = h.run(&h.args("1500ms"), &["--yes"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the node timeout bounds the wait"
    );
    assert_eq!(
        h.applied_nodes(),
        addresses(&["cp-1", "cp-2", "cp-2"]),
        "cp-2 rolled back, cp-3 untouched"
    );
    assert_eq!(
        h.talos.applies()[2].data_text(),
        format!("{MAIN_DOC}---\n{OLD_AUTH_DOC}---\n{HOSTNAME_DOC}"),
        "the rollback put back the document cp-2 ran before"
    );
    assert!(
        stderr.contains(
            "[2/3] cp-2: FAILED: /readyz of cp-2 did not come back within 1.5s of the apply (last: HTTP 503)"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "the previous document was re-applied but /readyz did not come back within 1.5s either"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("Not touched: cp-3."), "{stderr}");
    assert!(
        stderr.contains("--resume"),
        "the message says how to resume:\n{stderr}"
    );
    assert_eq!(h.node_states(), ["cp-1=Done", "cp-2=Failed", "cp-3=Pending"]);
    assert_eq!(h.operation()["status"]["phase"], "Failed");
    assert_eq!(h.operation()["status"]["currentStep"], 1);

    // The apiserver is fixed; a plain re-run for the same render offers to resume (--yes takes it).
    *h.apiservers[1].never_back.lock().unwrap() = false;
    *h.apiservers[1].down.lock().unwrap() = None;
    let (code, stdout, stderr) = h.run(&h.args("5s"), &["--yes"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("Resuming the operation"), "{stdout}");
    assert!(stderr.contains("[1/3] cp-1: done earlier; skipped"), "{stderr}");
    assert_eq!(
        h.applied_nodes(),
        addresses(&["cp-1", "cp-2", "cp-2", "cp-2", "cp-3"]),
        "cp-1 is not applied again"
    );
    assert_eq!(h.node_states(), ["cp-1=Done", "cp-2=Done", "cp-3=Done"]);
}

#[test]
fn a_node_that_does_not_come_back_is_rolled_back_and_the_operation_fails() {
    let h = Harness::start();
    h.cp2_back_only_after_the_rollback();
    let (code, stdout, stderr) = h.run(&h.args("1500ms"), &["--yes"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert_eq!(
        h.applied_nodes(),
        addresses(&["cp-1", "cp-2", "cp-2"]),
        "cp-2 rolled back, cp-3 untouched"
    );
    let applies = h.talos.applies();
    assert_eq!(
        applies[1].mode,
        Some(Mode::NoReboot as i32),
        "the rollback is applied without a reboot too"
    );
    assert_eq!(
        applies[2].data_text(),
        format!("{MAIN_DOC}---\n{OLD_AUTH_DOC}---\n{HOSTNAME_DOC}"),
        "the rollback put back the document cp-2 ran before"
    );
    for line in [
        "[2/3] cp-2: /readyz of cp-2 did not come back within 1.5s of the apply (last: HTTP 503) (--node-timeout); rolling back",
        "[2/3] cp-2: rolled back: Applied configuration without a reboot",
        "[2/3] cp-2: /readyz ready again after the rollback",
        "the previous document was re-applied and the API server is ready again",
        "Not touched: cp-3.",
    ] {
        assert!(stderr.contains(line), "missing {line:?} in:\n{stderr}");
    }
    assert_eq!(h.node_states(), ["cp-1=Done", "cp-2=RolledBack", "cp-3=Pending"]);
    let op = h.operation();
    assert_eq!(op["status"]["phase"], "Failed");
    assert_eq!(op["status"]["currentStep"], 1);
    let cp2 = &op["status"]["nodes"][1];
    assert!(cp2["rolledBackAt"].is_string(), "{cp2:?}");
    assert!(
        cp2["previousDocument"]["yaml"]
            .as_str()
            .unwrap()
            .contains("old-trust"),
        "the document it ran before is recorded: {cp2:?}"
    );
}

#[test]
fn a_failed_apply_stops_before_later_nodes_and_resume_continues_at_the_failed_node() {
    let h = Harness::start();
    h.refuse_cp2_apply();
    let (code, stdout, stderr) = h.run(&h.args("5s"), &["--yes"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert_eq!(h.applied_nodes(), addresses(&["cp-1", "cp-2"]));
    assert!(stderr.contains("InvalidArgument: 1 error occurred"), "{stderr}");
    assert!(
        stderr.contains("check the file in --machine-config-dir"),
        "{stderr}"
    );
    assert!(stderr.contains("Not touched: cp-3."), "{stderr}");
    assert_eq!(
        *h.apiservers[2].hits.lock().unwrap(),
        0,
        "cp-3's apiserver was not even probed"
    );
    assert_eq!(h.node_states(), ["cp-1=Done", "cp-2=Failed", "cp-3=Pending"]);
    let message = h.operation()["status"]["message"].as_str().unwrap().to_owned();
    assert!(message.starts_with("stopped at cp-2: "), "{message}");

    h.talos.clear_failures();
    let (code, stdout, stderr) = h.run(&h.args("5s"), &["--yes", "--resume"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(h.applied_nodes(), addresses(&["cp-1", "cp-2", "cp-2", "cp-3"]));
    assert_eq!(h.node_states(), ["cp-1=Done", "cp-2=Done", "cp-3=Done"]);
    assert_eq!(h.operation()["status"]["phase"], "Succeeded");

    // Nothing left to resume.
    let (code, _, stderr) = h.run(&h.args("5s"), &["--yes", "--resume"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("there is no interrupted operation for cluster prod"),
        "{stderr}"
    );
}

#[test]
fn a_readyz_never_seen_down_counts_as_restarted_after_the_restart_grace() {
    let h = Harness::start();
    for a in &h.apiservers {
        *a.no_restart.lock().unwrap() = true;
    }
    let mut args = h.args("5s");
    let i = args.iter().position(|a| a == "--restart-grace").unwrap();
    args[i + 1] = "400ms".to_owned();
    let (code, stdout, stderr) = h.run(&args, &["--yes"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("[1/3] cp-1: /readyz stayed ready for 0.4s: no restart was seen"),
        "{stderr}"
    );
    let applies = h.talos.applies();
    for pair in applies.windows(2) {
        assert!(
            pair[1].at - pair[0].at >= Duration::from_millis(400),
            "each node waited the grace"
        );
    }
    assert_eq!(h.node_states(), ["cp-1=Done", "cp-2=Done", "cp-3=Done"]);
}
