//! The calls made to a Talos node, over mutual TLS with the talosconfig's credentials:
//! `Version` (which also proves the connection and the certificate), `ApplyConfiguration` with
//! mode `NO_REBOOT`, and reading the node's current machine configuration (COSI `State.Get` of
//! the `MachineConfig` resource, what `talosctl get machineconfig` does).
//!
//! # Targeting
//! The client dials one endpoint (the talosconfig context's first, or the node itself) and names
//! the target node in the gRPC metadata key `node` (single value), which apid answers itself or
//! proxies one-to-one — what `talosctl -n NODE` does. The deprecated plural `nodes` (fan-out) is
//! never sent. The COSI state service is routed by apid the same way.
//!
//! # The machine configuration
//! `ApplyConfiguration` takes the node's FULL configuration, so a caller that changes one
//! document reads the rest first: `State.Get` of namespace `config`, type
//! `MachineConfigs.config.talos.dev`, ID `v1alpha1` (Talos's active configuration). The
//! resource's `proto_spec` is a `MachineConfigSpec` whose `yaml_marshalled` holds the
//! configuration exactly as it was submitted ([`decode_machine_config`]).
//!
//! # Mode
//! Always `NO_REBOOT` (2), never the proto3 default `REBOOT` (0). On Talos ≥ 1.14 that is what
//! `AUTO` resolves to anyway. On ≤ 1.13 `AUTO` may reboot when the v1alpha1 document changes a
//! field that cannot be applied live, whereas `NO_REBOOT` refuses with `InvalidArgument`: the
//! `KubeAuthenticationConfig` change alone never needs a reboot (only v1alpha1 is compared), so
//! `NO_REBOOT` gives AUTO's result for it, and refuses instead of rebooting when the machine
//! configuration file supplied differs from the running one in a reboot-only field.

use std::time::Duration;

use tonic::{
    Code, Request, Status,
    metadata::MetadataValue,
    transport::{Certificate, Channel, ClientTlsConfig, Identity},
};

use prost::Message as _;

use crate::{
    proto::{
        ApplyConfigurationRequest, Metadata,
        apply_configuration_request::Mode,
        config::MachineConfigSpec,
        cosi::{GetOptions, GetRequest, GetResponse, state_client::StateClient},
        machine_service_client::MachineServiceClient,
    },
    talosconfig::{Endpoint, TalosContext},
};

/// apid accepts messages up to 32 MiB (`constants.GRPCMaxMessageSize`).
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024 * 1024;

/// The COSI namespace of the machine configuration resource.
pub const MACHINE_CONFIG_NAMESPACE: &str = "config";
/// The COSI type of the machine configuration resource.
pub const MACHINE_CONFIG_TYPE: &str = "MachineConfigs.config.talos.dev";
/// The ID of the active machine configuration (Talos's `ActiveID`).
pub const MACHINE_CONFIG_ID: &str = "v1alpha1";

/// What is wrong with a `State.Get` reply that should hold the machine configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecProblem {
    /// No resource in the reply.
    #[error("the reply holds no resource")]
    NoResource,
    /// The reply is another resource than the one asked for.
    #[error("the reply is the resource {kind}/{id}, not {MACHINE_CONFIG_TYPE}/{MACHINE_CONFIG_ID}")]
    OtherResource {
        /// Its type.
        kind: String,
        /// Its ID.
        id: String,
    },
    /// The resource has no spec.
    #[error("the resource has no spec")]
    NoSpec,
    /// The spec has only its YAML form.
    #[error("the resource's spec has only its YAML form (proto_spec is empty)")]
    NoProtoSpec,
    /// `proto_spec` is not a `MachineConfigSpec`.
    #[error("proto_spec is not a MachineConfigSpec ({0})")]
    Undecodable(String),
    /// The configuration is empty.
    #[error("the machine configuration in it is empty")]
    Empty,
}

