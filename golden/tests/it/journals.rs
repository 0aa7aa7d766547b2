//! Golden journals of the identity graph: each journal in `golden/journals/` is replayed and the
//! report (every action with its reason, every change of a cluster's rendered authentication
//! document) is snapshotted.
//!
//! The journals are committed files, written once by the simulated applier
//! (`ichor_controller_core::sim`): its certificates have random keys, so generating them at test time
//! would change every fingerprint and hash. Committed, a replay is byte-for-byte deterministic and
//! the snapshots are stable. They are written unredacted: the Secrets hold test material only
//! (a public RSA test key, HMAC keys derived from their kid, throw-away certificates). To
//! regenerate after a deliberate change:
//!
//! ```text
//! cargo test -p ichor-golden --test it -- --ignored journals::regenerate_journals
//! INSTA_UPDATE=always cargo test -p ichor-golden --test it journals::
//! ```
//!
//! (`journals::regenerate_per_user_journal` rewrites `per-user-deleted` alone.)

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::PathBuf;

use ichor_controller_core::identity::{Controller, ReplayLine, ReplayReport, replay};
use ichor_controller_core::sim::fixtures::{self, Auth};
use ichor_controller_core::sim::{Sim, SimError};
use ichor_graph::{Event, JournalReader, ObjectKey};
use ichor_renderers::trust::tls::CertFacts;
use jiff::{SignedDuration, Timestamp};

fn journal_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("journals")
        .join(format!("{name}.jsonl"))
}

fn t0() -> Timestamp {
    "2027-01-01T00:00:00Z".parse().unwrap_or(Timestamp::UNIX_EPOCH)
}

fn replayed(name: &str) -> ReplayReport {
    let path = journal_path(name);
    let file = File::open(&path).unwrap_or_else(|e| panic!("journal {}: {e}", path.display()));
    let mut controller = Controller::new().expect("the identity graph builds");
    replay(JournalReader::new(BufReader::new(file)), &mut controller)
        .unwrap_or_else(|e| panic!("journal {name} replays: {e}"))
}

fn action_lines(report: &ReplayReport) -> Vec<String> {
    report
        .lines
        .iter()
        .filter_map(|(_, l)| match l {
            ReplayLine::Action(a) => Some(a.to_string()),
            _ => None,
        })
        .collect()
}

fn render_lines(report: &ReplayReport) -> Vec<String> {
    report
        .lines
        .iter()
        .filter_map(|(_, l)| match l {
            ReplayLine::Render(r) => Some(r.to_string()),
            _ => None,
        })
        .collect()
}

/// The lines decided after the event with this seq (the journal's change under test).
fn after(report: &ReplayReport, seq: u64) -> Vec<String> {
    report
        .lines
        .iter()
        .filter(|(s, _)| *s >= seq)
        .map(|(s, l)| match l {
            ReplayLine::Action(a) => format!("seq {s}: {a}"),
            ReplayLine::Render(r) => format!("seq {s}: {r}"),
            ReplayLine::Failure(f) => format!("seq {s}: failed {f:?}"),
        })
        .collect()
}

fn seq_of_first_line_matching(path: &str, needle: &str) -> u64 {
    let text = std::fs::read_to_string(journal_path(path)).unwrap_or_default();
    text.lines()
        .position(|l| l.contains(needle))
        .map(|i| i as u64 + 1)
        .unwrap_or_else(|| panic!("journal {path} has a line with {needle}"))
}

#[test]
fn fresh_install_issues_trust_material_then_renders_and_marks_the_control_planes() {
    let r = replayed("fresh-install");
    let actions = action_lines(&r);
    for expected in [
        "effect issue-ca new",
        "effect issue-leaf 10.96.0.10 new",
        "effect generate-rsa-key k-20270101-0000",
        "effect generate-hmac-key h-20270101-0000",
        "apply ConfigMap ichor-system/ichor-oidc-trust",
        "apply TalosMachine ichor-system/prod-cp-1",
    ] {
        assert!(
            actions.iter().any(|a| a.starts_with(expected)),
            "missing {expected:?} in {actions:#?}"
        );
    }
    assert!(
        render_lines(&r)
            .iter()
            .any(|l| l.contains("prod: KubeAuthenticationConfig sha256"))
    );
    insta::assert_snapshot!("fresh-install", r.to_string());
}

