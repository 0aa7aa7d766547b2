//! The engine on the toy graph: incremental recomputation, reasons, diff, deadlines, replay.

use ichor_graph::{
    Action, Cause, Evaluation, Event, Graph, JournalReader, Object, ObjectKey, Reason, World, diff, replay,
};
use serde_json::json;

use crate::toy::*;

/// Applies every action through the simulated applier until nothing is left to do.
fn converge(graph: &mut Graph, world: &mut World) -> usize {
    settle(graph, world, &mut 1_000, 20).expect("no fixed point after 20 rounds")
}

/// The toy graph converged on the World of `populate(users, clusters)`.
fn converged(users: usize, clusters: usize) -> (Toy, World) {
    let mut t = toy();
    let mut world = world_of(populate(users, clusters));
    converge(&mut t.graph, &mut world);
    (t, world)
}

/// How many instances of `node` the evaluation recomputed.
fn recomputed(eval: &Evaluation, node: &str) -> usize {
    eval.stats.node(node).unwrap().recomputed
}

fn applies(actions: &[Action]) -> Vec<String> {
    actions.iter().map(ToString::to_string).collect()
}

#[test]
fn a_one_user_change_recomputes_only_that_users_instances() {
    let (mut t, mut world) = converged(1_000, 50);

    // The display name changes: status and enabled recompute for that user only; enabled is
    // unchanged, so the count downstream of it is skipped.
    world.apply(Event::Applied(user("u7", false, "renamed")));
    let eval = t.graph.evaluate(&mut world);
    let s = &eval.stats;
    assert_eq!(recomputed(&eval, "user-status"), 1);
    assert_eq!(recomputed(&eval, "user-enabled"), 1);
    assert_eq!(recomputed(&eval, "enabled-count"), 0);
    assert_eq!(recomputed(&eval, "cluster-doc"), 0);
    assert_eq!(recomputed(&eval, "machine-class"), 0);
    assert_eq!(s.recomputed, 2);
    assert_eq!(s.objects_hashed, 1);
    assert_eq!(s.node("user-status").unwrap().skipped, 999);
    assert_eq!(
        applies(&eval.actions),
        vec!["apply UserStatus ichor-system/u7 (user-status[User ichor-system/u7]: input users changed)"]
    );

    // Enabling a user also changes the count, which is recomputed once.
    world.apply(Event::Applied(user("u7", true, "renamed")));
    let eval = t.graph.evaluate(&mut world);
    assert_eq!(recomputed(&eval, "enabled-count"), 1);
    assert_eq!(eval.stats.recomputed, 3);
    assert_eq!(eval.stats.applies, 2);
}

#[test]
fn a_cluster_change_recomputes_that_cluster_and_its_machines_only() {
    let (mut t, mut world) = converged(10, 50);
    world.apply(Event::Applied(cluster("c3", "https://moved:6443")));
    let eval = t.graph.evaluate(&mut world);
    assert_eq!(recomputed(&eval, "cluster-doc"), 1);
    assert_eq!(recomputed(&eval, "machine-class"), 3);
    assert_eq!(eval.stats.recomputed, 4);
    let reasons: Vec<String> = eval.actions.iter().map(|a| a.reason().to_string()).collect();
    assert_eq!(
        reasons,
        vec![
            "machine-class[Machine ichor-system/c3-m0]: input cluster-doc changed",
            "machine-class[Machine ichor-system/c3-m1]: input cluster-doc changed",
            "machine-class[Machine ichor-system/c3-m2]: input cluster-doc changed",
        ]
    );
    assert_eq!(
        t.graph
            .instance(&t.cluster_doc, &ObjectKey::new("Cluster", NS, "c3"))
            .unwrap()
            .endpoint,
        "https://moved:6443"
    );
}

#[test]
fn a_shared_input_change_recomputes_every_dependent_instance() {
    let (mut t, mut world) = converged(10, 50);
    world.apply(Event::Applied(config("https://other", 0)));
    let eval = t.graph.evaluate(&mut world);
    assert_eq!(recomputed(&eval, "cluster-doc"), 50);
    assert_eq!(recomputed(&eval, "machine-class"), 150);
    assert_eq!(recomputed(&eval, "user-status"), 0);
    assert_eq!(eval.stats.applies, 150);
}

