//! A generated journal of a large installation under churn, for benchmarks and memory
//! measurements (`ichor-controller gen-journal`).
//!
//! The installation: `users` IchorUsers (every tenth without a password), `clusters`
//! Ichor-issuer TalosClusters, `machines` control planes spread over them. It is settled first
//! (keys, certificates, trust, renders, statuses, and every machine reporting the rendered
//! document as applied), then churned until the journal holds `events` events. Each churn event
//! is followed by the simulated applier's results, as a live controller's journal would be:
//!
//! | share | change |
//! |---|---|
//! | 70 % | an IchorUser's spec (display name; new generation) |
//! | 15 % | a machine reports an old or the current document hash |
//! |  1 % | a tick, 1 to 60 s later (a controller ticks at deadlines and at most once a second) |
//! |  8 % | a temporary user created or deleted |
//! |  5 % | a cluster's Ichor issuer URL switched |
//! |  1 % | a sign-in: an existing credentials entry rewritten (the Secret holds every user) |
//!
//! The choice is a fixed xorshift sequence from `seed`, so a spec always yields the same
//! churn (certificates differ between runs: their keys are random).

use std::io::Write;

use ichor_graph::{Event, Object, ObjectKey};
use ichor_renderers::trust::NAMESPACE;
use jiff::{SignedDuration, Timestamp};
use serde_json::json;

use super::fixtures::{self, Auth};
use super::{Sim, SimError};

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    /// IchorUsers.
    pub users: usize,
    /// Ichor-issuer TalosClusters.
    pub clusters: usize,
    /// Control-plane TalosMachines, spread round-robin over the clusters.
    pub machines: usize,
    /// Events in the journal (setup included); at least the setup's.
    pub events: u64,
    /// The churn's seed.
    pub seed: u64,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            users: 1000,
            clusters: 50,
            machines: 150,
            events: 100_000,
            seed: 1,
        }
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % (n.max(1) as u64)).unwrap_or(0)
    }
}

/// The first instant of generated journals.
pub fn start() -> Timestamp {
    Timestamp::from_second(1_798_761_600).unwrap_or(Timestamp::UNIX_EPOCH) // 2027-01-01T00:00:00Z
}

fn user_name(i: usize) -> String {
    format!("user-{i:05}")
}

fn cluster_name(i: usize) -> String {
    format!("cluster-{i:03}")
}

fn machine_name(i: usize) -> String {
    format!("cp-{i:04}")
}

/// The rendered documents of a cluster, as the machine controller would report them applied.
fn rendered<W: Write>(sim: &Sim<W>, cluster: &str) -> Vec<(String, String)> {
    let key = ObjectKey::new("TalosCluster", NAMESPACE, cluster);
    let c = sim.controller();
    c.graph()
        .instance(&c.handles().clusters, &key)
        .map(|a| a.documents.into_iter().collect())
        .unwrap_or_default()
}

fn observed<W: Write>(sim: &Sim<W>, kind: &str, name: &str) -> Option<Object> {
    sim.controller()
        .world()
        .get(&ObjectKey::new(kind, NAMESPACE, name))
        .cloned()
}

