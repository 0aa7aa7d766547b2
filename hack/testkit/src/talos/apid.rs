//! The fake apid's two gRPC services, routed by the `node` metadata key: the machine API
//! (`Version`, `ApplyConfiguration`) and the COSI state's `Get` of the machine configuration.
//!
//! Each call is recorded first (node, what, client organizations, time), then answered in the
//! order Talos ≥ 1.14 checks: an injected failure, an unknown node (`Unavailable`), and for
//! `ApplyConfiguration` the role `os:admin` (`PermissionDenied` "not authorized"), mode `REBOOT`
//! (`Unimplemented`), a `KubeAuthenticationConfig` document Talos's configuration loader
//! refuses (a key it does not know, a `configuration` that is not a mapping: `InvalidArgument`),
//! a configuration without a v1alpha1 document (`InvalidArgument`). A
//! successful apply of mode `NO_REBOOT` or `AUTO` (not a dry run) replaces the node's
//! configuration, answers `NO_REBOOT`, and then runs the node's on-apply hook in the background
//! (Talos answers before the kube-apiserver restarts). `STAGED` and `TRY` are recorded and
//! answered but change nothing.
//!
//! `Version` checks no role and answers as a Talos node on bare metal does: the tag, a build,
//! the platform (`metal`, mode `metal`) and the features (RBAC on). `State.Get` needs the role
//! `os:admin`, as Talos's COSI access filter demands for a resource whose definition is
//! sensitive (the machine configuration is), and answers `NotFound` in the words of COSI's
//! in-memory state. `hack/talos/probe` (talosctl's client library) reads all three as Talos.

use std::sync::Arc;
use std::time::Instant;

use ichor_talos::client::{MACHINE_CONFIG_ID, MACHINE_CONFIG_NAMESPACE, MACHINE_CONFIG_TYPE};
use ichor_talos::proto::{
    ApplyConfiguration, ApplyConfigurationRequest, ApplyConfigurationResponse, FeaturesInfo, PlatformInfo,
    Version, VersionInfo, VersionResponse,
    apply_configuration_request::Mode,
    config::MachineConfigSpec,
    cosi::{GetRequest, GetResponse, Metadata, Resource, Spec, state_server::State},
    machine_service_server::MachineService,
};
use prost::Message as _;
use tonic::{Request, Response, Status};

use super::{Call, Rpc, Shared};

/// The machine API and the COSI state over one [`Shared`].
#[derive(Clone)]
pub(super) struct Apid(pub(super) Arc<Shared>);

/// The one `node` metadata value.
fn target_node<T>(request: &Request<T>) -> Result<String, Status> {
    if request.metadata().get("nodes").is_some() {
        return Err(Status::invalid_argument(
            "the deprecated `nodes` metadata key was sent (fake apid: a client must send `node`)",
        ));
    }
    let values: Vec<_> = request.metadata().get_all("node").iter().collect();
    match values.as_slice() {
        [one] => one
            .to_str()
            .map(str::to_owned)
            .map_err(|_| Status::invalid_argument("the `node` metadata value is not ASCII")),
        _ => Err(Status::invalid_argument(
            "exactly one `node` metadata value is expected",
        )),
    }
}

/// The Organizations of the client's leaf certificate.
fn organizations<T>(request: &Request<T>) -> Vec<String> {
    let Some(certs) = request.peer_certs() else {
        return Vec::new();
    };
    let Some(leaf) = certs.first() else {
        return Vec::new();
    };
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(leaf.as_ref()) else {
        return Vec::new();
    };
    cert.subject()
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_owned))
        .collect()
}

/// Whether the multi-document YAML `data` has a v1alpha1 document (`version: v1alpha1`, no kind).
fn has_v1alpha1(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    serde_yaml::Deserializer::from_str(text).any(|doc| {
        let Ok(value) = <serde_yaml::Value as serde::Deserialize>::deserialize(doc) else {
            return false;
        };
        value.get("kind").is_none()
            && value.get("version").and_then(serde_yaml::Value::as_str) == Some("v1alpha1")
    })
}

/// Talos's configuration loader refusing a `KubeAuthenticationConfig` document of the
/// multi-document YAML `data`, in its words (without the line number): its strict decoder knows
/// `apiVersion`, `kind` and `configuration` only, and `configuration` is a mapping.
fn refused_by_loader(data: &[u8]) -> Option<String> {
    const KNOWN: [&str; 3] = ["apiVersion", "kind", "configuration"];
    let text = std::str::from_utf8(data).ok()?;
    serde_yaml::Deserializer::from_str(text).find_map(|doc| {
        let value = <serde_yaml::Value as serde::Deserialize>::deserialize(doc).ok()?;
        if value.get("kind").and_then(serde_yaml::Value::as_str) != Some("KubeAuthenticationConfig") {
            return None;
        }
        let prefix = "error decoding document v1alpha1/KubeAuthenticationConfig/";
        let unknown: Vec<&str> = value
            .as_mapping()?
            .keys()
            .filter_map(serde_yaml::Value::as_str)
            .filter(|k| !KNOWN.contains(k))
            .collect();
        if !unknown.is_empty() {
            return Some(format!(
                "{prefix}: unknown keys found during decoding: {}",
                unknown.join(", ")
            ));
        }
        match value.get("configuration") {
            Some(c) if !c.is_mapping() && !c.is_null() => Some(format!(
                "{prefix}: error decoding KubeAuthenticationConfig to *k8s.KubeAuthenticationConfigV1Alpha1: \
                 yaml: construct errors: cannot construct {} into meta.Unstructured",
                if c.is_sequence() { "!!seq" } else { "a scalar" }
            )),
            _ => None,
        }
    })
}

