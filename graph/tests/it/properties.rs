//! Property tests of the engine on the toy graph.

use ichor_graph::{
    Cause, EffectRequest, Event, Graph, JournalReader, Object, ObjectKey, Reason, World, diff, replay,
};
use proptest::prelude::*;
use serde_json::json;

use crate::toy::*;

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        4 => (0..6u8, any::<bool>(), 0..3u8)
            .prop_map(|(i, en, d)| Event::Applied(user(&format!("u{i}"), en, &format!("d{d}")))),
        1 => (0..6u8).prop_map(|i| Event::Deleted(ObjectKey::new("User", NS, format!("u{i}")))),
        2 => (0..3u8, 0..3u8).prop_map(|(c, e)| Event::Applied(cluster(&format!("c{c}"), &format!("e{e}")))),
        1 => (0..3u8).prop_map(|c| Event::Deleted(ObjectKey::new("Cluster", NS, format!("c{c}")))),
        3 => (0..6u8, 0..4u8, any::<bool>()).prop_map(|(m, c, cp)| {
            Event::Applied(machine(&format!("m{m}"), &format!("c{c}"), if cp { "controlplane" } else { "worker" }))
        }),
        1 => (0..6u8).prop_map(|m| Event::Deleted(ObjectKey::new("Machine", NS, format!("m{m}")))),
        1 => (0..2u8, prop_oneof![Just(0i64), Just(100i64)])
            .prop_map(|(i, r)| Event::Applied(config(&format!("i{i}"), r))),
        1 => Just(Event::Deleted(config_key())),
        2 => (0..1_000i64).prop_map(|s| Event::Tick(at(s))),
        1 => (0..3u8).prop_map(|g| Event::Applied(Object::new("UserStatus", NS, format!("u{g}"),
            json!({"metadata": owned_meta(), "spec": {"ready": "tampered"}})))),
        1 => (0..3u8, any::<bool>()).prop_map(|(g, owned)| {
            let meta = if owned { owned_meta() } else { json!({}) };
            Event::Applied(Object::new("MachineClass", NS, format!("ghost{g}"), json!({"metadata": meta})))
        }),
    ]
}

fn desired_of(graph: &Graph) -> Vec<Object> {
    graph.desired().cloned().collect()
}

fn effects_of(graph: &Graph) -> Vec<EffectRequest> {
    graph.requested_effects().cloned().collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_same_journal_always_yields_the_same_actions(events in prop::collection::vec(event(), 0..60)) {
        let bytes = journal_of(&events);
        let mut a = toy();
        let first = replay(JournalReader::new(&bytes[..]), &mut a.graph).unwrap();
        let again = replay(JournalReader::new(&bytes[..]), &mut a.graph).unwrap();
        let mut b = toy();
        let other = replay(JournalReader::new(&bytes[..]), &mut b.graph).unwrap();
        prop_assert_eq!(&first, &again);
        prop_assert_eq!(&first, &other);
        prop_assert_eq!(first.to_string(), other.to_string());
        prop_assert_eq!(first.events, events.len() as u64);
    }

    #[test]
    fn performing_the_actions_reaches_a_fixed_point_the_reference_diff_agrees_with(
        chunks in prop::collection::vec(prop::collection::vec(event(), 0..12), 1..6),
    ) {
        let mut t = toy();
        let mut world = World::new();
        let mut rv = 0;
        for chunk in chunks {
            for e in chunk {
                world.apply(e);
            }
            prop_assert!(settle(&mut t.graph, &mut world, &mut rv, 30).is_some(), "no fixed point");

            // At the fixed point nothing is requested, and the full reference diff is empty.
            prop_assert!(effects_of(&t.graph).is_empty());
            let r = Reason { node: None, instance: None, cause: Cause::Initial };
            let desired = desired_of(&t.graph);
            prop_assert!(diff(desired.iter().map(|o| (o, &r)), &world, t.graph.ownership()).is_empty());

            // The incremental state equals a graph evaluated from scratch on the same World.
            let mut fresh = toy();
            let mut copy = world.clone();
            let eval = fresh.graph.evaluate(&mut copy);
            prop_assert!(eval.actions.is_empty(), "{:?}", eval.actions);
            prop_assert_eq!(desired_of(&fresh.graph), desired);
            prop_assert!(!world.has_pending_changes());
        }
    }

    #[test]
    fn the_incremental_graph_desires_what_a_fresh_graph_desires_after_every_batch(
        batches in prop::collection::vec(prop::collection::vec(event(), 0..8), 1..8),
    ) {
        let mut t = toy();
        let mut world = World::new();
        for batch in batches {
            for e in batch {
                world.apply(e);
            }
            let mut copy = world.clone();
            t.graph.evaluate(&mut world);
            let mut fresh = toy();
            fresh.graph.evaluate(&mut copy);
            prop_assert_eq!(desired_of(&fresh.graph), desired_of(&t.graph));
            prop_assert_eq!(effects_of(&fresh.graph), effects_of(&t.graph));
            prop_assert_eq!(fresh.graph.next_deadline(world.now()), t.graph.next_deadline(world.now()));
        }
    }

    #[test]
    fn the_order_of_independent_events_in_one_batch_does_not_change_the_result(
        before in prop::collection::vec(event(), 0..20),
        (batch, shuffled) in prop::collection::btree_map(0..40u8, event(), 0..12)
            .prop_map(|m| m.into_values().collect::<Vec<_>>())
            .prop_map(|v| {
                // Keep one event per object key so the batch's events are independent.
                let mut seen = std::collections::BTreeSet::new();
                v.into_iter().filter(|e| seen.insert(key_of(e))).collect::<Vec<_>>()
            })
            .prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle())),
    ) {
        let run = |batch: &[Event]| {
            let mut t = toy();
            let mut world = World::new();
            for e in &before {
                world.apply(e.clone());
            }
            t.graph.evaluate(&mut world);
            for e in batch {
                world.apply(e.clone());
            }
            let eval = t.graph.evaluate(&mut world);
            (eval.actions, eval.stats.recomputed, desired_of(&t.graph))
        };
        prop_assert_eq!(run(&batch), run(&shuffled));
    }
}

fn key_of(e: &Event) -> Option<ObjectKey> {
    match e {
        Event::Applied(o) => Some(o.key()),
        Event::Deleted(k) => Some(k.clone()),
        Event::Tick(_) => None,
    }
}