/// Generates the workload's journal into `sim` (whose writer receives it).
///
/// # Errors
/// The journal could not be written, or the simulation failed.
pub fn generate<W: Write>(sim: &mut Sim<W>, w: Workload) -> Result<(), SimError> {
    let clusters = w.clusters.max(1);
    let mut now = start();
    sim.push(Event::Applied(fixtures::installation("5m", "12h")))?;
    sim.push(Event::Applied(fixtures::issuer_service("10.96.0.10")))?;
    for c in 0..clusters {
        let n = u32::try_from(c).unwrap_or(0);
        sim.push(Event::Applied(fixtures::cluster(
            &cluster_name(c),
            n,
            Auth::Ichor,
        )))?;
    }
    for m in 0..w.machines {
        let address = format!("10.200.{}.{}", m / 250, m % 250 + 1);
        let cp = fixtures::control_plane(&machine_name(m), &cluster_name(m % clusters), &address, &[]);
        sim.push(Event::Applied(cp))?;
    }
    let names: Vec<String> = (0..w.users).map(user_name).collect();
    for n in &names {
        sim.push(Event::Applied(fixtures::user(n, &["viewer"], false, 1)))?;
    }
    let with_password: Vec<&str> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 10 != 9)
        .map(|(_, n)| n.as_str())
        .collect();
    sim.push(Event::Applied(fixtures::credentials(&with_password)))?;
    sim.step(Event::Tick(now))?;
    // Every control plane applies the rendered configuration (`ichor config apply`).
    for m in 0..w.machines {
        let applied = rendered(sim, &cluster_name(m % clusters));
        if let Some(o) = observed(sim, "TalosMachine", &machine_name(m)) {
            sim.push(Event::Applied(fixtures::with_applied(&o, &applied)))?;
        }
    }
    sim.settle()?;

    let mut rng = Rng(w.seed.max(1));
    let mut temp_alive = [false; 100];
    let mut generation = vec![1i64; w.users];
    let mut urls_flipped = vec![false; clusters];
    while sim.journal_seq().unwrap_or(0) < w.events {
        let roll = rng.below(100);
        let event = if roll < 70 && w.users > 0 {
            let i = rng.below(w.users);
            let Some(mut u) = observed(sim, "IchorUser", &names[i]) else {
                continue;
            };
            generation[i] += 1;
            u.value["spec"]["displayName"] = json!(format!("{} #{}", names[i], generation[i]));
            u.value["metadata"]["generation"] = json!(generation[i]);
            Event::Applied(u)
        } else if roll < 85 && w.machines > 0 {
            let m = rng.below(w.machines);
            let Some(o) = observed(sim, "TalosMachine", &machine_name(m)) else {
                continue;
            };
            let applied = if rng.below(2) == 0 {
                rendered(sim, &cluster_name(m % clusters))
            } else {
                vec![("KubeAuthenticationConfig".to_owned(), "0".repeat(64))]
            };
            Event::Applied(fixtures::with_applied(&o, &applied))
        } else if roll < 86 {
            let step = i64::try_from(rng.below(60)).unwrap_or(0) + 1;
            now = now.checked_add(SignedDuration::from_secs(step)).unwrap_or(now);
            Event::Tick(now)
        } else if roll < 94 {
            let t = rng.below(temp_alive.len());
            let name = format!("temp-{t:03}");
            let alive = temp_alive.get(t).copied().unwrap_or(false);
            if let Some(a) = temp_alive.get_mut(t) {
                *a = !alive;
            }
            let u = fixtures::user(&name, &["operator"], false, 1);
            if alive {
                fixtures::deleted(&u)
            } else {
                Event::Applied(u)
            }
        } else if roll < 99 {
            let c = rng.below(clusters);
            let Some(mut o) = observed(sim, "TalosCluster", &cluster_name(c)) else {
                continue;
            };
            let flipped = urls_flipped.get(c).copied().unwrap_or(false);
            if let Some(f) = urls_flipped.get_mut(c) {
                *f = !flipped;
            }
            let url = if flipped {
                "https://ichor.example.com"
            } else {
                "https://ichor-2.example.com"
            };
            o.value["spec"]["authentication"]["ichor"]["url"] = json!(url);
            Event::Applied(o)
        } else {
            // A sign-in rewrites one existing entry: the Secret changes, its keys do not.
            let Some(mut creds) = observed(
                sim,
                "Secret",
                ichor_renderers::auth::credentials::CREDENTIALS_SECRET_NAME,
            ) else {
                continue;
            };
            let i = rng.below(with_password.len());
            if let Some(name) = with_password.get(i) {
                let entry = format!("{{\"v\":1,\"signIn\":{}}}", rng.below(1000));
                creds.value["data"][*name] = json!(base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    entry.as_bytes()
                ));
            }
            Event::Applied(creds)
        };
        sim.step(event)?;
    }
    sim.flush()
}