impl Apid {
    /// Records the call and applies the common checks: the node, an injected failure, a known
    /// node. The target node's address.
    fn begin<T>(
        &self,
        request: &Request<T>,
        rpc: Rpc,
        mode: Option<i32>,
        data: Vec<u8>,
    ) -> Result<String, Status> {
        let node = target_node(request)?;
        self.0.record(Call {
            node: node.clone(),
            rpc,
            mode,
            data,
            organizations: organizations(request),
            at: Instant::now(),
        });
        if let Some(status) = self.0.injected_failure(&node, rpc) {
            return Err(status);
        }
        if !self.0.knows(&node) {
            return Err(Status::unavailable(format!(
                "fake apid: no Talos node {node} behind this endpoint"
            )));
        }
        Ok(node)
    }
}

#[tonic::async_trait]
impl MachineService for Apid {
    async fn apply_configuration(
        &self,
        request: Request<ApplyConfigurationRequest>,
    ) -> Result<Response<ApplyConfigurationResponse>, Status> {
        let mode = request.get_ref().mode;
        let data = request.get_ref().data.clone();
        let node = self.begin(&request, Rpc::ApplyConfiguration, Some(mode), data)?;
        if !organizations(&request).iter().any(|o| o == "os:admin") {
            return Err(Status::permission_denied("not authorized"));
        }
        let body = request.into_inner();
        if body.mode == Mode::Reboot as i32 {
            return Err(Status::unimplemented(
                "apply configuration with reboot is not supported",
            ));
        }
        if let Some(message) = refused_by_loader(&body.data) {
            return Err(Status::invalid_argument(message));
        }
        if !has_v1alpha1(&body.data) {
            return Err(Status::invalid_argument(
                "the configuration has no v1alpha1 document: ApplyConfiguration takes the full machine \
                 configuration, not a patch",
            ));
        }
        let (answered, details) = match Mode::try_from(body.mode) {
            Ok(Mode::Staged) => (
                Mode::Staged,
                "Staged configuration to be applied after the next reboot",
            ),
            Ok(Mode::Try) => (Mode::Try, "Applied configuration without a reboot (try mode)"),
            _ => (Mode::NoReboot, "Applied configuration without a reboot"),
        };
        if answered == Mode::NoReboot && !body.dry_run {
            self.0.replace_config(&node, body.data);
        }
        Ok(Response::new(ApplyConfigurationResponse {
            messages: vec![ApplyConfiguration {
                metadata: None,
                warnings: vec![],
                mode: answered as i32,
                mode_details: if body.dry_run {
                    "Dry run summary: the configuration would be applied".to_owned()
                } else {
                    details.to_owned()
                },
            }],
        }))
    }

    async fn version(&self, request: Request<()>) -> Result<Response<VersionResponse>, Status> {
        let node = self.begin(&request, Rpc::Version, None, Vec::new())?;
        Ok(Response::new(VersionResponse {
            messages: vec![Version {
                metadata: None,
                version: Some(VersionInfo {
                    tag: self.0.version(&node),
                    sha: "0000000".to_owned(),
                    built: String::new(),
                    go_version: "go1.26.5".to_owned(),
                    os: "linux".to_owned(),
                    arch: "amd64".to_owned(),
                }),
                platform: Some(PlatformInfo {
                    name: "metal".to_owned(),
                    mode: "metal".to_owned(),
                }),
                features: Some(FeaturesInfo { rbac: true }),
            }],
        }))
    }
}

#[tonic::async_trait]
impl State for Apid {
    async fn get(&self, request: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        let node = self.begin(&request, Rpc::GetMachineConfig, None, Vec::new())?;
        if !organizations(&request).iter().any(|o| o == "os:admin") {
            return Err(Status::permission_denied("not authorized"));
        }
        let asked = request.into_inner();
        // COSI's pointer: `type(namespace/id@version)`, the version undefined in a Get.
        let pointer = format!("{}({}/{}@undefined)", asked.r#type, asked.namespace, asked.id);
        let wanted =
            format!("{MACHINE_CONFIG_TYPE}({MACHINE_CONFIG_NAMESPACE}/{MACHINE_CONFIG_ID}@undefined)");
        let not_found = || Status::not_found(format!("resource {pointer} doesn't exist"));
        if pointer != wanted {
            return Err(not_found());
        }
        let (config, version) = self.0.config_and_version(&node).ok_or_else(not_found)?;
        Ok(Response::new(GetResponse {
            resource: Some(Resource {
                metadata: Some(Metadata {
                    namespace: asked.namespace,
                    r#type: asked.r#type,
                    id: asked.id,
                    version: version.to_string(),
                    phase: "running".to_owned(),
                    ..Metadata::default()
                }),
                spec: Some(Spec {
                    proto_spec: MachineConfigSpec {
                        yaml_marshalled: config,
                    }
                    .encode_to_vec(),
                    yaml_spec: String::new(),
                }),
            }),
        }))
    }
}