#[test]
fn a_machine_moving_to_another_cluster_follows_the_new_cluster() {
    let (mut t, mut world) = converged(0, 3);
    world.apply(Event::Applied(machine("c0-m1", "c2", "worker")));
    let eval = t.graph.evaluate(&mut world);
    assert_eq!(eval.stats.recomputed, 1);
    // A change of the old cluster no longer touches the moved machine; the new one does.
    world.apply(Event::Applied(cluster("c0", "https://zero")));
    assert_eq!(recomputed(&t.graph.evaluate(&mut world), "machine-class"), 2);
    world.apply(Event::Applied(cluster("c2", "https://two")));
    assert_eq!(recomputed(&t.graph.evaluate(&mut world), "machine-class"), 4);
}

#[test]
fn a_machine_waiting_for_its_cluster_is_computed_when_the_cluster_appears() {
    let mut t = toy();
    let mut world = world_of(vec![Event::Applied(machine("m", "later", "worker"))]);
    let eval = t.graph.evaluate(&mut world);
    assert_eq!(
        applies(&eval.actions),
        vec!["apply ConfigMap ichor-system/summary (enabled-count: initial)"]
    );
    world.apply(Event::Applied(cluster("later", "https://later")));
    let eval = t.graph.evaluate(&mut world);
    assert_eq!(
        applies(&eval.actions),
        vec![
            "apply MachineClass ichor-system/m (machine-class[Machine ichor-system/m]: input cluster-doc changed)"
        ]
    );
}

#[test]
fn deleting_a_user_deletes_its_owned_status_with_the_reason() {
    let (mut t, mut world) = converged(3, 0);
    // u1 is disabled: the enabled count does not change.
    world.apply(Event::Deleted(ObjectKey::new("User", NS, "u1")));
    let eval = t.graph.evaluate(&mut world);
    assert_eq!(
        applies(&eval.actions),
        vec!["delete UserStatus ichor-system/u1 (user-status[User ichor-system/u1]: instance removed)",]
    );
    // u2 is enabled: the count drops too.
    world.apply(Event::Deleted(ObjectKey::new("User", NS, "u2")));
    let eval2 = t.graph.evaluate(&mut world);
    assert_eq!(
        applies(&eval2.actions),
        vec![
            "apply ConfigMap ichor-system/summary (enabled-count: input user-enabled changed)",
            "delete UserStatus ichor-system/u2 (user-status[User ichor-system/u2]: instance removed)",
        ]
    );
    let Action::Delete { reason, .. } = &eval.actions[0] else {
        panic!()
    };
    assert_eq!(reason.cause, Cause::Removed);
}

#[test]
fn never_fights_another_field_manager_but_repairs_owned_fields() {
    let (mut t, mut world) = converged(1, 0);
    let key = ObjectKey::new("UserStatus", NS, "u0");
    let mut other = world.get(&key).unwrap().clone();
    other.value["spec"]["addedByOthers"] = json!("kept");
    other.value["status"] = json!({"seen": true});
    world.apply(Event::Applied(other.clone()));
    assert!(t.graph.evaluate(&mut world).actions.is_empty());

    other.value["spec"]["ready"] = json!(false);
    world.apply(Event::Applied(other));
    let eval = t.graph.evaluate(&mut world);
    assert_eq!(
        applies(&eval.actions),
        vec![
            "apply UserStatus ichor-system/u0 (user-status[User ichor-system/u0]: observed differs from desired)"
        ]
    );
    assert_eq!(eval.stats.recomputed, 0);
}

#[test]
fn deletes_owned_orphans_and_leaves_foreign_objects_alone() {
    let (mut t, mut world) = converged(0, 0);
    world.apply(Event::Applied(Object::new(
        "UserStatus",
        NS,
        "ghost",
        json!({"metadata": owned_meta()}),
    )));
    world.apply(Event::Applied(Object::new(
        "UserStatus",
        NS,
        "foreign",
        json!({"metadata": {}}),
    )));
    let eval = t.graph.evaluate(&mut world);
    assert_eq!(
        applies(&eval.actions),
        vec!["delete UserStatus ichor-system/ghost (owned by this controller but desired by no node)"]
    );
}

