//! A record planted in the manifests tree (which may come from a repository others commit to)
//! cannot steer a resumed offline rollout: neither where a node's step goes, nor what a rollback
//! puts back, nor that a node waits for `/readyz` without an apply.

use super::harness::{Harness, addresses};

const PLANTED: &str = "apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfig:\n  jwt:\n  - issuer:\n      url: https://attacker.example\n---\napiVersion: v1alpha1\nkind: TrustedRootsConfig\nname: attacker\n";

#[test]
fn a_planted_record_neither_chooses_the_node_nor_what_a_rollback_applies() {
    let h = Harness::start();
    h.refuse_cp2_apply();
    let (code, stdout, stderr) = h.run(&h.args("5s"), &["--yes"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert_eq!(h.node_states(), ["cp-1=Done", "cp-2=Failed", "cp-3=Pending"]);

    // The planter's edit: cp-2 "applied" long ago at cp-3's address, already seen down, with
    // their own document (and a second one after `---`) as what it ran before.
    let path = h.path("manifests/.ichor/operations/prod.yaml");
    let mut record: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let node = &mut record["status"]["nodes"][1];
    node["state"] = "WaitingReady".into();
    node["address"] = addresses(&["cp-3"])[0].clone().into();
    node["appliedAt"] = "2000-01-01T00:00:00Z".into();
    node["sawNotReady"] = true.into();
    let mut previous = serde_yaml::Mapping::new();
    previous.insert("yaml".into(), PLANTED.into());
    previous.insert("sha256".into(), "0".repeat(64).into());
    node["previousDocument"] = previous.into();
    record["status"]["phase"] = "Running".into();
    std::fs::write(&path, serde_yaml::to_string(&record).unwrap()).unwrap();

    // The apiserver of cp-2 never comes back: the resumed step is rolled back, but only to what
    // this run read from cp-2 itself.
    h.talos.clear_failures();
    *h.apiservers[1].never_back.lock().unwrap() = true;
    let (code, stdout, stderr) = h.run(&h.args("1500ms"), &["--yes"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stdout.contains("Resuming the operation"), "{stdout}");
    let applies = h.talos.applies();
    let resumed = &applies[2..];
    assert_eq!(
        resumed.iter().map(|a| a.node.clone()).collect::<Vec<_>>(),
        addresses(&["cp-2", "cp-2"]),
        "cp-2's apply and its rollback go to cp-2's address from the manifests, cp-3 is untouched"
    );
    for a in &applies {
        let sent = a.data_text();
        assert!(
            !sent.contains("attacker"),
            "a planted document reached {}: {sent}",
            a.node
        );
    }
    assert!(
        resumed[0].data_text().contains(&h.rendered_document()),
        "the resumed apply carries the rendered document"
    );
    assert_eq!(h.node_states()[2], "cp-3=Pending");
    let cp2 = &h.operation()["status"]["nodes"][1];
    let recorded = cp2["previousDocument"]["yaml"].as_str().unwrap_or_default();
    assert!(
        !recorded.contains("attacker"),
        "the run records what cp-2 ran: {cp2:?}"
    );
}
