//! Tests of the identity graph as a whole: incremental cost, fixed point, determinism of
//! replay, and redacted inputs.

use ichor_graph::{Action, Event, JournalReader, Object};
use jiff::SignedDuration;
use proptest::prelude::*;
use serde_json::json;

use super::{Controller, build, names, replay};
use crate::sim::fixtures::{self, Auth};
use crate::sim::workload::{self, Workload, start};
use crate::sim::{Sim, secret};

fn settled(users: usize, clusters: usize, machines: usize) -> Sim<std::io::Sink> {
    let mut sim = Sim::new(std::io::sink()).expect("the graph builds");
    let w = Workload {
        users,
        clusters,
        machines,
        events: 0,
        seed: 1,
    };
    workload::generate(&mut sim, w).expect("the setup settles");
    sim
}

fn user(sim: &Sim<std::io::Sink>, name: &str) -> Object {
    sim.controller()
        .world()
        .objects("IchorUser")
        .find(|o| o.name == name)
        .cloned()
        .expect("the user exists")
}

#[test]
fn the_graph_builds() {
    assert!(build().is_ok());
}

#[test]
fn a_one_user_change_recomputes_only_that_users_nodes() {
    let mut sim = settled(50, 3, 6);
    let mut u = user(&sim, "user-00007");
    u.value["spec"]["displayName"] = json!("Someone Else");
    u.value["metadata"]["generation"] = json!(2);
    sim.push(Event::Applied(u)).expect("journaled");
    let (eval, renders) = sim.controller_mut().evaluate();
    let recomputed = |n: &str| eval.stats.node(n).map_or(0, |s| s.recomputed);
    assert_eq!(recomputed(names::USER_STATUS), 1);
    // Whether it is being deleted is read again (one bool), unchanged: nothing downstream runs.
    assert_eq!(recomputed(names::USER_EXISTS), 1);
    let others: usize = eval
        .stats
        .nodes
        .iter()
        .filter(|n| ![names::USER_STATUS, names::USER_EXISTS].contains(&&*n.name))
        .map(|n| n.recomputed)
        .sum();
    assert_eq!(others, 0, "{:#?}", eval.stats.nodes);
    assert!(renders.is_empty());
    // The new generation is a status write of that user only.
    assert_eq!(eval.actions.len(), 1);
    assert!(matches!(&eval.actions[0], Action::Apply { object, .. } if object.name == "user-00007"));
}

#[test]
fn a_display_name_change_at_the_same_generation_writes_nothing() {
    let mut sim = settled(10, 1, 3);
    let mut u = user(&sim, "user-00003");
    u.value["spec"]["displayName"] = json!("Quietly Renamed");
    sim.push(Event::Applied(u)).expect("journaled");
    let (eval, _) = sim.controller_mut().evaluate();
    assert!(eval.actions.is_empty(), "{:?}", eval.actions);
    // The user's node ran once and desired nothing new.
    assert_eq!(eval.stats.node(names::USER_STATUS).map(|s| s.recomputed), Some(1));
}

#[test]
fn a_settled_installation_diffed_in_full_decides_nothing() {
    let mut sim = settled(20, 2, 6);
    sim.controller_mut().resync();
    let (eval, _) = sim.controller_mut().evaluate();
    assert!(eval.actions.is_empty(), "{:?}", eval.actions);
    assert!(eval.failures.is_empty(), "{:?}", eval.failures);
}

#[test]
fn a_tick_in_the_steady_state_decides_nothing() {
    let mut sim = settled(20, 2, 6);
    sim.push(Event::Tick(start() + SignedDuration::from_hours(1)))
        .expect("journaled");
    let (eval, _) = sim.controller_mut().evaluate();
    assert!(eval.actions.is_empty(), "{:?}", eval.actions);
}

