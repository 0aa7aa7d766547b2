//! The Talos side of one step of the apiserver-restart rollout, performed the same way by every
//! sink of the loop's rollout decisions: the controller's Kubernetes applier and the offline
//! `ichor config apply --dir`. It knows no Kubernetes: the caller records what happened (the
//! operation's status, the machine's applied hash) where its sink keeps them.
//!
//! A step is one [`NodeSession`]: connect to the cluster's Talos API (its first endpoint, else
//! the node itself), read the machine configuration the node runs (COSI `MachineConfig`), then
//! either
//!
//! - [`NodeSession::plan_apply`] and [`NodeSession::apply`]: merge the rendered document into
//!   what the node runs (a foreign `jwt` list on a node being adopted is refused) and call
//!   `ApplyConfiguration` with mode `NO_REBOOT`; or
//! - [`NodeSession::plan_rollback`] and [`NodeSession::rollback`]: put the previous document
//!   back (or remove the rendered one where the node had none) and apply that with `NO_REBOOT`.
//!
//! Nothing is sent to a node that already runs the document the step would give it: when an
//! earlier attempt's call went through and only the caller's record of it was lost (on a
//! self-hosted control plane the apply restarts the very API server that record goes to), the
//! retry records the step without restarting the API server a second time. The plan and the
//! send are two calls so a caller can record what the node ran before anything is sent.
//!
//! Errors are [`StepError`]: a refusal (by the node, by the merge) is definitive and recorded
//! on the node; a transport failure is transient and retried.

use std::time::Duration;

use tonic::Code;

use crate::client::{ApplyOutcome, TalosClient, TalosError};
use crate::machine_config;
use crate::talosconfig::{APID_PORT, Endpoint, TalosContext};

/// How long connecting to a node's Talos API may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How a document's sha256 is computed, as the caller records it (the canonical form of a
/// rendered document, else its bytes).
pub type DocumentHash = fn(&str) -> String;

/// What went wrong with one step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// Definitive (the node, the merge, or the credentials refused): the step failed, and
    /// retrying would fail the same way.
    #[error("{0}")]
    Refused(String),
    /// Transient (the node or its API unreachable for a moment): retry after a back-off.
    #[error("{0}")]
    Transient(String),
}

impl From<TalosError> for StepError {
    /// The transport and "busy" codes are transient, the rest a refusal.
    fn from(e: TalosError) -> Self {
        match &e {
            TalosError::Connect { .. } => StepError::Transient(e.to_string()),
            TalosError::Rpc {
                code: Code::Unavailable | Code::DeadlineExceeded | Code::FailedPrecondition,
                ..
            } => StepError::Transient(e.to_string()),
            _ => StepError::Refused(e.to_string()),
        }
    }
}

/// A client connected for `address` through the context's first endpoint (else the node's
/// own Talos API); `call_timeout` bounds each call.
///
/// # Errors
/// [`StepError`] from the connection.
pub async fn connect(
    talos: &TalosContext,
    address: &str,
    call_timeout: Duration,
) -> Result<(TalosClient, Endpoint), StepError> {
    let endpoint = talos.endpoints.first().cloned().unwrap_or_else(|| Endpoint {
        host: address.to_owned(),
        port: APID_PORT,
    });
    let client = TalosClient::connect(talos, &endpoint, CONNECT_TIMEOUT, call_timeout).await?;
    Ok((client, endpoint))
}

/// One node, connected, with the machine configuration it runs.
#[derive(Debug)]
pub struct NodeSession {
    client: TalosClient,
    address: String,
    machine: String,
    current: String,
}

/// An apply, planned: what is sent and what the node ran before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyPlan {
    /// The node's configuration with the rendered document in it.
    merged: String,
    /// The document of that kind the node runs now (`None`: it has none).
    pub running: Option<String>,
    /// Whether the node already runs the rendered document (nothing is sent).
    pub already_running: bool,
}

/// A rollback, planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollbackPlan {
    /// The node's configuration with the previous document restored.
    restored: String,
    /// Whether the node already runs the previous document (nothing is sent).
    pub already_back: bool,
}

/// What [`NodeSession::apply`] or [`NodeSession::rollback`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// `ApplyConfiguration` (`NO_REBOOT`) was called; what the node reported.
    Applied(ApplyOutcome),
    /// The node already ran the document; nothing was sent.
    AlreadyRunning,
}

