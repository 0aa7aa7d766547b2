//! The waits of a step: `/readyz` probed until the node's API server came back (or the step
//! timed out and is rolled back), and after a rollback until it is ready again.

use jiff::{SignedDuration, Timestamp};

use ichor_renderers::crd::{TalosOperation, TalosOperationStatus};

use ichor_renderers::crd::NodeState;

use super::decide::{Context, Next, effect};
use super::{Observation, ProbePhase, ProbeRequest, RollbackRequest, readyz_url};

impl Context<'_> {
    pub(super) fn rollback_or_fail(
        &self,
        op: &TalosOperation,
        status: &TalosOperationStatus,
        i: usize,
        why: &str,
    ) -> Next {
        let node = &status.nodes[i];
        let Some(previous) = node.previous_document.clone() else {
            return Self::write(op, self.fail(status, i, Some(NodeState::Failed), why));
        };
        let request = RollbackRequest {
            namespace: op.metadata.namespace.clone().unwrap_or_default(),
            operation: op.metadata.name.clone().unwrap_or_default(),
            cluster: op.spec.cluster.clone(),
            step: i,
            machine: node.machine.clone(),
            address: node.address.clone().unwrap_or_default(),
            previous,
            reason: why.to_owned(),
            based_on_resource_version: op.metadata.resource_version.clone(),
        };
        effect(request.id(), &request)
    }

    /// The latest observation when it is about step `i`, this phase, and newer than `since`.
    pub(super) fn observed(&self, i: usize, phase: ProbePhase, since: Timestamp) -> Option<&Observation> {
        self.observation
            .filter(|o| o.step == i && o.phase == phase && o.at >= since)
    }

    /// The next probe of step `i` when it is due, and when the next one is.
    pub(super) fn probe(
        &self,
        op: &TalosOperation,
        status: &TalosOperationStatus,
        i: usize,
        phase: ProbePhase,
        since: Timestamp,
    ) -> (Next, Timestamp) {
        let node = &status.nodes[i];
        let last = self.observed(i, phase, since);
        let interval =
            SignedDuration::from_millis(i64::try_from(self.settings.poll_interval_millis).unwrap_or(1000));
        let due = last.map_or(since, |o| o.at + interval);
        if self.now < due {
            return (Next::Nothing, due);
        }
        let request = ProbeRequest {
            namespace: op.metadata.namespace.clone().unwrap_or_default(),
            operation: op.metadata.name.clone().unwrap_or_default(),
            cluster: op.spec.cluster.clone(),
            step: i,
            machine: node.machine.clone(),
            phase,
            url: readyz_url(
                node.address.as_deref().unwrap_or_default(),
                self.settings.apiserver_port,
            ),
            seq: self.observation.map_or(0, |o| o.seq) + 1,
            since,
        };
        (effect(request.id(), &request), self.now + interval)
    }

    /// Step `i` is applied: its `/readyz` must go down and come back (or stay ready through the
    /// grace), within the step timeout.
    pub(super) fn waiting(
        &self,
        op: &TalosOperation,
        status: &TalosOperationStatus,
        i: usize,
    ) -> (Next, Option<Timestamp>) {
        let node = &status.nodes[i];
        let (applied, timeout) = self.step_deadline(node.applied_at.as_deref());
        let last = self.observed(i, ProbePhase::Apply, applied);
        if let Some(obs) = last {
            // Seen down in the observations themselves, not only once the status recorded it:
            // the status write may wait for an API server that is the one restarting.
            let saw = node.saw_not_ready || obs.saw_not_ready;
            let graced = obs.at.duration_since(applied) >= self.settings.restart_grace();
            if obs.ready && (saw || graced) {
                let mut out = status.clone();
                let total = out.nodes.len();
                let n = &mut out.nodes[i];
                n.set_state(NodeState::Done);
                n.finished_at = Some(obs.at.to_string());
                n.saw_not_ready = saw;
                n.message = Some(if saw {
                    format!(
                        "the API server restarted and was ready {}s after the apply",
                        obs.at.duration_since(applied).as_secs()
                    )
                } else {
                    format!(
                        "/readyz stayed ready for {} after the apply: no restart was seen",
                        super::seconds_text(self.settings.restart_grace())
                    )
                });
                out.current_step = u32::try_from((i + 1).min(total)).ok();
                return (Self::write(op, out), None);
            }
        }
        if self.now >= timeout {
            let last = last
                .and_then(|o| o.detail.clone())
                .map(|d| format!(" (last: {d})"))
                .unwrap_or_default();
            let why = format!(
                "/readyz of {} did not come back within {} of the apply{last}",
                node.machine,
                super::seconds_text(self.settings.step_timeout())
            );
            return (self.rollback_or_fail(op, status, i, &why), None);
        }
        if last.is_some_and(|o| !o.ready) && !node.saw_not_ready {
            let mut out = status.clone();
            out.nodes[i].saw_not_ready = true;
            return (Self::write(op, out), Some(timeout));
        }
        let (next, due) = self.probe(op, status, i, ProbePhase::Apply, applied);
        (next, Some(due.min(timeout)))
    }

    /// Step `i` was rolled back: wait for `/readyz`, then fail the operation.
    pub(super) fn rolling_back(
        &self,
        op: &TalosOperation,
        status: &TalosOperationStatus,
        i: usize,
    ) -> (Next, Option<Timestamp>) {
        let node = &status.nodes[i];
        let (since, timeout) = self.step_deadline(node.rolled_back_at.as_deref());
        let why = node
            .message
            .clone()
            .unwrap_or_else(|| "the step timed out".into());
        if let Some(obs) = self.observed(i, ProbePhase::Rollback, since).filter(|o| o.ready) {
            let mut out = status.clone();
            out.nodes[i].set_state(NodeState::RolledBack);
            out.nodes[i].finished_at = Some(obs.at.to_string());
            let message =
                format!("{why}; the previous document was re-applied and the API server is ready again");
            out.nodes[i].message = Some(message.clone());
            return (Self::write(op, self.fail(&out, i, None, &message)), None);
        }
        if self.now >= timeout {
            let message = format!(
                "{why}; the previous document was re-applied but /readyz did not come back within {} either: \
                 the node needs attention",
                super::seconds_text(self.settings.step_timeout())
            );
            let mut out = status.clone();
            out.nodes[i].message = Some(message.clone());
            return (
                Self::write(op, self.fail(&out, i, Some(NodeState::Failed), &message)),
                None,
            );
        }
        let (next, due) = self.probe(op, status, i, ProbePhase::Rollback, since);
        (next, Some(due.min(timeout)))
    }
}
