//! The differential test of our `ValidateAuthenticationConfiguration` port against the real
//! kube-apiserver's: the same files go through `ichor_renderers::authn::{parse, validate}` (what
//! `ichor authn validate` runs) and through `authn-validate` (hack/kube/apiserver/validate:
//! k8s.io/apiserver's strict decoder and validator, built by hack/kube/build.sh), in one run of
//! the Go binary over every case.
//!
//! The cases are every golden `AuthenticationConfiguration` (each `configuration` in
//! golden/tests/it/snapshots/it__render__*.snap and renderers/src/authn/snapshots/*.snap), the renderer's
//! own output for every fixture shape (valid or not), a list of hand-picked edge files, and
//! [`cases::GENERATED`] configurations drawn with a fixed seed from a strategy biased to the edges
//! of every rule (see `apiserver_validator/cases.rs`), each written as YAML or JSON.
//!
//! Per case the two must agree on:
//! - whether the file decodes (the texts of decode errors differ by design: ours names the file
//!   and the field path, Go prints its decoder's error);
//! - for a decoded file, the verdict, and the errors in order, each by path and by its full
//!   message (our `FieldError::to_string()` against Go's `err.Error()`).
//!
//! One class is compared on verdict and path only: the text of a CEL syntax error. cel-go's
//! comes from its ANTLR parser and error recovery (`mismatched input '<EOF>' expecting {'[',
//! '{', '(', ...}`, `extraneous input ...`, a second error after the recovery); our port has
//! its own recursive-descent parser (`ichor_renderers::authn::celparse`), which finds the same
//! faults but words them its own way. CEL type-check errors (undeclared references, undefined
//! fields, no matching overload, a comprehension over `any`, `must evaluate to bool`) are
//! compared in full.
//!
//! On failure it prints a summary: the number of cases, of agreements, and each class of
//! disagreement with its first examples.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cases;

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Write},
    path::Path,
    process::{Command, Stdio},
};

use cases::Case;
use ichor_renderers::authn::{self, ValidationOptions};
use ichor_testkit::consumers::{KubeBinary, require};
use serde::Deserialize;

/// One validator's answer for one case.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    /// Why the file did not decode, if it did not.
    decode_error: Option<String>,
    /// `(path, full message)` in emission order.
    errors: Vec<(String, String)>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GoAnswer {
    id: String,
    decode_error: Option<String>,
    errors: Vec<GoError>,
}

#[derive(Deserialize)]
struct GoError {
    path: String,
    message: String,
}

fn ours(case: &Case) -> Outcome {
    match authn::parse(case.text.as_bytes(), "config") {
        Err(e) => Outcome {
            decode_error: Some(e.to_string()),
            errors: vec![],
        },
        Ok(cfg) => {
            let options = ValidationOptions {
                disallowed_issuers: case.disallowed.clone(),
            };
            Outcome {
                decode_error: None,
                errors: authn::validate(&cfg, &options)
                    .iter()
                    .map(|e| (e.path.clone(), e.to_string()))
                    .collect(),
            }
        }
    }
}