/// A failed call to the Talos API.
#[derive(Debug, thiserror::Error)]
pub enum TalosError {
    /// The TLS settings could not be built from the talosconfig.
    #[error("Talos API {endpoint}: cannot set up mutual TLS from the talosconfig: {reason}")]
    Tls {
        /// The endpoint.
        endpoint: String,
        /// The TLS stack's message.
        reason: String,
    },
    /// The endpoint could not be reached or the TLS handshake failed.
    #[error(
        "Talos API {endpoint}: cannot connect ({reason}); check the talosconfig endpoints and that its \
         ca, crt and key belong to this cluster"
    )]
    Connect {
        /// The endpoint.
        endpoint: String,
        /// The transport's message.
        reason: String,
    },
    /// The call failed with a gRPC status.
    #[error("Talos API {call} on node {node}: {code:?}: {message}{hint}")]
    Rpc {
        /// `Version`, `ApplyConfiguration` or `State.Get`.
        call: &'static str,
        /// The target node.
        node: String,
        /// The gRPC code.
        code: Code,
        /// The server's message.
        message: String,
        /// What to do about it (may be empty).
        hint: &'static str,
    },
    /// The reply named an error for the node (apid proxy metadata).
    #[error("Talos API {call} on node {node}: the node answered with an error: {message}")]
    NodeError {
        /// The call.
        call: &'static str,
        /// The target node.
        node: String,
        /// `metadata.error`.
        message: String,
    },
    /// The reply held no entry.
    #[error("Talos API {call} on node {node}: the reply holds no answer from the node")]
    EmptyReply {
        /// The call.
        call: &'static str,
        /// The target node.
        node: String,
    },
    /// The node applied with a mode other than the one asked for.
    #[error(
        "Talos API ApplyConfiguration on node {node}: the node reports mode {mode} instead of NO_REBOOT \
         ({details}); check the node before going on"
    )]
    UnexpectedMode {
        /// The target node.
        node: String,
        /// The mode reported.
        mode: String,
        /// `mode_details`.
        details: String,
    },
    /// The node's machine configuration resource could not be read from the reply.
    #[error(
        "Talos API State.Get on node {node}: cannot read its machine configuration: {problem}; is this a \
         configured Talos node (not in maintenance mode)?"
    )]
    MachineConfig {
        /// The target node.
        node: String,
        /// What is wrong.
        problem: SpecProblem,
    },
    /// The node name cannot be sent as gRPC metadata.
    #[error("node {node:?}: not usable as the gRPC `node` metadata value (it must be visible ASCII)")]
    NodeName {
        /// The node.
        node: String,
    },
}

/// What a successful apply reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApplyOutcome {
    /// `mode_details`, for display.
    pub details: String,
    /// Validation warnings.
    pub warnings: Vec<String>,
}

/// A connection to one Talos API endpoint.
#[derive(Debug, Clone)]
pub struct TalosClient {
    inner: MachineServiceClient<Channel>,
    state: StateClient<Channel>,
}

impl TalosClient {
    /// Connects to `endpoint` with the context's CA, certificate and key; `request_timeout`
    /// bounds every call.
    ///
    /// # Errors
    /// [`TalosError::Tls`] or [`TalosError::Connect`].
    pub async fn connect(
        context: &TalosContext,
        endpoint: &Endpoint,
        connect_timeout: Duration,
        request_timeout: Duration,
    ) -> Result<Self, TalosError> {
        let name = endpoint.to_string();
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&context.ca_pem))
            .identity(Identity::from_pem(&context.crt_pem, &context.key_pem))
            .domain_name(endpoint.host.clone());
        let channel = Channel::from_shared(endpoint.uri())
            .map_err(|e| TalosError::Tls {
                endpoint: name.clone(),
                reason: e.to_string(),
            })?
            .tls_config(tls)
            .map_err(|e| TalosError::Tls {
                endpoint: name.clone(),
                reason: error_chain(&e),
            })?
            .connect_timeout(connect_timeout)
            .timeout(request_timeout)
            .connect()
            .await
            .map_err(|e| TalosError::Connect {
                endpoint: name,
                reason: error_chain(&e),
            })?;
        let inner = MachineServiceClient::new(channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let state = StateClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(Self { inner, state })
    }

    /// The Talos version tag of `node` (e.g. `v1.14.3`).
    ///
    /// # Errors
    /// [`TalosError::Rpc`], [`TalosError::NodeError`] or [`TalosError::EmptyReply`].
    pub async fn version(&mut self, node: &str) -> Result<String, TalosError> {
        let request = targeted(node, ())?;
        let reply = self
            .inner
            .version(request)
            .await
            .map_err(|s| rpc_error("Version", node, &s))?
            .into_inner();
        let first = first_reply("Version", node, reply.messages, |m| m.metadata.as_ref())?;
        Ok(first.version.map(|v| v.tag).unwrap_or_default())
    }

    /// Applies the full machine configuration `data` to `node` with mode `NO_REBOOT`.
    ///
    /// # Errors
    /// [`TalosError::Rpc`], [`TalosError::NodeError`], [`TalosError::EmptyReply`], or
    /// [`TalosError::UnexpectedMode`] when the node reports another mode.
    pub async fn apply_no_reboot(&mut self, node: &str, data: Vec<u8>) -> Result<ApplyOutcome, TalosError> {
        let request = targeted(
            node,
            ApplyConfigurationRequest {
                data,
                mode: Mode::NoReboot as i32,
                dry_run: false,
            },
        )?;
        let reply = self
            .inner
            .apply_configuration(request)
            .await
            .map_err(|s| rpc_error("ApplyConfiguration", node, &s))?
            .into_inner();
        let first = first_reply("ApplyConfiguration", node, reply.messages, |m| {
            m.metadata.as_ref()
        })?;
        if first.mode != Mode::NoReboot as i32 {
            let mode = Mode::try_from(first.mode)
                .map(|m| m.as_str_name().to_owned())
                .unwrap_or_else(|_| first.mode.to_string());
            return Err(TalosError::UnexpectedMode {
                node: node.to_owned(),
                mode,
                details: first.mode_details,
            });
        }
        Ok(ApplyOutcome {
            details: first.mode_details,
            warnings: first.warnings,
        })
    }

    /// The current machine configuration of `node` (multi-document YAML, the bytes exactly as
    /// they were last submitted), read as `talosctl get machineconfig` does. Replies are bounded
    /// by [`MAX_MESSAGE_BYTES`].
    ///
    /// # Errors
    /// [`TalosError::Rpc`] (`NotFound` when the node has no configuration), or
    /// [`TalosError::MachineConfig`] when the reply holds no usable configuration.
    pub async fn machine_config(&mut self, node: &str) -> Result<Vec<u8>, TalosError> {
        let request = targeted(
            node,
            GetRequest {
                namespace: MACHINE_CONFIG_NAMESPACE.to_owned(),
                r#type: MACHINE_CONFIG_TYPE.to_owned(),
                id: MACHINE_CONFIG_ID.to_owned(),
                options: Some(GetOptions {}),
            },
        )?;
        let reply = self
            .state
            .get(request)
            .await
            .map_err(|s| rpc_error("State.Get", node, &s))?
            .into_inner();
        decode_machine_config(node, reply)
    }
}