#[test]
fn a_cluster_ip_change_reissues_the_leaf_and_rerenders_only_ichor_clusters() {
    let r = replayed("clusterip-change");
    let change = seq_of_first_line_matching("clusterip-change", "10.96.0.20");
    assert!(
        r.lines
            .iter()
            .all(|(s, l)| *s >= change || matches!(l, ReplayLine::Render(_))),
        "the settled installation decides nothing before the change (it only renders): {r}"
    );
    let lines = after(&r, change);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("effect issue-leaf 10.96.0.20 replacing"))
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("apply ConfigMap ichor-system/ichor-oidc-trust"))
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("render TalosCluster ichor-system/prod:"))
    );
    assert!(
        !lines.iter().any(|l| l.contains("edge")),
        "the external-only cluster must not change: {lines:#?}"
    );
    assert!(!lines.iter().any(|l| l.contains("issue-ca")));
    insta::assert_snapshot!("clusterip-change", r.to_string());
}

#[test]
fn a_leaf_renewal_at_two_thirds_changes_nothing_beyond_the_leaf() {
    let r = replayed("leaf-renewal");
    let actions = action_lines(&r);
    assert_eq!(actions.len(), 1, "{r}");
    assert!(
        actions[0].starts_with("effect issue-leaf 10.96.0.10 replacing"),
        "{r}"
    );
    assert!(
        render_lines(&r).iter().all(|l| l.contains("(was nothing)")),
        "{r}"
    );
    insta::assert_snapshot!("leaf-renewal", r.to_string());
}

#[test]
fn a_deleted_user_loses_its_credentials_key_and_users_get_their_conditions() {
    let r = replayed("user-deleted");
    let actions = action_lines(&r);
    assert!(
        actions
            .iter()
            .any(|a| a.starts_with("effect remove-credentials-key dave"))
    );
    assert!(!actions.iter().any(|a| a.contains("remove-credentials-key alice")));
    insta::assert_snapshot!("user-deleted", r.to_string());
}