#[test]
fn requests_a_key_effect_until_its_result_is_observed_and_reports_the_deadline() {
    let mut t = toy();
    let mut world = world_of(vec![Event::Tick(at(250)), Event::Applied(config("i", 100))]);
    let eval = t.graph.evaluate(&mut world);
    assert_eq!(
        applies(&eval.actions),
        vec![
            "apply ConfigMap ichor-system/summary (enabled-count: initial)",
            "effect generate-key k-200 (rotation: initial)",
        ]
    );
    assert_eq!(eval.next_deadline, Some(at(300)));
    assert_eq!(t.graph.requested_effects().count(), 1);

    // An unrelated change does not request it again.
    world.apply(Event::Applied(user("u", true, "x")));
    let eval = t.graph.evaluate(&mut world);
    assert!(eval.actions.iter().all(|a| !matches!(a, Action::Effect { .. })));

    for e in perform(&world, &eval_effect("generate-key k-200"), 1) {
        world.apply(e);
    }
    let eval = t.graph.evaluate(&mut world);
    assert!(eval.actions.is_empty());
    assert_eq!(t.graph.requested_effects().count(), 0);

    // At the deadline the next key is due.
    world.apply(Event::Tick(at(300)));
    let eval = t.graph.evaluate(&mut world);
    assert_eq!(
        applies(&eval.actions),
        vec!["effect generate-key k-300 (rotation: input now changed)"]
    );
    assert_eq!(eval.next_deadline, Some(at(400)));
}

fn eval_effect(id: &str) -> Action {
    let kid = id.trim_start_matches("generate-key ");
    Action::Effect {
        request: ichor_graph::EffectRequest::new(
            id,
            &KeyRequest {
                secret: "signing".into(),
                kid: kid.into(),
            },
        )
        .unwrap(),
        reason: Reason {
            node: None,
            instance: None,
            cause: Cause::Initial,
        },
    }
}

#[test]
fn nodes_reading_now_wait_for_the_first_tick() {
    let mut t = toy();
    let mut world = world_of(vec![Event::Applied(config("i", 100))]);
    let eval = t.graph.evaluate(&mut world);
    assert!(eval.actions.iter().all(|a| !matches!(a, Action::Effect { .. })));
    assert!(t.graph.output(&t.rotation).is_none());
    world.apply(Event::Tick(at(50)));
    assert_eq!(
        applies(&t.graph.evaluate(&mut world).actions),
        vec!["effect generate-key k-0 (rotation: initial)"]
    );
}

#[test]
fn the_incremental_state_matches_the_reference_diff_after_convergence() {
    let (t, world) = converged(20, 4);
    let reason = Reason {
        node: None,
        instance: None,
        cause: Cause::Initial,
    };
    let desired: Vec<Object> = t.graph.desired().cloned().collect();
    assert_eq!(desired.len(), 20 + 1 + 12);
    assert!(diff(desired.iter().map(|o| (o, &reason)), &world, t.graph.ownership()).is_empty());
}

#[test]
fn replay_lists_every_decision_with_its_seq_and_reason() {
    let events = vec![
        Event::Tick(at(1_000)),
        Event::Applied(cluster("c", "https://c")),
        Event::Applied(machine("m", "c", "worker")),
        Event::Applied(user("alice", true, "Alice")),
        Event::Deleted(ObjectKey::new("Machine", NS, "m")),
    ];
    let bytes = journal_of(&events);
    let mut t = toy();
    let report = replay(JournalReader::new(&bytes[..]), &mut t.graph).unwrap();
    assert_eq!(report.events, 5);
    let text = report.to_string();
    assert_eq!(
        text,
        "\
seq 1: apply ConfigMap ichor-system/summary (enabled-count: initial)
seq 3: apply MachineClass ichor-system/m (machine-class[Machine ichor-system/m]: initial)
seq 4: apply ConfigMap ichor-system/summary (enabled-count: input user-enabled changed)
seq 4: apply UserStatus ichor-system/alice (user-status[User ichor-system/alice]: initial)
5 events, 5 evaluations, 4 actions, 0 failures
"
    );
    // The deleted machine's class was never observed, so there is nothing to delete.
    assert!(!text.contains("delete"));
}

