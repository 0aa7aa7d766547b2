//! The journal of an offline rollout: the controller's replay reads it and decides what the run
//! did, from the same rendered document as `ichor render --dir`.

use ichor_controller_core::identity::{Controller, ReplayLine, replay};
use ichor_graph::{Action, JournalReader};

use super::*;

/// The journal the last run wrote.
fn journal(h: &Harness) -> PathBuf {
    let dir = h.path("manifests/.ichor/journal");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.pop().expect("a journal was written")
}

#[test]
fn the_journal_of_a_rollout_that_rolls_a_node_back_replays_to_the_same_decisions() {
    let h = Harness::start();
    h.cp2_back_only_after_the_rollback();
    let (code, stdout, stderr) = h.run(&h.args("1500ms"), &["--yes"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    let path = journal(&h);
    assert!(
        stderr.contains(&format!("Journal: {}", path.display())),
        "{stderr}"
    );

    let file = std::io::BufReader::new(std::fs::File::open(&path).unwrap());
    let mut controller = Controller::new().unwrap();
    let report = replay(JournalReader::new(file), &mut controller).expect("the journal replays");
    assert_eq!(report.failures, 0, "{report}");

    // The Talos calls the replay decides are the ones the run made, in its order.
    let steps: Vec<String> = report
        .lines
        .iter()
        .filter_map(|(_, line)| match line {
            ReplayLine::Action(Action::Effect { request, .. })
                if request.id.starts_with("rollout-apply ")
                    || request.id.starts_with("rollout-rollback ") =>
            {
                Some(request.id.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        steps,
        [
            "rollout-apply ichor-system/config-prod 0 cp-1",
            "rollout-apply ichor-system/config-prod 1 cp-2",
            "rollout-rollback ichor-system/config-prod 1 cp-2",
        ],
        "{report}"
    );
    assert_eq!(
        h.applied_nodes(),
        addresses(&["cp-1", "cp-2", "cp-2"]),
        "the run made those calls"
    );

    // The document the graph applies is the one `ichor render --dir` renders.
    let rendered = h.rendered_document();
    let documents: Vec<String> = report
        .lines
        .iter()
        .filter_map(|(_, line)| match line {
            ReplayLine::Action(Action::Effect { request, .. })
                if request.id.starts_with("rollout-apply ") =>
            {
                request.request["document"].as_str().map(str::to_owned)
            }
            _ => None,
        })
        .collect();
    assert_eq!(documents.len(), 2);
    for d in documents {
        assert_eq!(d, rendered);
    }

    // Its last decision about the operation is the failure the record holds.
    let last_status = report
        .lines
        .iter()
        .rev()
        .find_map(|(_, line)| match line {
            ReplayLine::Action(Action::Apply { object, .. }) if &*object.kind == "TalosOperation" => {
                Some(object.value["status"].clone())
            }
            _ => None,
        })
        .expect("a status write");
    assert_eq!(last_status["phase"], "Failed");
    assert_eq!(last_status["nodes"][1]["state"], "RolledBack");
    assert_eq!(h.operation()["status"]["phase"], "Failed");
    assert_eq!(h.node_states(), ["cp-1=Done", "cp-2=RolledBack", "cp-3=Pending"]);
}