/// The machine configuration bytes in a `State.Get` reply for the `MachineConfig` resource of
/// `node` (named in the error).
///
/// # Errors
/// [`TalosError::MachineConfig`] naming what is missing or undecodable.
pub fn decode_machine_config(node: &str, reply: GetResponse) -> Result<Vec<u8>, TalosError> {
    let fail = |problem: SpecProblem| TalosError::MachineConfig {
        node: node.to_owned(),
        problem,
    };
    let resource = reply.resource.ok_or_else(|| fail(SpecProblem::NoResource))?;
    if let Some(m) = &resource.metadata {
        let known = |value: &str, expected: &str| value.is_empty() || value == expected;
        if !known(&m.r#type, MACHINE_CONFIG_TYPE) || !known(&m.id, MACHINE_CONFIG_ID) {
            return Err(fail(SpecProblem::OtherResource {
                kind: m.r#type.clone(),
                id: m.id.clone(),
            }));
        }
    }
    let spec = resource.spec.ok_or_else(|| fail(SpecProblem::NoSpec))?;
    if spec.proto_spec.is_empty() && !spec.yaml_spec.is_empty() {
        return Err(fail(SpecProblem::NoProtoSpec));
    }
    let decoded = MachineConfigSpec::decode(spec.proto_spec.as_slice())
        .map_err(|e| fail(SpecProblem::Undecodable(e.to_string())))?;
    if decoded.yaml_marshalled.is_empty() {
        return Err(fail(SpecProblem::Empty));
    }
    Ok(decoded.yaml_marshalled)
}

/// A request carrying `node` in the gRPC metadata.
/// The one node's message of a machine API reply (apid answers one per targeted node), refused
/// when there is none or when the node reported an error in its metadata.
fn first_reply<M>(
    call: &'static str,
    node: &str,
    messages: Vec<M>,
    metadata: impl Fn(&M) -> Option<&Metadata>,
) -> Result<M, TalosError> {
    let first = messages
        .into_iter()
        .next()
        .ok_or_else(|| TalosError::EmptyReply {
            call,
            node: node.to_owned(),
        })?;
    if let Some(error) = metadata(&first).map(|m| &m.error).filter(|e| !e.is_empty()) {
        return Err(TalosError::NodeError {
            call,
            node: node.to_owned(),
            message: error.clone(),
        });
    }
    Ok(first)
}

fn targeted<T>(node: &str, message: T) -> Result<Request<T>, TalosError> {
    let value = MetadataValue::try_from(node).map_err(|_| TalosError::NodeName {
        node: node.to_owned(),
    })?;
    let mut request = Request::new(message);
    request.metadata_mut().insert("node", value);
    Ok(request)
}

fn rpc_error(call: &'static str, node: &str, status: &Status) -> TalosError {
    let hint = match status.code() {
        Code::PermissionDenied if call == "State.Get" => {
            "; reading a node's machine configuration needs a talosconfig whose certificate has the role \
             os:admin"
        }
        Code::NotFound if call == "State.Get" => {
            "; the node has no active machine configuration (is it in maintenance mode?)"
        }
        Code::PermissionDenied => {
            "; applying a configuration needs a talosconfig whose certificate has the role os:admin"
        }
        _ if call == "State.Get"
            && status.code() != Code::Unavailable
            && status.code() != Code::DeadlineExceeded =>
        {
            ""
        }
        Code::FailedPrecondition => "; another apply may be in progress on this node: wait, then resume",
        Code::InvalidArgument => {
            "; the node refused the configuration: check the file in --machine-config-dir for this machine"
        }
        Code::Unavailable | Code::DeadlineExceeded => "; the node's Talos API did not answer: check it is up",
        _ => "",
    };
    TalosError::Rpc {
        call,
        node: node.to_owned(),
        code: status.code(),
        message: status.message().to_owned(),
        hint,
    }
}

/// An error and its sources, `: `-joined (tonic's top-level messages say little alone).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests;