impl NodeSession {
    /// Connects for the node `machine` at `address` and reads the machine configuration it runs.
    ///
    /// # Errors
    /// [`StepError`]: the connection or the read failed, or the configuration is not UTF-8.
    pub async fn open(
        talos: &TalosContext,
        address: &str,
        machine: &str,
        call_timeout: Duration,
    ) -> Result<Self, StepError> {
        let (mut client, _) = connect(talos, address, call_timeout).await?;
        let current = client.machine_config(address).await?;
        let current = String::from_utf8(current).map_err(|_| {
            StepError::Refused(format!("node {machine}: its machine configuration is not UTF-8"))
        })?;
        Ok(NodeSession {
            client,
            address: address.to_owned(),
            machine: machine.to_owned(),
            current,
        })
    }

    /// A session over `client` for the node `machine` at `address` whose running configuration
    /// the caller knows already (`ichor config apply --dir` takes it from its machine-config
    /// directory, which the apply replaces whole).
    pub fn with_config(client: TalosClient, address: &str, machine: &str, current: String) -> Self {
        NodeSession {
            client,
            address: address.to_owned(),
            machine: machine.to_owned(),
            current,
        }
    }

    /// The machine configuration the node runs.
    pub fn current(&self) -> &str {
        &self.current
    }

    fn label(&self) -> String {
        format!("the machine configuration of {}", self.machine)
    }

    /// Plans the apply of `document` (of kind `kind`, whose sha256 is `sha256`); `adopting`:
    /// the node has no document applied by Ichor yet (see
    /// [`machine_config::replace_document`]).
    ///
    /// # Errors
    /// [`StepError::Refused`] when the document cannot be merged into the node's configuration.
    pub fn plan_apply(
        &self,
        kind: &str,
        document: &str,
        sha256: &str,
        adopting: bool,
        hash: DocumentHash,
    ) -> Result<ApplyPlan, StepError> {
        let refused = |e: machine_config::MachineConfigError| StepError::Refused(e.to_string());
        let (merged, _) =
            machine_config::replace_document(&self.label(), &self.current, kind, document, adopting)
                .map_err(refused)?;
        let running = machine_config::extract_document(&self.current, kind).map_err(refused)?;
        let already_running = running.as_deref().map(hash).as_deref() == Some(sha256);
        Ok(ApplyPlan {
            merged,
            running,
            already_running,
        })
    }

    /// Sends a planned apply with mode `NO_REBOOT`, unless the node already runs the document.
    ///
    /// # Errors
    /// [`StepError`] from the call.
    pub async fn apply(&mut self, plan: ApplyPlan) -> Result<Sent, StepError> {
        if plan.already_running {
            return Ok(Sent::AlreadyRunning);
        }
        let outcome = self
            .client
            .apply_no_reboot(&self.address, plan.merged.into_bytes())
            .await?;
        Ok(Sent::Applied(outcome))
    }

    /// Plans putting back `previous` (of kind `kind`; `None`: remove the document of that kind),
    /// whose sha256 is `previous_sha256`.
    ///
    /// # Errors
    /// [`StepError::Refused`] when the node's configuration cannot take it.
    pub fn plan_rollback(
        &self,
        kind: &str,
        previous: Option<&str>,
        previous_sha256: Option<&str>,
        hash: DocumentHash,
    ) -> Result<RollbackPlan, StepError> {
        let refused = |e: machine_config::MachineConfigError| StepError::Refused(e.to_string());
        let label = self.label();
        if let Some(yaml) = previous {
            check_previous(&self.machine, kind, yaml, previous_sha256, hash)?;
        }
        let restored = match previous {
            Some(yaml) => {
                machine_config::replace_document(&label, &self.current, kind, yaml, false).map(|(c, _)| c)
            }
            None => machine_config::remove_document(&label, &self.current, kind),
        }
        .map_err(refused)?;
        let running = machine_config::extract_document(&self.current, kind).map_err(refused)?;
        let already_back = running.as_deref().map(hash).as_deref() == previous_sha256;
        Ok(RollbackPlan {
            restored,
            already_back,
        })
    }

