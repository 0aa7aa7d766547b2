//! `ichor config apply` through the real binary against servers that speak the Talos machine
//! API over mutual TLS (a tonic server with an Ed25519 Talos CA and an `os:admin` client
//! certificate whose key is labelled `ED25519 PRIVATE KEY`, as talosctl writes it) and one
//! kube-apiserver `/readyz` per node (127.0.0.1, .2, .3 on the same port) that goes down after
//! an apply and comes back. Every request is recorded: the order, the mode, the target node,
//! the data, the client certificate's role, and when each `/readyz` came back.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::{
    collections::{HashMap, HashSet},
    net::SocketAddr,
    path::PathBuf,
    process::{Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use base64::{Engine, engine::general_purpose::STANDARD};
use ichor_talos::proto::{
    ApplyConfiguration, ApplyConfigurationRequest, ApplyConfigurationResponse, Version, VersionInfo,
    VersionResponse,
    apply_configuration_request::Mode,
    machine_service_server::{MachineService, MachineServiceServer},
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::{Request, Response, Status};

const NODES: [(&str, &str); 3] = [
    ("cp-1", "127.0.0.1"),
    ("cp-2", "127.0.0.2"),
    ("cp-3", "127.0.0.3"),
];
/// How long a fake apiserver stays down after an apply.
const DOWN_FOR: Duration = Duration::from_millis(300);

const MAIN_DOC: &str = "version: v1alpha1\nmachine:\n  type: controlplane\n";
const OLD_AUTH_DOC: &str =
    "apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfig:\n  marker: old-trust\n";
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

// ---------------------------------------------------------------------------------------------
// The fake Talos API (apid): routes by the `node` metadata.

#[derive(Debug, Clone)]
struct Applied {
    node: String,
    mode: i32,
    data: String,
    organizations: Vec<String>,
    at: Instant,
}

#[derive(Default)]
struct Talos {
    applies: Mutex<Vec<Applied>>,
    versions: Mutex<Vec<String>>,
    /// Nodes whose ApplyConfiguration fails.
    failing: Mutex<HashSet<String>>,
    apiservers: HashMap<String, Arc<Apiserver>>,
}

fn target_node<T>(request: &Request<T>) -> Result<String, Status> {
    let values: Vec<_> = request.metadata().get_all("node").iter().collect();
    assert!(
        request.metadata().get("nodes").is_none(),
        "the deprecated `nodes` key is never sent"
    );
    match values.as_slice() {
        [one] => Ok(one.to_str().unwrap().to_owned()),
        _ => Err(Status::invalid_argument(
            "exactly one `node` metadata value is expected",
        )),
    }
}

fn organizations<T>(request: &Request<T>) -> Vec<String> {
    let certs = request.peer_certs().expect("a client certificate (mutual TLS)");
    let (_, cert) = x509_parser::parse_x509_certificate(certs[0].as_ref()).unwrap();
    cert.subject()
        .iter_organization()
        .map(|o| o.as_str().unwrap().to_owned())
        .collect()
}

struct Apid(Arc<Talos>);

#[tonic::async_trait]
impl MachineService for Apid {
    async fn apply_configuration(
        &self,
        request: Request<ApplyConfigurationRequest>,
    ) -> Result<Response<ApplyConfigurationResponse>, Status> {
        let node = target_node(&request)?;
        let organizations = organizations(&request);
        let body = request.into_inner();
        self.0.applies.lock().unwrap().push(Applied {
            node: node.clone(),
            mode: body.mode,
            data: String::from_utf8(body.data).unwrap(),
            organizations: organizations.clone(),
            at: Instant::now(),
        });
        if !organizations.iter().any(|o| o == "os:admin") {
            return Err(Status::permission_denied("not authorized"));
        }
        if body.mode == Mode::Reboot as i32 {
            return Err(Status::unimplemented(
                "apply configuration with reboot is not supported",
            ));
        }
        if self.0.failing.lock().unwrap().contains(&node) {
            return Err(Status::invalid_argument(
                "1 error occurred:\n\t* fake validation failure",
            ));
        }
        self.0.apiservers[&node].restart();
        Ok(Response::new(ApplyConfigurationResponse {
            messages: vec![ApplyConfiguration {
                metadata: None,
                warnings: vec![],
                mode: Mode::NoReboot as i32,
                mode_details: "Applied configuration without a reboot".to_owned(),
            }],
        }))
    }

    async fn version(&self, request: Request<()>) -> Result<Response<VersionResponse>, Status> {
        let node = target_node(&request)?;
        self.0.versions.lock().unwrap().push(node);
        Ok(Response::new(VersionResponse {
            messages: vec![Version {
                metadata: None,
                version: Some(VersionInfo {
                    tag: "v1.14.3".to_owned(),
                    sha: "abc".to_owned(),
                }),
            }],
        }))
    }
}

mod harness;
mod preflight;
mod rollout;

use harness::{Harness, addresses};
