//! The controller's render report: it follows the `cluster-auth` instances an evaluation
//! changed, never the whole family.

use ichor_graph::{Event, ObjectKey};
use serde_json::json;

use super::Controller;
use crate::identity::names;
use crate::sim::Sim;
use crate::sim::workload::{self, Workload};

fn settled(clusters: usize) -> Sim<std::io::Sink> {
    let mut sim = Sim::new(std::io::sink()).expect("the graph builds");
    let w = Workload {
        users: 5,
        clusters,
        machines: clusters * 3,
        events: 0,
        seed: 1,
    };
    workload::generate(&mut sim, w).expect("the setup settles");
    sim
}

fn cluster_key(i: usize) -> ObjectKey {
    ObjectKey::new("TalosCluster", "ichor-system", format!("cluster-{i:03}"))
}

fn with_url(c: &Controller, key: &ObjectKey, url: &str) -> Event {
    let mut o = c.world().get(key).cloned().expect("the cluster exists");
    o.value["spec"]["authentication"]["ichor"]["url"] = json!(url);
    Event::Applied(o)
}

#[test]
fn one_clusters_change_renders_and_reports_that_cluster_only() {
    let mut sim = settled(20);
    let c = sim.controller_mut();
    assert_eq!(
        c.renders.len(),
        20,
        "every cluster's render is recorded once settled"
    );
    let (one, other) = (cluster_key(4), cluster_key(11));
    // Corrupt what was reported of another cluster: a controller that looked at every cluster
    // after an event would now report that one as changed too.
    let real = c.renders.get(&other).cloned().expect("recorded");
    c.renders.insert(other.clone(), ([0; 32], "stale".to_owned()));

    let event = with_url(c, &one, "https://ichor-elsewhere.example.com");
    c.fold(event);
    let (eval, renders) = c.evaluate();
    assert_eq!(
        eval.stats.node(names::CLUSTER_AUTH).map(|n| n.recomputed),
        Some(1)
    );
    assert_eq!(
        eval.changed_instances(&c.handles().clusters).collect::<Vec<_>>(),
        vec![&one]
    );
    assert_eq!(renders.len(), 1, "{renders:?}");
    assert_eq!(renders[0].cluster, one);
    assert_ne!(renders[0].before, renders[0].after);
    assert_eq!(c.renders.get(&other).map(|(_, s)| s.as_str()), Some("stale"));
    c.renders.insert(other, real);
}

#[test]
fn a_cluster_gone_is_reported_once_and_forgotten() {
    let mut sim = settled(3);
    let c = sim.controller_mut();
    let gone = cluster_key(1);
    c.fold(Event::Deleted(gone.clone()));
    let (_, renders) = c.evaluate();
    assert_eq!(renders.len(), 1, "{renders:?}");
    assert_eq!(renders[0].cluster, gone);
    assert!(renders[0].before.is_some());
    assert_eq!(renders[0].after, None);
    assert!(!c.renders.contains_key(&gone));
    assert_eq!(c.renders.len(), 2);
    // Nothing changed since: nothing is reported.
    let (_, renders) = c.evaluate();
    assert!(renders.is_empty());
}

#[test]
fn an_unchanged_render_after_a_cluster_event_reports_nothing() {
    let mut sim = settled(3);
    let c = sim.controller_mut();
    let key = cluster_key(2);
    let mut o = c.world().get(&key).cloned().expect("the cluster exists");
    o.value["metadata"]["labels"] = json!({"team": "blue"});
    c.fold(Event::Applied(o));
    let (eval, renders) = c.evaluate();
    assert_eq!(
        eval.stats.node(names::CLUSTER_AUTH).map(|n| n.recomputed),
        Some(1)
    );
    assert!(renders.is_empty(), "{renders:?}");
}