#[test]
fn a_tick_in_a_settled_world_of_a_thousand_users_recomputes_only_the_timed_nodes() {
    let mut sim = settled(1000, 5, 15);
    sim.push(Event::Tick(start() + SignedDuration::from_secs(90)))
        .expect("journaled");
    let (eval, _) = sim.controller_mut().evaluate();
    assert!(eval.actions.is_empty(), "{:?}", eval.actions);
    let recomputed: Vec<(&str, usize)> = eval
        .stats
        .nodes
        .iter()
        .filter(|n| n.recomputed > 0)
        .map(|n| (&*n.name, n.recomputed))
        .collect();
    // The four timed nodes, each one instance (the return wait reads one phase: O(1)).
    assert!(eval.stats.recomputed <= 4, "{recomputed:?}");
    assert!(
        recomputed.iter().all(|(n, _)| [
            names::SIGNING_KEYS,
            names::CERTIFICATE_EFFECTS,
            names::WEBHOOK_CERTIFICATE,
            names::RETURN_WAIT
        ]
        .contains(n)),
        "{recomputed:?}"
    );
}

#[test]
fn a_status_change_is_desired_without_a_transition_time_and_settles_once_stamped() {
    let mut sim = settled(10, 1, 3);
    let mut u = user(&sim, "user-00004");
    u.value["spec"]["disabled"] = json!(true);
    u.value["metadata"]["generation"] = json!(2);
    sim.push(Event::Applied(u)).expect("journaled");
    let (eval, _) = sim.controller_mut().evaluate();
    let [Action::Apply { object, .. }] = &eval.actions[..] else {
        panic!("one status write: {:?}", eval.actions)
    };
    let conditions = object.value["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ready = conditions.iter().find(|c| c["type"] == "Ready").expect("Ready");
    assert_eq!(ready["status"], "False");
    assert_eq!(ready.get("lastTransitionTime"), None, "{ready}");
    let password = conditions
        .iter()
        .find(|c| c["type"] == "PasswordSet")
        .expect("PasswordSet");
    assert_eq!(
        password["lastTransitionTime"], "2027-01-01T00:00:00Z",
        "{password}"
    );
    // The simulated applier stamps the write with the event time; then nothing is left to do.
    let later = start() + SignedDuration::from_mins(5);
    sim.push(Event::Tick(later)).expect("journaled");
    sim.perform(&eval.actions).expect("applied");
    sim.settle().expect("settles");
    let u = user(&sim, "user-00004");
    let ready = u.value["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready").cloned())
        .expect("Ready observed");
    assert_eq!(ready["lastTransitionTime"], "2027-01-01T00:05:00Z");
    sim.controller_mut().resync();
    let (eval, _) = sim.controller_mut().evaluate();
    assert!(eval.actions.is_empty(), "{:?}", eval.actions);
}

#[test]
fn editing_a_user_does_not_recompute_the_collection_guard() {
    let mut sim = settled(50, 1, 3);
    let mut u = user(&sim, "user-00007");
    u.value["spec"]["displayName"] = json!("Renamed");
    sim.push(Event::Applied(u)).expect("journaled");
    let (eval, _) = sim.controller_mut().evaluate();
    assert_eq!(
        eval.stats.node(names::USERS_OBSERVED).map(|n| n.recomputed),
        Some(0)
    );
    // A new user changes the count, not the guard's answer: no collection is recomputed.
    sim.push(Event::Applied(fixtures::user("newcomer", &["viewer"], false, 1)))
        .expect("journaled");
    let (eval, _) = sim.controller_mut().evaluate();
    assert_eq!(
        eval.stats.node(names::USERS_OBSERVED).map(|n| n.recomputed),
        Some(1)
    );
    assert_eq!(
        eval.stats.node(names::CREDENTIALS_GC).map(|n| n.recomputed),
        Some(0)
    );
}

