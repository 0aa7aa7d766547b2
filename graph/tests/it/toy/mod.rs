//! A toy graph shaped like the real one, for tests and benches:
//! users → per-user status (emitted) and per-user "enabled" → enabled count (emitted summary);
//! clusters + config → per-cluster doc → per-machine class (joined by the machine's cluster);
//! now + config + the signing Secret → key rotation (an effect with a deadline).
#![allow(dead_code, clippy::unwrap_used)]

use ichor_graph::{
    Action, Desired, EffectRequest, Event, Family, Graph, GraphBuilder, JournalWriter, Node, Object,
    ObjectKey, Timed, World,
};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub const NS: &str = "ichor-system";
pub const MANAGED: &str = "app.kubernetes.io/managed-by";

pub fn owned_meta() -> Value {
    json!({"labels": {MANAGED: "ichor"}})
}

pub fn user(name: &str, enabled: bool, display: &str) -> Object {
    Object::new(
        "User",
        NS,
        name,
        json!({"spec": {"enabled": enabled, "displayName": display}}),
    )
}

pub fn cluster(name: &str, endpoint: &str) -> Object {
    Object::new("Cluster", NS, name, json!({"spec": {"endpoint": endpoint}}))
}

pub fn machine(name: &str, cluster: &str, role: &str) -> Object {
    Object::new(
        "Machine",
        NS,
        name,
        json!({"spec": {"cluster": cluster, "role": role}}),
    )
}

pub fn config(issuer: &str, rotate_every: i64) -> Object {
    Object::new(
        "ConfigMap",
        NS,
        "config",
        json!({"data": {"issuer": issuer, "rotateEvery": rotate_every}}),
    )
}

pub fn config_key() -> ObjectKey {
    ObjectKey::new("ConfigMap", NS, "config")
}

pub fn secret_key() -> ObjectKey {
    ObjectKey::new("Secret", NS, "signing")
}

