//! Every rendered `KubeAuthenticationConfig` through Talos's own configuration loader and
//! validator: `ichor-talos-probe validate` (hack/talos/probe, on
//! `github.com/siderolabs/talos/pkg/machinery`, the library `talosctl` is built on), each document
//! merged into a Talos v1.14 control-plane machine configuration exactly as the controller merges
//! it (`ichor_talos::machine_config::replace_document`) — so a document Talos would refuse can
//! never be rendered unnoticed.
//!
//! The documents: the renderer's output for every fixture shape that renders
//! (`ClusterReport::yaml`, the text the controller applies), and every `KubeAuthenticationConfig`
//! in the golden snapshots (`golden/tests/it/snapshots`, `renderers/src/authn/snapshots`), written
//! again through the typed document (`KubeAuthenticationConfig::to_yaml`) as the renderer writes
//! it. The machine configuration is made by machinery's generator (`talosctl gen config` for the
//! v1.14 contract, which writes a default `KubeAuthenticationConfig` the merge replaces).
//!
//! Validation is machinery's client-side validation in the `metal` runtime mode (an installed
//! machine on bare metal, the platform of a real control plane; client-side reads no hardware),
//! strict (a warning is an error). The check can fail, and the test shows it: the same document
//! in a worker's configuration (Talos allows it on control planes only), and a document with a
//! field Talos does not know, are refused.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use ichor_golden::{fixture, shapes};
use ichor_renderers::{authn::KubeAuthenticationConfig, cluster::render_manifests};
use ichor_server::manifest_files::load_dir;
use ichor_talos::machine_config::{Merge, replace_document};
use ichor_testkit::consumers::require_talos_probe;

const KIND: &str = "KubeAuthenticationConfig";

/// The renderer's document for every cluster of every fixture shape that renders one.
fn rendered() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for shape in shapes() {
        let Ok(manifests) = load_dir(&fixture(&shape)) else {
            continue;
        };
        for cluster in render_manifests(&manifests).clusters {
            if let Some(yaml) = cluster.yaml {
                out.push((format!("render:{shape}:{}", cluster.cluster), yaml));
            }
        }
    }
    out
}

/// Every mapping under `v` that is a whole `KubeAuthenticationConfig` document.
fn documents_in(v: &serde_yaml::Value, out: &mut Vec<serde_yaml::Value>) {
    match v {
        serde_yaml::Value::Mapping(m) => {
            if v.get("kind").and_then(serde_yaml::Value::as_str) == Some(KIND)
                && v.get("configuration").is_some()
            {
                out.push(v.clone());
                return;
            }
            m.values().for_each(|x| documents_in(x, out));
        }
        serde_yaml::Value::Sequence(s) => s.iter().for_each(|x| documents_in(x, out)),
        _ => {}
    }
}

/// Every `KubeAuthenticationConfig` in the golden snapshots, as the renderer writes it.
fn snapshotted() -> Vec<(String, String)> {
    let bodies = crate::snapshot_bodies::snapshot_bodies::<serde_yaml::Value>(|name| {
        name.ends_with(".snap") && !name.ends_with(".txt.snap")
    });
    let mut out = Vec::new();
    for (name, value) in bodies {
        let mut found = Vec::new();
        documents_in(&value, &mut found);
        for (k, doc) in found.into_iter().enumerate() {
            let typed: KubeAuthenticationConfig = serde_yaml::from_value(doc)
                .unwrap_or_else(|e| panic!("{name}: document {k} is not the renderer's {KIND}: {e}"));
            out.push((
                format!("golden:{name}:{k}"),
                typed.to_yaml().expect("the document serialises"),
            ));
        }
    }
    out
}

fn probe(binary: &Path, args: &[&str]) -> Output {
    Command::new(binary)
        .args(args)
        .output()
        .expect("ichor-talos-probe runs")
}

fn generate(binary: &Path, machine_type: &str) -> String {
    let out = probe(binary, &["generate", "--type", machine_type]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// `validate --mode metal --strict` over `files`: its success, and stdout and stderr.
fn validate(binary: &Path, files: &[PathBuf]) -> (bool, String) {
    let mut args = vec!["validate", "--mode", "metal", "--strict"];
    args.extend(files.iter().map(|f| f.to_str().expect("a UTF-8 path")));
    let out = probe(binary, &args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
#[ignore = "needs ichor-talos-probe: hack/talos/build.sh"]
fn every_rendered_document_in_a_talos_control_plane_configuration_passes_talos_validation() {
    let Some(binary) = require_talos_probe() else {
        return;
    };
    let rendered = rendered();
    let snapshotted = snapshotted();
    assert!(rendered.len() >= 4, "the fixtures' documents: {rendered:?}");
    assert!(
        snapshotted.len() >= 8,
        "the snapshots' documents: {snapshotted:?}"
    );
    // One file per distinct text, named by every source that rendered it.
    let mut documents: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, text) in rendered.into_iter().chain(snapshotted) {
        documents.entry(text).or_default().push(name);
    }

    let sample = documents.keys().next().cloned().expect("a document");

    let dir = tempfile::tempdir().unwrap();
    let controlplane = generate(&binary, "controlplane");
    let base = dir.path().join("generated-controlplane.yaml");
    std::fs::write(&base, &controlplane).unwrap();
    let mut files = vec![base];
    let mut sources = vec![vec!["talosctl gen config".to_owned()]];
    for (i, (text, names)) in documents.into_iter().enumerate() {
        let (merged, merge) = replace_document("generated", &controlplane, KIND, &text, false)
            .unwrap_or_else(|e| panic!("{names:?}: {e}"));
        assert_eq!(
            merge,
            Merge::Replaced,
            "the generated configuration has a default {KIND}"
        );
        let file = dir.path().join(format!("document-{i}.yaml"));
        std::fs::write(&file, merged).unwrap();
        files.push(file);
        sources.push(names);
    }
    let (ok, out) = validate(&binary, &files);
    let legend: Vec<String> = files
        .iter()
        .zip(&sources)
        .map(|(f, s)| format!("{}: {}", f.file_name().unwrap().to_string_lossy(), s.join(", ")))
        .collect();
    assert!(
        ok,
        "Talos refuses a rendered document:\n{out}\n{}",
        legend.join("\n")
    );
    assert_eq!(
        out.lines().filter(|l| l.ends_with(": ok")).count(),
        files.len(),
        "every file passes without a warning:\n{out}"
    );

    // The check can fail: the document on a worker, and a field Talos does not know.
    let worker = generate(&binary, "worker");
    let (on_worker, merge) = replace_document("generated worker", &worker, KIND, &sample, false).unwrap();
    assert_eq!(merge, Merge::Appended, "a worker has no {KIND}");
    let unknown = format!("{sample}unknownField: true\n");
    let (with_unknown, _) = replace_document("generated", &controlplane, KIND, &unknown, false).unwrap();
    for (case, text, expected) in [
        ("on a worker", on_worker, "only allowed on control plane machines"),
        ("an unknown field", with_unknown, "unknownField"),
    ] {
        let file = dir.path().join("refused.yaml");
        std::fs::write(&file, text).unwrap();
        let (ok, out) = validate(&binary, &[file]);
        assert!(
            !ok && out.contains(expected),
            "{case}: Talos must refuse it:\n{out}"
        );
    }
}