#[test]
fn a_deleted_users_own_secret_goes_after_its_legacy_key_and_another_users_stays() {
    let r = replayed("per-user-deleted");
    let actions = action_lines(&r);
    for user in ["bob", "carol"] {
        assert!(
            actions
                .iter()
                .any(|a| a.starts_with(&format!("effect remove-credentials-key {user}"))),
            "{actions:#?}"
        );
    }
    assert!(!actions.iter().any(|a| a.contains("remove-credentials-key alice")));
    assert!(!actions.iter().any(|a| a.contains("remove-credentials-key erin")));
    // What the simulated applier did, as journaled: bob's legacy key, then his own Secret.
    let text = std::fs::read_to_string(journal_path("per-user-deleted")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let bob_gone = seq_of_first_line_matching(
        "per-user-deleted",
        r#""key":{"kind":"IchorUser","namespace":"ichor-system","name":"bob"}"#,
    );
    let own_gone = seq_of_first_line_matching(
        "per-user-deleted",
        r#""key":{"kind":"Secret","namespace":"ichor-credentials","name":"ichor-user-bob"}"#,
    );
    let legacy_written = lines
        .iter()
        .enumerate()
        .skip(usize::try_from(bob_gone).unwrap_or(usize::MAX))
        .find(|(_, l)| l.contains(r#""name":"ichor-user-credentials""#))
        .map(|(i, _)| i as u64 + 1);
    assert!(
        legacy_written.is_some_and(|l| bob_gone < l && l < own_gone),
        "bob's legacy key goes after his user and before his own Secret: {bob_gone} {legacy_written:?} {own_gone}"
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.contains(r#""type":"deleted""#) && l.contains(r#""name":"ichor-user-erin""#)),
        "erin's own Secret stays"
    );
    insta::assert_snapshot!("per-user-deleted", r.to_string());
}

// ---------------------------------------------------------------------------------------------
// The generator of the journals above (run on purpose; see the module documentation).

type FileSim = Sim<BufWriter<File>>;

fn file_sim(name: &str) -> Result<FileSim, SimError> {
    let f = File::create(journal_path(name)).map_err(|e| SimError::Setup(format!("create journal: {e}")))?;
    Sim::new(BufWriter::new(f))
}

fn fork(from: &Sim<std::io::Sink>, name: &str) -> Result<FileSim, SimError> {
    let f = File::create(journal_path(name)).map_err(|e| SimError::Setup(format!("create journal: {e}")))?;
    from.fork(BufWriter::new(f))
}

fn rendered(sim: &Sim<impl Write>, cluster: &str) -> Vec<(String, String)> {
    let c = sim.controller();
    c.graph()
        .instance(
            &c.handles().clusters,
            &ObjectKey::new("TalosCluster", "ichor-system", cluster),
        )
        .map(|a| a.documents.into_iter().collect())
        .unwrap_or_default()
}

/// Every control plane applies the rendered configuration (as after `ichor config apply`).
fn apply_config(sim: &mut Sim<impl Write>, machines: &[(&str, &str)]) -> Result<(), SimError> {
    for (machine, cluster) in machines {
        let applied = rendered(sim, cluster);
        let key = ObjectKey::new("TalosMachine", "ichor-system", *machine);
        if let Some(o) = sim.controller().world().get(&key).cloned() {
            sim.push(Event::Applied(fixtures::with_applied(&o, &applied)))?;
        }
    }
    sim.settle()
}

fn base(sim: &mut Sim<impl Write>, with_service: bool) -> Result<(), SimError> {
    sim.push(Event::Applied(fixtures::installation("5m", "12h")))?;
    if with_service {
        sim.push(Event::Applied(fixtures::issuer_service("10.96.0.10")))?;
    }
    Ok(())
}

fn prod(sim: &mut Sim<impl Write>) -> Result<(), SimError> {
    sim.push(Event::Applied(fixtures::cluster("prod", 1, Auth::Ichor)))?;
    for (i, m) in ["prod-cp-1", "prod-cp-2", "prod-cp-3"].iter().enumerate() {
        let address = format!("10.0.1.{}", 10 + i);
        sim.push(Event::Applied(fixtures::control_plane(m, "prod", &address, &[])))?;
    }
    Ok(())
}

fn fresh_install() -> Result<(), SimError> {
    let mut sim = file_sim("fresh-install")?;
    base(&mut sim, false)?;
    prod(&mut sim)?;
    sim.push(Event::Applied(fixtures::user("alice", &["admin"], false, 1)))?;
    sim.push(Event::Applied(fixtures::user("bob", &["viewer"], false, 1)))?;
    sim.push(Event::Applied(fixtures::credentials(&["alice"])))?;
    sim.step(Event::Tick(t0()))?;
    sim.step(Event::Applied(fixtures::issuer_service("10.96.0.10")))?;
    sim.step(Event::Tick(t0() + SignedDuration::from_secs(30)))?;
    sim.flush()
}

fn clusterip_change() -> Result<(), SimError> {
    let mut setup = Sim::new(std::io::sink())?;
    base(&mut setup, true)?;
    prod(&mut setup)?;
    setup.push(Event::Applied(fixtures::cluster("edge", 2, Auth::External)))?;
    for (i, m) in ["edge-cp-1", "edge-cp-2"].iter().enumerate() {
        let address = format!("10.0.2.{}", 10 + i);
        setup.push(Event::Applied(fixtures::control_plane(m, "edge", &address, &[])))?;
    }
    setup.step(Event::Tick(t0()))?;
    apply_config(
        &mut setup,
        &[
            ("prod-cp-1", "prod"),
            ("prod-cp-2", "prod"),
            ("prod-cp-3", "prod"),
            ("edge-cp-1", "edge"),
            ("edge-cp-2", "edge"),
        ],
    )?;
    let mut sim = fork(&setup, "clusterip-change")?;
    sim.step(Event::Applied(fixtures::issuer_service("10.96.0.20")))?;
    sim.step(Event::Tick(t0() + SignedDuration::from_hours(1)))?;
    sim.flush()
}

fn leaf_renewal() -> Result<(), SimError> {
    let mut setup = Sim::new(std::io::sink())?;
    base(&mut setup, true)?;
    prod(&mut setup)?;
    setup.step(Event::Tick(t0()))?;
    apply_config(
        &mut setup,
        &[
            ("prod-cp-1", "prod"),
            ("prod-cp-2", "prod"),
            ("prod-cp-3", "prod"),
        ],
    )?;
    let leaf = tls_leaf(&setup).ok_or_else(|| SimError::Setup("no leaf was issued".into()))?;
    let renewal = leaf.renewal_point();
    setup.run_until(renewal - SignedDuration::from_mins(1))?;
    let mut sim = fork(&setup, "leaf-renewal")?;
    sim.step(Event::Tick(renewal))?;
    sim.step(Event::Tick(renewal + SignedDuration::from_mins(1)))?;
    sim.flush()
}

fn tls_leaf(sim: &Sim<impl Write>) -> Option<CertFacts> {
    use base64::Engine as _;
    let secret = sim
        .controller()
        .world()
        .get(&ObjectKey::new("Secret", "ichor-system", "ichor-oidc-tls"))?;
    let b64 = secret.value.get("data")?.get("tls.crt")?.as_str()?;
    let pem = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    CertFacts::from_pem(std::str::from_utf8(&pem).ok()?, "leaf").ok()
}

fn user_deleted() -> Result<(), SimError> {
    let mut setup = Sim::new(std::io::sink())?;
    base(&mut setup, true)?;
    setup.step(Event::Tick(t0()))?;
    let mut sim = fork(&setup, "user-deleted")?;
    sim.step(Event::Applied(fixtures::user("alice", &["admin"], false, 1)))?;
    sim.step(Event::Applied(fixtures::user("bob", &["viewer"], false, 1)))?;
    sim.step(Event::Applied(fixtures::user("carol", &["operator"], true, 1)))?;
    sim.step(Event::Applied(fixtures::user(
        "dave",
        &["viewer", "Bad_Role"],
        false,
        1,
    )))?;
    sim.step(Event::Applied(fixtures::credentials(&["alice", "carol", "dave"])))?;
    sim.step(Event::Tick(t0() + SignedDuration::from_mins(1)))?;
    let dave = fixtures::user("dave", &[], false, 1);
    sim.step(fixtures::deleted(&dave))?;
    sim.step(Event::Tick(t0() + SignedDuration::from_mins(2)))?;
    sim.step(Event::Applied(fixtures::credentials(&["alice", "bob", "carol"])))?;
    sim.step(Event::Tick(t0() + SignedDuration::from_mins(3)))?;
    sim.flush()
}

/// Per-user credentials Secrets (as the metadata watch delivers them) beside the legacy
/// Secret: bob has both, carol and erin their own Secret only; bob and carol are deleted.
fn per_user_deleted() -> Result<(), SimError> {
    let mut setup = Sim::new(std::io::sink())?;
    base(&mut setup, true)?;
    setup.step(Event::Tick(t0()))?;
    let mut sim = fork(&setup, "per-user-deleted")?;
    for user in ["alice", "bob", "carol", "erin"] {
        sim.step(Event::Applied(fixtures::user(user, &["viewer"], false, 1)))?;
    }
    sim.step(Event::Applied(fixtures::credentials(&["alice", "bob"])))?;
    for (user, uid) in [("bob", "uid-bob"), ("carol", "uid-carol"), ("erin", "uid-erin")] {
        sim.step(Event::Applied(fixtures::per_user_credentials(user, uid)))?;
    }
    sim.step(Event::Tick(t0() + SignedDuration::from_mins(1)))?;
    for user in ["bob", "carol"] {
        sim.step(fixtures::deleted(&fixtures::user(user, &[], false, 1)))?;
    }
    sim.step(Event::Tick(t0() + SignedDuration::from_mins(2)))?;
    sim.flush()
}

#[test]
#[ignore = "rewrites the committed per-user golden journal; run on purpose"]
fn regenerate_per_user_journal() {
    per_user_deleted().expect("per-user-deleted");
}

#[test]
#[ignore = "rewrites the committed golden journals; run on purpose"]
fn regenerate_journals() {
    fresh_install().expect("fresh-install");
    clusterip_change().expect("clusterip-change");
    leaf_renewal().expect("leaf-renewal");
    user_deleted().expect("user-deleted");
    per_user_deleted().expect("per-user-deleted");
}
