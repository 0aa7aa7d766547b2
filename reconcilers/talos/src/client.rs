//! The two calls `ichor config apply` makes to a Talos node, over mutual TLS with the
//! talosconfig's credentials: `Version` (which also proves the connection and the certificate)
//! and `ApplyConfiguration` with mode `NO_REBOOT`.
//!
//! # Targeting
//! The client dials one endpoint (the talosconfig context's first, or the node itself) and names
//! the target node in the gRPC metadata key `node` (single value), which apid answers itself or
//! proxies one-to-one — what `talosctl -n NODE` does. The deprecated plural `nodes` (fan-out) is
//! never sent.
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

use crate::{
    proto::{
        ApplyConfigurationRequest, apply_configuration_request::Mode,
        machine_service_client::MachineServiceClient,
    },
    talosconfig::{Endpoint, TalosContext},
};

/// apid accepts messages up to 32 MiB (`constants.GRPCMaxMessageSize`).
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024 * 1024;

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
        /// `Version` or `ApplyConfiguration`.
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
        let inner = MachineServiceClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(Self { inner })
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
        let first = reply
            .messages
            .into_iter()
            .next()
            .ok_or_else(|| TalosError::EmptyReply {
                call: "Version",
                node: node.to_owned(),
            })?;
        if let Some(error) = first.metadata.map(|m| m.error).filter(|e| !e.is_empty()) {
            return Err(TalosError::NodeError {
                call: "Version",
                node: node.to_owned(),
                message: error,
            });
        }
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
        let first = reply
            .messages
            .into_iter()
            .next()
            .ok_or_else(|| TalosError::EmptyReply {
                call: "ApplyConfiguration",
                node: node.to_owned(),
            })?;
        if let Some(error) = first
            .metadata
            .as_ref()
            .map(|m| &m.error)
            .filter(|e| !e.is_empty())
        {
            return Err(TalosError::NodeError {
                call: "ApplyConfiguration",
                node: node.to_owned(),
                message: error.clone(),
            });
        }
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
}

/// A request carrying `node` in the gRPC metadata.
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
        Code::PermissionDenied => {
            "; applying a configuration needs a talosconfig whose certificate has the role os:admin"
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