/// Runs every case through one invocation of the Go validator.
fn theirs(binary: &Path, all: &[Case]) -> Vec<Outcome> {
    let mut child = Command::new(binary)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("authn-validate starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let input: Vec<u8> = all
        .iter()
        .flat_map(|c| {
            let mut line = serde_json::to_vec(&serde_json::json!({
                "id": c.id, "disallowedIssuers": c.disallowed, "config": c.text,
            }))
            .expect("a case serialises");
            line.push(b'\n');
            line
        })
        .collect();
    let writer = std::thread::spawn(move || {
        stdin.write_all(&input).expect("authn-validate reads its cases");
    });
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let answers: Vec<GoAnswer> = stdout
        .lines()
        .map(|l| serde_json::from_str(&l.expect("a line")).expect("an answer"))
        .collect();
    writer.join().expect("the writer thread");
    assert!(child.wait().expect("authn-validate exits").success());
    assert_eq!(answers.len(), all.len(), "one answer per case");
    answers
        .into_iter()
        .zip(all)
        .map(|(a, c)| {
            assert_eq!(a.id, c.id, "answers come in order");
            Outcome {
                decode_error: a.decode_error,
                errors: a.errors.into_iter().map(|e| (e.path, e.message)).collect(),
            }
        })
        .collect()
}

/// Whether a Go message is a CEL syntax error, whose text our port words its own way.
fn is_cel_syntax_error(message: &str) -> bool {
    message.contains("compilation failed: ERROR: <input>:") && message.contains(": Syntax error: ")
}

/// How one case compares; `None` when the two agree.
fn disagreement(our: &Outcome, go: &Outcome) -> Option<&'static str> {
    match (&our.decode_error, &go.decode_error) {
        (None, Some(_)) => return Some("decode: ours accepts a file Go refuses"),
        (Some(_), None) => return Some("decode: ours refuses a file Go decodes"),
        (Some(_), Some(_)) => return None,
        (None, None) => {}
    }
    match (our.errors.is_empty(), go.errors.is_empty()) {
        (true, false) => return Some("verdict: ours valid, Go invalid"),
        (false, true) => return Some("verdict: ours invalid, Go valid"),
        _ => {}
    }
    let paths = |o: &Outcome| {
        let mut p: Vec<String> = o.errors.iter().map(|e| e.0.clone()).collect();
        p.sort();
        p
    };
    if paths(our) != paths(go) {
        return Some("paths: a different multiset of error paths");
    }
    let in_order_paths = |o: &Outcome| o.errors.iter().map(|e| e.0.clone()).collect::<Vec<_>>();
    if in_order_paths(our) != in_order_paths(go) {
        return Some("order: the same paths in another order");
    }
    let exact = our
        .errors
        .iter()
        .zip(&go.errors)
        .all(|(o, g)| o.1 == g.1 || is_cel_syntax_error(&g.1) && is_cel_syntax_error(&o.1));
    (!exact).then_some("messages: the same paths, different texts")
}

#[test]
#[ignore = "needs the apiserver's validator: hack/kube/build.sh"]
fn our_validator_agrees_with_the_kube_apiservers() {
    let Some(binary) = require(KubeBinary::AuthnValidate) else {
        return;
    };
    let started = std::time::Instant::now();
    let all = cases::all();
    assert!(all.len() >= cases::GENERATED, "{} cases", all.len());
    let go = theirs(&binary, &all);

    let mut classes: BTreeMap<&'static str, Vec<usize>> = BTreeMap::new();
    let mut cel_worded = 0;
    for (i, (case, g)) in all.iter().zip(&go).enumerate() {
        let o = ours(case);
        match disagreement(&o, g) {
            Some(class) => classes.entry(class).or_default().push(i),
            None => cel_worded += usize::from(o.errors != g.errors && g.decode_error.is_none()),
        }
    }
    let disagreeing: usize = classes.values().map(Vec::len).sum();
    // Every error text only one side printed, over all disagreeing cases.
    let mut one_sided: BTreeMap<String, usize> = BTreeMap::new();
    for &i in classes.values().flatten() {
        let (o, g) = (ours(&all[i]), &go[i]);
        for (side, a, b) in [("ours", &o, g), ("go  ", g, &o)] {
            for e in a.errors.iter().filter(|e| !b.errors.contains(e)) {
                *one_sided.entry(format!("{side}: {}", e.1)).or_default() += 1;
            }
        }
    }
    let mut summary = format!(
        "{} cases ({} golden and edge files, {} generated), {} agree, {} disagree; {} agree up to the wording of a CEL syntax error; {:.1} s\n",
        all.len(),
        all.len() - cases::GENERATED,
        cases::GENERATED,
        all.len() - disagreeing,
        disagreeing,
        cel_worded,
        started.elapsed().as_secs_f64(),
    );
    for (class, ids) in &classes {
        summary.push_str(&format!("\n== {class}: {} cases\n", ids.len()));
        for &i in ids.iter().take(3) {
            summary.push_str(&format!(
                "-- case {} (disallowed {:?})\n{}\n   ours: {:#?}\n   go:   {:#?}\n",
                all[i].id,
                all[i].disallowed,
                all[i].text,
                ours(&all[i]),
                go[i]
            ));
        }
    }
    summary.push_str("\n== error texts only one side printed (count, side, text)\n");
    for (text, n) in one_sided.iter().take(80) {
        summary.push_str(&format!("{n:4} {text}\n"));
    }
    eprintln!("{summary}");
    assert!(classes.is_empty(), "{summary}");
}