#[test]
fn replay_stops_at_a_bad_line_naming_it_and_keeps_the_decisions_before_it() {
    let good = "{\"type\":\"applied\",\"seq\":1,\"object\":{\"kind\":\"User\",\"namespace\":\"ichor-system\",\"name\":\"a\",\"value\":{}}}\n";
    let text = format!("{good}{{\"type\":\"applied\",\"seq\":2,\"obj");
    let mut t = toy();
    let err = replay(JournalReader::new(text.as_bytes()), &mut t.graph).unwrap_err();
    assert!(err.to_string().contains("journal line 2"), "{err}");
    assert_eq!(err.partial.events, 1);
    assert_eq!(err.partial.actions.len(), 2);
}

#[test]
fn the_memo_stays_bounded_by_the_live_objects_however_many_events_are_evaluated() {
    let (mut t, mut world) = converged(100, 10);
    let settled = t.graph.memo_entries();
    // 100 users (2 instances and 2 digests each, a status desired), 10 clusters, 30 machines...
    assert!(settled > 400, "{settled}");

    // 5,000 events that edit, delete and re-create users, re-point machines and tick, each
    // evaluated on its own: the memo never outgrows the settled World it keeps returning to.
    let mut largest = 0;
    for i in 0..5_000u64 {
        let event = match i % 5 {
            0 => Event::Applied(user(&format!("u{}", i % 100), i % 3 == 0, &format!("n{i}"))),
            1 => Event::Deleted(ObjectKey::new("User", NS, format!("u{}", i % 100))),
            2 => Event::Applied(machine(
                &format!("c{}-m1", i % 10),
                &format!("c{}", (i / 5) % 10),
                "worker",
            )),
            3 => Event::Tick(at(1_000 + i as i64)),
            // Re-creates the user deleted three events ago.
            _ => Event::Applied(user(&format!("u{}", (i - 3) % 100), true, "back")),
        };
        world.apply(event);
        t.graph.evaluate(&mut world);
        largest = largest.max(t.graph.memo_entries());
    }
    assert!(largest <= settled, "{largest} > {settled}");

    // Back to the original objects: exactly the original memo size.
    for e in populate(100, 10) {
        world.apply(e);
    }
    converge(&mut t.graph, &mut world);
    assert_eq!(t.graph.memo_entries(), settled);

    // Deleting every input object empties the memo but for the singletons.
    let keys: Vec<ObjectKey> = world.iter().map(Object::key).collect();
    for k in keys {
        world.apply(Event::Deleted(k));
    }
    t.graph.evaluate(&mut world);
    assert!(t.graph.memo_entries() < 10, "{}", t.graph.memo_entries());
}

#[test]
fn a_count_input_changes_only_when_instances_come_or_go_and_an_existence_family_never_recomputes() {
    use ichor_graph::GraphBuilder;
    let mut b = GraphBuilder::new();
    let users = b.objects("users", "User");
    let any = b.node("any-user", users.count(), |n: &usize| *n > 0);
    let exists = b.exists("user-exists", &users);
    let mut graph = b.build().unwrap();
    let u = |name: &str, v: i64| Event::Applied(Object::new("User", "ns", name, json!({"v": v})));
    let mut world = world_of(vec![u("a", 1), u("b", 1)]);
    let eval = graph.evaluate(&mut world);
    assert_eq!(recomputed(&eval, "user-exists"), 2);
    assert_eq!(graph.output(&any), Some(true));
    let key = ObjectKey::new("User", "ns", "a");
    assert_eq!(graph.instance(&exists, &key), Some(true));

    // Editing a user: neither the count's reader nor the existence instance recomputes.
    world.apply(u("a", 2));
    let eval = graph.evaluate(&mut world);
    assert_eq!(eval.stats.recomputed, 0, "{:?}", eval.stats.nodes);

    // A user goes: the count changes (its reader recomputes, its answer does not), and the
    // existence instance goes with it.
    world.apply(Event::Deleted(key.clone()));
    let eval = graph.evaluate(&mut world);
    assert_eq!(recomputed(&eval, "any-user"), 1);
    assert_eq!(graph.instance(&exists, &key), None);
    world.apply(Event::Deleted(ObjectKey::new("User", "ns", "b")));
    graph.evaluate(&mut world);
    assert_eq!(graph.output(&any), Some(false));
}

