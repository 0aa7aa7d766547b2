//! `ichor config apply` through the real binary against the test kit's fake Talos API
//! ([`ichor_testkit::talos`]: the machine API over mutual TLS with an Ed25519 Talos CA and an
//! `os:admin` client certificate whose key is labelled `ED25519 PRIVATE KEY`, as talosctl writes
//! it) and one kube-apiserver `/readyz` per node (127.0.0.1, .2, .3 on the same port) that goes
//! down after an apply (the node's on-apply hook) and comes back. Every request is recorded: the
//! order, the mode, the target node, the data, the client certificate's role, and when each
//! `/readyz` came back.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::{
    net::SocketAddr,
    path::PathBuf,
    process::{Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use ichor_testkit::talos::{FakeTalos, Mode, Rpc};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NODES: [(&str, &str); 3] = [
    ("cp-1", "127.0.0.1"),
    ("cp-2", "127.0.0.2"),
    ("cp-3", "127.0.0.3"),
];
/// How long a fake apiserver stays down after an apply.
const DOWN_FOR: Duration = Duration::from_millis(300);

const MAIN_DOC: &str = "version: v1alpha1\nmachine:\n  type: controlplane\n";
/// The document each node runs before the rollout (one Talos's loader takes, so a rollback to
/// it is accepted).
const OLD_AUTH_DOC: &str =
    "apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfiguration:\n  marker: old-trust\n";
const HOSTNAME_DOC: &str = "apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: keep-me # as written\n";

// ---------------------------------------------------------------------------------------------
// The fake kube-apiserver /readyz of one node.

#[derive(Default)]
struct Apiserver {
    /// An apply does not restart it (it stays ready throughout).
    no_restart: Mutex<bool>,
    /// `None`: up. `Some(None)`: down for good. `Some(Some(t))`: down until `t`.
    down: Mutex<Option<Option<Instant>>>,
    /// When it first answered 200 after having been down.
    came_back_at: Mutex<Option<Instant>>,
    never_back: Mutex<bool>,
    hits: Mutex<usize>,
    /// Whether a probe saw it down since its last restart: a restarting apiserver is seen down
    /// at least once, however late the first probe comes on a loaded machine.
    seen_down: Mutex<bool>,
}

impl Apiserver {
    fn restart(&self) {
        if *self.no_restart.lock().unwrap() {
            return;
        }
        let never = *self.never_back.lock().unwrap();
        *self.down.lock().unwrap() = Some(if never {
            None
        } else {
            Some(Instant::now() + DOWN_FOR)
        });
        *self.came_back_at.lock().unwrap() = None;
        *self.seen_down.lock().unwrap() = false;
    }
    fn ready_now(&self) -> bool {
        *self.hits.lock().unwrap() += 1;
        let mut down = self.down.lock().unwrap();
        match *down {
            None => true,
            Some(None) => false,
            Some(Some(until)) if Instant::now() < until || !*self.seen_down.lock().unwrap() => {
                *self.seen_down.lock().unwrap() = true;
                false
            }
            Some(Some(_)) => {
                *down = None;
                *self.came_back_at.lock().unwrap() = Some(Instant::now());
                true
            }
        }
    }
}

mod harness;
mod journal;
mod planted_record;
mod preflight;
mod rollout;

use harness::{Harness, addresses};