pub fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterDoc {
    pub endpoint: String,
    pub issuer: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyRequest {
    pub secret: String,
    pub kid: String,
}

/// Handles to the toy graph's nodes.
pub struct Toy {
    pub graph: Graph,
    pub user_status: Family<Desired>,
    pub user_enabled: Family<bool>,
    pub enabled_count: Node<Desired>,
    pub cluster_doc: Family<ClusterDoc>,
    pub machine_class: Family<Desired>,
    pub rotation: Node<Desired>,
}

pub fn toy() -> Toy {
    let mut b = GraphBuilder::new();
    let now = b.now();
    let config = b.object("config", config_key());
    let signing = b.object("signing-secret", secret_key());
    let users = b.objects("users", "User");
    let clusters = b.objects("clusters", "Cluster");
    let machines = b.objects("machines", "Machine");

    let user_status = b.family("user-status", &users, (), |k: &ObjectKey, u: &Object, _: &()| {
        let enabled = u.value["spec"]["enabled"].as_bool().unwrap_or(false);
        let display = u.value["spec"]["displayName"].clone();
        Desired {
            objects: vec![Object::new(
                "UserStatus",
                &*k.namespace,
                &*k.name,
                json!({"metadata": owned_meta(), "spec": {"ready": enabled, "displayName": display}}),
            )],
            effects: vec![],
        }
    });
    b.emit(&user_status);

    let user_enabled = b.family("user-enabled", &users, (), |_: &ObjectKey, u: &Object, _: &()| {
        u.value["spec"]["enabled"].as_bool().unwrap_or(false)
    });
    let enabled_count = b.node("enabled-count", user_enabled.all(), |all| {
        let n = all.values().filter(|e| **e).count();
        Desired {
            objects: vec![Object::new(
                "ConfigMap",
                NS,
                "summary",
                json!({"metadata": owned_meta(), "data": {"enabled": n}}),
            )],
            effects: vec![],
        }
    });
    b.emit(&enabled_count);

    let cluster_doc = b.family(
        "cluster-doc",
        &clusters,
        config,
        |_: &ObjectKey, c: &Object, cfg: &Option<Object>| ClusterDoc {
            endpoint: c.value["spec"]["endpoint"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            issuer: cfg
                .as_ref()
                .and_then(|o| o.value["data"]["issuer"].as_str())
                .unwrap_or("none")
                .to_owned(),
        },
    );

    let machine_class = b.family(
        "machine-class",
        &machines,
        cluster_doc.joined(|m: &Object| {
            m.value["spec"]["cluster"]
                .as_str()
                .map(|c| ObjectKey::new("Cluster", &m.namespace, c))
        }),
        |k: &ObjectKey, m: &Object, doc: &Option<ClusterDoc>| {
            let Some(doc) = doc else { return Desired::default() };
            Desired {
                objects: vec![Object::new(
                    "MachineClass",
                    &*k.namespace,
                    &*k.name,
                    json!({"metadata": owned_meta(), "spec": {
                        "endpoint": doc.endpoint, "issuer": doc.issuer, "role": m.value["spec"]["role"],
                    }}),
                )],
                effects: vec![],
            }
        },
    );
    b.emit(&machine_class);

    let rotation = b.node_timed("rotation", (now, config, signing), |(now, cfg, secret)| {
        let every = cfg
            .as_ref()
            .and_then(|c| c.value["data"]["rotateEvery"].as_i64())
            .unwrap_or(0);
        if every <= 0 {
            return Timed::forever(Desired::default());
        }
        let t = now.as_second();
        let epoch = t - t.rem_euclid(every);
        let kid = format!("k-{epoch}");
        let have = secret
            .as_ref()
            .is_some_and(|s| s.value["data"].get(&kid).is_some());
        let effects = if have {
            vec![]
        } else {
            vec![
                EffectRequest::new(
                    format!("generate-key {kid}"),
                    &KeyRequest {
                        secret: "signing".into(),
                        kid,
                    },
                )
                .unwrap(),
            ]
        };
        Timed::until(
            Desired {
                objects: vec![],
                effects,
            },
            at(epoch + every),
        )
    });
    b.emit(&rotation);

    Toy {
        graph: b.build().unwrap(),
        user_status,
        user_enabled,
        enabled_count,
        cluster_doc,
        machine_class,
        rotation,
    }
}

/// A World of `users` users, `clusters` clusters and three machines per cluster, plus config.
pub fn populate(users: usize, clusters: usize) -> Vec<Event> {
    let mut events = vec![
        Event::Tick(at(1_000)),
        Event::Applied(config("https://issuer", 0)),
    ];
    for i in 0..users {
        events.push(Event::Applied(user(&format!("u{i}"), i.is_multiple_of(2), "x")));
    }
    for c in 0..clusters {
        events.push(Event::Applied(cluster(
            &format!("c{c}"),
            &format!("https://c{c}:6443"),
        )));
        for m in 0..3 {
            let role = if m == 0 { "controlplane" } else { "worker" };
            events.push(Event::Applied(machine(
                &format!("c{c}-m{m}"),
                &format!("c{c}"),
                role,
            )));
        }
    }
    events
}

/// A World holding `events`.
pub fn world_of(events: Vec<Event>) -> World {
    let mut w = World::new();
    for e in events {
        w.apply(e);
    }
    w
}

/// A journal of `events`, numbered from 1.
pub fn journal_of(events: &[Event]) -> Vec<u8> {
    let mut w = JournalWriter::new(Vec::new());
    for e in events {
        w.append(e).unwrap();
    }
    w.into_inner()
}

/// The journal the benchmarks replay: the World of `populate(1_000, 50)`, then changes up to
/// `events` events in all, most of them edits of a user's display name.
pub fn churn_journal(events: usize) -> Vec<u8> {
    let mut w = JournalWriter::new(Vec::new());
    let mut n = 0;
    for e in populate(1_000, 50) {
        w.append(&e).unwrap();
        n += 1;
    }
    let mut i = 0u64;
    while n < events {
        i += 1;
        let e = match i % 100 {
            0 => Event::Applied(cluster(&format!("c{}", i % 50), &format!("https://e{i}"))),
            1 => Event::Applied(machine(
                &format!("c{}-m1", i % 50),
                &format!("c{}", (i / 7) % 50),
                "worker",
            )),
            2 => Event::Tick(at(1_000 + i as i64)),
            // One in a hundred events enables or disables a user, which recomputes the
            // enabled-count aggregate over all 1,000 users.
            3 => Event::Applied(user(
                &format!("u{}", i % 1_000),
                (i / 100).is_multiple_of(2),
                &format!("n{i}"),
            )),
            // The rest edit a user's display name.
            _ => Event::Applied(user(
                &format!("u{}", i % 1_000),
                (i % 1_000).is_multiple_of(2),
                &format!("n{i}"),
            )),
        };
        w.append(&e).unwrap();
        n += 1;
    }
    w.into_inner()
}

/// Evaluates and performs every action (resource versions counting on from `rv`) until none
/// is left, for at most `rounds` evaluations; returns the rounds needed, `None` without a
/// fixed point. No evaluation may fail.
pub fn settle(graph: &mut Graph, world: &mut World, rv: &mut u64, rounds: usize) -> Option<usize> {
    for round in 0..rounds {
        let eval = graph.evaluate(world);
        assert!(eval.failures.is_empty(), "{:?}", eval.failures);
        if eval.actions.is_empty() {
            return Some(round);
        }
        for a in &eval.actions {
            *rv += 1;
            for e in perform(world, a, *rv) {
                world.apply(e);
            }
        }
    }
    None
}

/// Deep-merges `patch` into `target`: objects recurse, everything else replaces (like a
/// server-side apply of the owned fields).
pub fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// What a simulated applier writes back for one action, as events.
pub fn perform(world: &World, action: &Action, rv: u64) -> Vec<Event> {
    match action {
        Action::Apply { object, .. } => {
            let mut observed = world.get(&object.key()).cloned().unwrap_or_else(|| {
                Object::new(
                    object.kind.clone(),
                    object.namespace.clone(),
                    object.name.clone(),
                    json!({}),
                )
            });
            merge(&mut observed.value, &object.value);
            observed.resource_version = Some(rv.to_string());
            vec![Event::Applied(observed)]
        }
        Action::Delete { key, .. } => vec![Event::Deleted(key.clone())],
        Action::Effect { request, .. } => {
            let req: KeyRequest = serde_json::from_value(request.request.clone()).unwrap();
            let key = ObjectKey::new("Secret", NS, req.secret);
            let mut secret = world
                .get(&key)
                .cloned()
                .unwrap_or_else(|| Object::new("Secret", NS, "signing", json!({"data": {}})));
            merge(
                &mut secret.value,
                &json!({"data": {req.kid: "c2VjcmV0LWtleS1tYXRlcmlhbA=="}}),
            );
            secret.resource_version = Some(rv.to_string());
            vec![Event::Applied(secret)]
        }
    }
}