#[test]
fn an_instance_digest_changes_with_the_output_only_and_is_absent_for_foreign_handles() {
    use ichor_graph::GraphBuilder;
    let mut b = GraphBuilder::new();
    let users = b.objects("users", "User");
    let big = b.family("big", &users, (), |_, u: &Object, _: &()| {
        u.value["v"].as_i64().unwrap_or(0) > 5
    });
    let mut graph = b.build().unwrap();
    let u = |v: i64| Event::Applied(Object::new("User", "ns", "a", json!({"v": v})));
    let key = ObjectKey::new("User", "ns", "a");
    let mut world = world_of(vec![u(1)]);
    graph.evaluate(&mut world);
    let first = graph.instance_digest(&big, &key);
    assert!(first.is_some());
    world.apply(u(2));
    graph.evaluate(&mut world);
    assert_eq!(
        graph.instance_digest(&big, &key),
        first,
        "an equal output keeps its digest"
    );
    world.apply(u(9));
    graph.evaluate(&mut world);
    assert_ne!(graph.instance_digest(&big, &key), first);
    assert_eq!(
        graph.instance_digest(&big, &ObjectKey::new("User", "ns", "b")),
        None
    );

    let mut other = GraphBuilder::new();
    let other_users = other.objects("users", "User");
    let foreign = other.family("big", &other_users, (), |_, _: &Object, _: &()| true);
    assert_eq!(graph.instance_digest(&foreign, &key), None);
}

#[test]
fn changed_instances_name_the_outputs_an_evaluation_changed_and_nothing_else() {
    use ichor_graph::GraphBuilder;
    let mut b = GraphBuilder::new();
    let users = b.objects("users", "User");
    let big = b.family("big", &users, (), |_, u: &Object, _: &()| {
        u.value["v"].as_i64().unwrap_or(0) > 5
    });
    let mut graph = b.build().unwrap();
    let u = |name: &str, v: i64| Event::Applied(Object::new("User", "ns", name, json!({"v": v})));
    let key = |name: &str| ObjectKey::new("User", "ns", name);
    let changed = |eval: &Evaluation| eval.changed_instances(&big).cloned().collect::<Vec<_>>();
    let mut world = world_of((0..30).map(|i| u(&format!("u{i:02}"), 1)).collect());
    let eval = graph.evaluate(&mut world);
    assert_eq!(
        changed(&eval).len(),
        30,
        "the first evaluation creates every instance"
    );

    // One instance recomputed to an equal output: nothing changed.
    world.apply(u("u07", 2));
    let eval = graph.evaluate(&mut world);
    assert_eq!(recomputed(&eval, "big"), 1);
    assert!(changed(&eval).is_empty());

    // One output changed, one instance went away: those two only, in key order.
    world.apply(u("u12", 9));
    world.apply(Event::Deleted(key("u03")));
    let eval = graph.evaluate(&mut world);
    assert_eq!(changed(&eval), vec![key("u03"), key("u12")]);
    // The primary family reports the objects that changed.
    assert_eq!(
        eval.changed_instances(&users).cloned().collect::<Vec<_>>(),
        vec![key("u03"), key("u12")]
    );

    let mut other = GraphBuilder::new();
    let other_users = other.objects("users", "User");
    let foreign = other.family("big", &other_users, (), |_, _: &Object, _: &()| true);
    world.apply(u("u20", 9));
    let eval = graph.evaluate(&mut world);
    assert_eq!(changed(&eval), vec![key("u20")]);
    assert_eq!(
        eval.changed_instances(&foreign).count(),
        0,
        "a foreign handle sees nothing"
    );
}