    /// Sends a planned rollback with mode `NO_REBOOT`, unless the node already runs the
    /// previous document.
    ///
    /// # Errors
    /// [`StepError`] from the call.
    pub async fn rollback(&mut self, plan: RollbackPlan) -> Result<Sent, StepError> {
        if plan.already_back {
            return Ok(Sent::AlreadyRunning);
        }
        let outcome = self
            .client
            .apply_no_reboot(&self.address, plan.restored.into_bytes())
            .await?;
        Ok(Sent::Applied(outcome))
    }
}

/// A previous document is put back only as what it was recorded as: one document of `kind`
/// (no `---` that would carry further documents into the node's configuration) whose hash is the
/// one recorded with it.
fn check_previous(
    machine: &str,
    kind: &str,
    yaml: &str,
    sha256: Option<&str>,
    hash: DocumentHash,
) -> Result<(), StepError> {
    let refuse = |why: &str| {
        Err(StepError::Refused(format!(
            "node {machine}: the recorded previous document is not rolled back: {why}"
        )))
    };
    if yaml
        .lines()
        .any(|l| l.trim_end() == "---" || l.starts_with("--- ") || l.trim_end() == "...")
    {
        return refuse("it holds more than one document");
    }
    match machine_config::extract_document(yaml, kind) {
        Ok(Some(_)) => {}
        _ => return refuse(&format!("it is not a {kind} document")),
    }
    if sha256 != Some(hash(yaml).as_str()) {
        return refuse("its sha256 is not the one recorded with it");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rpc(code: Code) -> TalosError {
        TalosError::Rpc {
            call: "ApplyConfiguration",
            node: "10.0.0.1".into(),
            code,
            message: "m".into(),
            hint: "",
        }
    }

    #[test]
    fn transport_and_busy_failures_are_retried_and_the_rest_refused() {
        let connect = TalosError::Connect {
            endpoint: "10.0.0.1:50000".into(),
            reason: "refused".into(),
        };
        assert!(matches!(StepError::from(connect), StepError::Transient(_)));
        for code in [
            Code::Unavailable,
            Code::DeadlineExceeded,
            Code::FailedPrecondition,
        ] {
            assert!(
                matches!(StepError::from(rpc(code)), StepError::Transient(_)),
                "{code:?}"
            );
        }
        for code in [Code::InvalidArgument, Code::PermissionDenied, Code::NotFound] {
            assert!(
                matches!(StepError::from(rpc(code)), StepError::Refused(_)),
                "{code:?}"
            );
        }
        let refused = StepError::from(rpc(Code::InvalidArgument));
        assert_eq!(refused.to_string(), rpc(Code::InvalidArgument).to_string());
    }

    fn len_hash(s: &str) -> String {
        s.len().to_string()
    }

    #[test]
    fn a_previous_document_is_rolled_back_only_as_the_one_document_recorded() {
        let doc = "apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfig: {}\n";
        let sha = len_hash(doc);
        assert_eq!(
            check_previous("cp-1", "KubeAuthenticationConfig", doc, Some(&sha), len_hash),
            Ok(())
        );
        let smuggled = format!("{doc}---\napiVersion: v1alpha1\nkind: TrustedRootsConfig\nname: x\n");
        let e = check_previous(
            "cp-1",
            "KubeAuthenticationConfig",
            &smuggled,
            Some(&len_hash(&smuggled)),
            len_hash,
        );
        assert!(
            matches!(&e, Err(StepError::Refused(m)) if m.contains("more than one document")),
            "{e:?}"
        );
        let other = "apiVersion: v1alpha1\nkind: TrustedRootsConfig\nname: x\n";
        let e = check_previous(
            "cp-1",
            "KubeAuthenticationConfig",
            other,
            Some(&len_hash(other)),
            len_hash,
        );
        assert!(
            matches!(&e, Err(StepError::Refused(m)) if m.contains("not a KubeAuthenticationConfig")),
            "{e:?}"
        );
        let e = check_previous("cp-1", "KubeAuthenticationConfig", doc, Some("0"), len_hash);
        assert!(
            matches!(&e, Err(StepError::Refused(m)) if m.contains("sha256")),
            "{e:?}"
        );
        let e = check_previous("cp-1", "KubeAuthenticationConfig", doc, None, len_hash);
        assert!(e.is_err(), "a document without its hash is not put back");
    }
}