#[test]
fn the_first_keys_get_stable_effect_ids_from_the_planning_minute() {
    let mut c = Controller::new().expect("builds");
    c.fold(Event::Applied(fixtures::installation("5m", "12h")));
    c.fold(Event::Tick(start() + SignedDuration::from_secs(42)));
    let (eval, _) = c.evaluate();
    let ids: Vec<String> = eval
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Effect { request, .. } if request.id.starts_with("generate-") => Some(request.id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        ids,
        [
            "generate-rsa-key k-20270101-0000",
            "generate-hmac-key h-20270101-0000"
        ]
    );
}

#[test]
fn with_users_off_the_ca_is_issued_all_the_same_for_the_webhooks_certificate() {
    // No issuer Service: no leaf, but the fail-closed webhooks need a certificate signed by
    // the CA, so the CA cannot wait for users.
    let mut c = Controller::new().expect("builds");
    c.fold(Event::Applied(fixtures::installation("5m", "12h")));
    c.fold(Event::Tick(start()));
    let (eval, _) = c.evaluate();
    let ids: Vec<String> = eval
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Effect { request, .. } if request.id.starts_with("issue-") => Some(request.id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert!(ids[0].starts_with("issue-ca "), "{ids:?}");
}

#[test]
fn redacted_secrets_are_present_but_unreadable_and_request_nothing() {
    let redacted = json!({"sha256": "00"});
    let mut c = Controller::new().expect("builds");
    c.fold(Event::Applied(fixtures::installation("5m", "12h")));
    c.fold(Event::Applied(fixtures::issuer_service("10.96.0.10")));
    for (name, key) in [
        ("ichor-oidc-signing", "keys.json"),
        ("ichor-oidc-ca", "tls.crt"),
        ("ichor-oidc-tls", "tls.crt"),
    ] {
        let mut s = secret(name, &[], "Opaque");
        s.value["data"] = json!({ key: redacted.clone() });
        c.fold(Event::Applied(s));
    }
    c.fold(Event::Tick(start()));
    let (eval, _) = c.evaluate();
    assert!(eval.actions.is_empty(), "{:?}", eval.actions);
    let trust = c.graph().output(&c.handles().trust).expect("trust is computed");
    assert_eq!(trust.source, super::nodes::TrustSource::Unavailable);
}

#[test]
fn an_unparsable_keys_document_is_never_replaced() {
    let mut c = Controller::new().expect("builds");
    c.fold(Event::Applied(secret(
        "ichor-oidc-signing",
        &[("keys.json", b"{not json")],
        "Opaque",
    )));
    c.fold(Event::Tick(start()));
    let (eval, _) = c.evaluate();
    let touching_keys: Vec<_> = eval
        .actions
        .iter()
        .filter(|a| !matches!(a, Action::Effect { request, .. } if request.id.starts_with("issue-ca ")))
        .collect();
    assert!(touching_keys.is_empty(), "{touching_keys:?}");
}

#[test]
fn credentials_are_not_collected_while_no_user_is_observed() {
    let mut c = Controller::new().expect("builds");
    c.fold(Event::Applied(fixtures::credentials(&["alice", "bob"])));
    let (eval, _) = c.evaluate();
    assert!(eval.actions.is_empty(), "{:?}", eval.actions);
    c.fold(Event::Applied(fixtures::user("alice", &["viewer"], false, 1)));
    let (eval, _) = c.evaluate();
    let ids: Vec<String> = eval.actions.iter().map(ToString::to_string).collect();
    assert!(
        ids.iter()
            .any(|a| a.starts_with("effect remove-credentials-key bob")),
        "{ids:?}"
    );
    assert!(
        !ids.iter().any(|a| a.contains("remove-credentials-key alice")),
        "{ids:?}"
    );
}

#[test]
fn a_user_held_by_a_finalizer_after_its_delete_loses_its_credentials_key() {
    let mut c = Controller::new().expect("builds");
    c.fold(Event::Applied(fixtures::credentials(&["alice", "mallory"])));
    c.fold(Event::Applied(fixtures::user("alice", &["admin"], false, 1)));
    let mut mallory = fixtures::user("mallory", &["admin"], false, 1);
    c.fold(Event::Applied(mallory.clone()));
    let (eval, _) = c.evaluate();
    let ids: Vec<String> = eval.actions.iter().map(ToString::to_string).collect();
    assert!(
        !ids.iter().any(|a| a.contains("remove-credentials-key")),
        "{ids:?}"
    );
    // `kubectl delete` with her own finalizer `x/hold` on the object: it stays, terminating.
    mallory.value["metadata"]["finalizers"] = json!(["x/hold"]);
    mallory.value["metadata"]["deletionTimestamp"] = json!("2026-11-05T10:00:00Z");
    c.fold(Event::Applied(mallory));
    let (eval, _) = c.evaluate();
    let ids: Vec<String> = eval.actions.iter().map(ToString::to_string).collect();
    assert!(
        ids.iter()
            .any(|a| a.starts_with("effect remove-credentials-key mallory")),
        "{ids:?}"
    );
    assert!(
        !ids.iter().any(|a| a.contains("remove-credentials-key alice")),
        "{ids:?}"
    );
}

fn removal_requests(actions: &[Action]) -> Vec<serde_json::Value> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Effect { request, .. } if request.id.starts_with("remove-credentials-key ") => {
                Some(request.request.clone())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_gone_users_own_secret_is_removed_with_its_uid_after_its_legacy_key() {
    let mut c = Controller::new().expect("builds");
    c.fold(Event::Applied(fixtures::credentials(&["alice", "bob"])));
    for (user, uid) in [("alice", "u-alice"), ("bob", "u-bob"), ("carol", "u-carol")] {
        c.fold(Event::Applied(fixtures::per_user_credentials(user, uid)));
    }
    c.fold(Event::Applied(fixtures::user("alice", &["viewer"], false, 1)));
    let (eval, _) = c.evaluate();
    let mut requests = removal_requests(&eval.actions);
    requests.sort_by_key(|r| r["key"].as_str().map(str::to_owned));
    assert_eq!(
        requests,
        vec![
            json!({"namespace": "ichor-system", "secret": "ichor-user-credentials", "key": "bob",
                "perUser": {"namespace": "ichor-credentials", "name": "ichor-user-bob", "uid": "u-bob"}}),
            json!({"namespace": "ichor-system", "secret": "ichor-user-credentials", "key": "carol",
                "inLegacy": false,
                "perUser": {"namespace": "ichor-credentials", "name": "ichor-user-carol", "uid": "u-carol"}}),
        ]
    );
    // A legacy key alone is removed with the request it always had.
    c.fold(Event::Applied(fixtures::credentials(&["alice", "dave"])));
    let (eval, _) = c.evaluate();
    assert!(
        removal_requests(&eval.actions).contains(
            &json!({"namespace": "ichor-system", "secret": "ichor-user-credentials", "key": "dave"})
        ),
        "{:?}",
        eval.actions
    );
}

#[test]
fn a_user_with_only_its_own_secret_has_a_password() {
    let mut c = Controller::new().expect("builds");
    c.fold(Event::Applied(fixtures::user("erin", &["viewer"], false, 1)));
    c.fold(Event::Applied(fixtures::per_user_credentials("erin", "u-erin")));
    let (eval, _) = c.evaluate();
    let status = eval
        .actions
        .iter()
        .find_map(|a| match a {
            Action::Apply { object, .. } if object.kind == "IchorUser" => Some(object.value.clone()),
            _ => None,
        })
        .expect("a status write");
    let password_set = status["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "PasswordSet"))
        .map(|c| c["status"].clone());
    assert_eq!(password_set, Some(json!("True")), "{status}");
    assert!(removal_requests(&eval.actions).is_empty());
}

#[test]
fn the_sim_removes_a_gone_users_legacy_key_and_own_secret_and_no_one_elses() {
    let mut sim = Sim::new(std::io::sink()).expect("the graph builds");
    let alice = fixtures::user("alice", &["admin"], false, 1);
    let bob = fixtures::user("bob", &["viewer"], false, 1);
    sim.step(Event::Applied(alice)).expect("settles");
    sim.step(Event::Applied(bob.clone())).expect("settles");
    sim.step(Event::Applied(fixtures::credentials(&["alice", "bob"])))
        .expect("settles");
    for (user, uid) in [("alice", "u-alice"), ("bob", "u-bob")] {
        sim.step(Event::Applied(fixtures::per_user_credentials(user, uid)))
            .expect("settles");
    }
    sim.step(fixtures::deleted(&bob)).expect("settles");
    let world = sim.controller().world();
    let own: Vec<&str> = world
        .objects("Secret")
        .filter(|o| o.namespace == "ichor-credentials")
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(own, ["ichor-user-alice"]);
    let legacy = world
        .get(&super::project::credentials_secret_key())
        .expect("the legacy Secret stays");
    let keys: Vec<&String> = legacy.value["data"].as_object().expect("data").keys().collect();
    assert_eq!(keys, ["alice"]);
    assert_eq!(world.count(super::CREDENTIALS_KEY_KIND), 1);
}

/// One change a proptest applies to a small installation.
#[derive(Debug, Clone)]
enum Op {
    AddUser(u8),
    DeleteUser(u8),
    Disable(u8, bool),
    Passwords(u8),
    ServiceIp(u8),
    ClusterAuth(bool),
    MachineApplied(u8, bool),
    Tick(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..6).prop_map(Op::AddUser),
        (0u8..6).prop_map(Op::DeleteUser),
        (0u8..6, any::<bool>()).prop_map(|(u, d)| Op::Disable(u, d)),
        any::<u8>().prop_map(Op::Passwords),
        (10u8..13).prop_map(Op::ServiceIp),
        any::<bool>().prop_map(Op::ClusterAuth),
        (0u8..3, any::<bool>()).prop_map(|(m, c)| Op::MachineApplied(m, c)),
        (1u16..2000).prop_map(Op::Tick),
    ]
}

fn run<W: std::io::Write>(sim: &mut Sim<W>, ops: &[Op]) -> Result<(), crate::sim::SimError> {
    let mut now = start();
    sim.push(Event::Applied(fixtures::installation("5m", "12h")))?;
    sim.push(Event::Applied(fixtures::issuer_service("10.96.0.10")))?;
    sim.push(Event::Applied(fixtures::cluster("prod", 1, Auth::Ichor)))?;
    for m in 0..3 {
        sim.push(Event::Applied(fixtures::control_plane(
            &format!("cp-{m}"),
            "prod",
            "10.0.0.1",
            &[],
        )))?;
    }
    sim.step(Event::Tick(now))?;
    let name = |u: u8| format!("u{u}");
    for op in ops {
        let event = match op {
            Op::AddUser(u) => Event::Applied(fixtures::user(&name(*u), &["viewer"], false, 1)),
            Op::DeleteUser(u) => fixtures::deleted(&fixtures::user(&name(*u), &[], false, 1)),
            Op::Disable(u, d) => Event::Applied(fixtures::user(&name(*u), &["viewer"], *d, 2)),
            Op::Passwords(mask) => {
                let names: Vec<String> = (0..6u8).filter(|u| mask & (1 << u) != 0).map(name).collect();
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                Event::Applied(fixtures::credentials(&refs))
            }
            Op::ServiceIp(last) => Event::Applied(fixtures::issuer_service(&format!("10.96.0.{last}"))),
            Op::ClusterAuth(ichor) => {
                let auth = if *ichor { Auth::Ichor } else { Auth::External };
                Event::Applied(fixtures::cluster("prod", 1, auth))
            }
            Op::MachineApplied(m, current) => {
                let key = ichor_graph::ObjectKey::new("TalosMachine", "ichor-system", format!("cp-{m}"));
                let Some(o) = sim.controller().world().get(&key).cloned() else {
                    continue;
                };
                let applied: Vec<(String, String)> = if *current {
                    let c = sim.controller();
                    c.graph()
                        .instance(
                            &c.handles().clusters,
                            &ichor_graph::ObjectKey::new("TalosCluster", "ichor-system", "prod"),
                        )
                        .map(|a| a.documents.into_iter().collect())
                        .unwrap_or_default()
                } else {
                    vec![("KubeAuthenticationConfig".into(), "0".repeat(64))]
                };
                Event::Applied(fixtures::with_applied(&o, &applied))
            }
            Op::Tick(mins) => {
                now += SignedDuration::from_mins(i64::from(*mins));
                Event::Tick(now)
            }
        };
        sim.step(event)?;
    }
    sim.flush()
}

fn replayed(journal: &[u8]) -> String {
    let mut c = Controller::new().expect("builds");
    replay(JournalReader::new(journal), &mut c)
        .expect("the journal replays")
        .to_string()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn feeding_actions_back_reaches_a_fixed_point(ops in prop::collection::vec(op(), 1..25)) {
        let mut sim = Sim::new(std::io::sink()).expect("builds");
        sim.record = false;
        // Every step settles (or the run fails with NoFixedPoint).
        run(&mut sim, &ops).expect("every change settles");
        sim.controller_mut().resync();
        let (eval, _) = sim.controller_mut().evaluate();
        prop_assert!(eval.actions.is_empty(), "{:?}", eval.actions);
    }

    #[test]
    fn the_same_journal_replays_to_the_same_actions(ops in prop::collection::vec(op(), 1..20)) {
        let mut sim = Sim::new(Vec::new()).expect("builds");
        run(&mut sim, &ops).expect("every change settles");
        let journal = sim.into_journal().expect("the journal is written");
        let first = replayed(&journal);
        prop_assert_eq!(&first, &replayed(&journal));
    }
}

#[test]
fn a_bad_journal_line_stops_the_replay_with_its_line_number() {
    let journal =
        b"{\"type\":\"tick\",\"seq\":1,\"now\":\"2027-01-01T00:00:00Z\"}\n{\"type\":\"nope\",\"seq\":2}\n";
    let mut c = Controller::new().expect("builds");
    let err = replay(JournalReader::new(&journal[..]), &mut c).expect_err("line 2 is bad");
    assert!(err.to_string().contains("line 2"), "{err}");
    assert_eq!(err.partial.events, 1);
}

#[test]
fn the_issuer_service_is_found_by_the_seeds_label_and_by_the_earlier_one() {
    use std::collections::BTreeMap;
    let with_component = |component: &str| {
        let mut svc = fixtures::issuer_service("10.96.0.10");
        svc.value["metadata"]["labels"]["app.kubernetes.io/component"] = json!(component);
        let one: BTreeMap<_, _> = [(svc.key(), svc)].into();
        super::nodes::issuer_service(&one)
    };
    assert_eq!(super::ISSUER_COMPONENT, "ui");
    for accepted in ["ui", "issuer"] {
        let chosen = with_component(accepted);
        assert_eq!(chosen.problem, None, "{accepted}");
        assert_eq!(
            chosen.service.map(|s| s.cluster_ip.to_string()).as_deref(),
            Some("10.96.0.10"),
            "{accepted}"
        );
    }
    for refused in ["controller", "issuer-external", "UI"] {
        let chosen = with_component(refused);
        assert!(chosen.service.is_none(), "{refused}: {chosen:?}");
        let problem = chosen.problem.unwrap_or_default();
        assert!(problem.contains("app.kubernetes.io/component=ui"), "{problem}");
    }
}

#[test]
fn two_services_labelled_as_the_issuer_are_ambiguous_and_neither_is_used() {
    use std::collections::BTreeMap;
    let real = fixtures::issuer_service("10.96.0.10");
    let mut impostor = fixtures::issuer_service("10.96.0.66");
    impostor.name = "aaa-issuer".into();
    impostor.value["metadata"]["name"] = json!("aaa-issuer");
    let one: BTreeMap<_, _> = [(real.key(), real.clone())].into();
    let chosen = super::nodes::issuer_service(&one);
    assert_eq!(chosen.problem, None);
    assert_eq!(
        chosen.service.map(|s| s.cluster_ip.to_string()).as_deref(),
        Some("10.96.0.10")
    );
    let both: BTreeMap<_, _> = [(real.key(), real), (impostor.key(), impostor)].into();
    let chosen = super::nodes::issuer_service(&both);
    assert!(chosen.service.is_none(), "{chosen:?}");
    let problem = chosen.problem.unwrap_or_default();
    assert!(
        problem.contains("ambiguous") && problem.contains("aaa-issuer"),
        "{problem}"
    );
}

#[test]
fn a_second_factor_policy_change_re_renders_every_cluster_and_asks_each_control_plane_to_restart() {
    let mut sim = settled(5, 2, 4);
    let mut strict = fixtures::installation("5m", "12h");
    strict.value["spec"]["users"]["secondFactor"] = json!({"roles": {"admin": "required", "viewer": "off"}});
    sim.push(Event::Applied(strict.clone())).expect("journaled");
    let (eval, renders) = sim.controller_mut().evaluate();
    let recomputed = |eval: &ichor_graph::Evaluation, n: &str| eval.stats.node(n).map_or(0, |s| s.recomputed);
    assert_eq!(recomputed(&eval, names::SECOND_FACTOR), 1);
    assert_eq!(recomputed(&eval, names::CLUSTER_AUTH), 2);
    assert_eq!(renders.len(), 2, "{renders:?}");
    let yaml = first_cluster_document(&sim);
    assert!(yaml.contains("claimValidationRules"), "{yaml}");
    assert!(yaml.contains("ichor:admin needs a second factor"), "{yaml}");
    assert!(!yaml.contains("'viewer'"), "{yaml}");
    // Every control plane runs the document without the rule: each must restart.
    assert_eq!(restarts(&eval.actions).len(), 4, "{:?}", eval.actions);

    // A token lifetime change leaves the policy, so no cluster renders again.
    let mut longer = strict;
    longer.value["spec"]["users"]["tokenTTL"] = json!("10m");
    sim.push(Event::Applied(longer)).expect("journaled");
    let (eval, renders) = sim.controller_mut().evaluate();
    assert_eq!(recomputed(&eval, names::SECOND_FACTOR), 1);
    assert_eq!(recomputed(&eval, names::CLUSTER_AUTH), 0);
    assert!(renders.is_empty(), "{renders:?}");

    // Back to no policy: the document is the one the machines run, so nothing restarts.
    sim.push(Event::Applied(fixtures::installation("10m", "12h")))
        .expect("journaled");
    let (eval, renders) = sim.controller_mut().evaluate();
    assert_eq!(renders.len(), 2, "{renders:?}");
    let yaml = first_cluster_document(&sim);
    assert!(!yaml.contains("claimValidationRules"), "{yaml}");
    assert!(restarts(&eval.actions).is_empty(), "{:?}", eval.actions);
}

/// The authentication document rendered for the first cluster of [`settled`].
fn first_cluster_document(sim: &Sim<std::io::Sink>) -> String {
    let c = sim.controller();
    c.graph()
        .instance(
            &c.handles().clusters,
            &ichor_graph::ObjectKey::new("TalosCluster", "ichor-system", "cluster-000"),
        )
        .and_then(|a| a.yaml)
        .expect("rendered")
}

/// The machines the actions mark `Ready=False` for an apiserver restart.
fn restarts(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Apply { object, .. }
                if object.kind == "TalosMachine"
                    && object.value["status"]["conditions"]
                        .as_array()
                        .is_some_and(|c| c.iter().any(|c| c["reason"] == "APIServerRestartRequired")) =>
            {
                Some(object.name.to_string())
            }
            _ => None,
        })
        .collect()
}
