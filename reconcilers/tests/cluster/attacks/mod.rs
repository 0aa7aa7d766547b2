//! Attacks on the controller, its webhooks and the chart's RBAC, each through the real apiserver
//! under the chart's roles: the attack steps as an attacker would take them, and what must stop
//! them. One file per attack.

use std::time::Duration;

use ichor_renderers::trust::{SIGNING_SECRET, TLS_SECRET, TRUST_CONFIGMAP};
use ichor_testkit::control_plane::{ControlPlane, Options};
use ichor_testkit::install::{self, CONTROLLER_SERVICE_ACCOUNT, ichor_user};
use ichor_testkit::wait;

use crate::replicas::{Replica, get};

mod compromised_issuer_deletes_admins_as_the_controller_manager;
mod control_characters_in_user_texts;
mod controller_secret_creates;
mod deleted_admin_held_by_her_own_finalizer;
mod issuer_service_impostor;
mod kubectl_brings_old_sessions_back;
mod new_users_password_taken_for_an_orphan;
mod operator_changes_the_session_policy;
mod operator_replaces_the_installation_in_force;
mod operator_takes_over_an_admin_with_kubectl;
mod paused_operation_made_destructive;
mod portforward_to_any_pod;
mod superseded_keys_retired;

/// How long the controller gets to settle.
pub const SETTLE: Duration = Duration::from_secs(60);

/// People, impersonated by the admin (`--as`, `--as-group`); [`Running::start`] creates their
/// `IchorUser`s (the webhook judges an Ichor requester by its live user).
pub const ALICE: (&str, &[&str]) = ("ichor:alice", &["ichor:admin"]);
pub const OLGA: (&str, &[&str]) = ("ichor:olga", &["ichor:operator"]);

/// A control plane with Ichor installed (users on) and one controller replica running under the
/// chart's RBAC, its owned Secrets and trust ConfigMap written and its webhooks reachable
/// through their Service.
pub struct Running {
    pub plane: ControlPlane,
    pub replica: Replica,
    _dir: tempfile::TempDir,
}

impl Running {
    /// Starts it, `env` set on the replica (`ICHOR_CONTROLLER_*`); `None` when the real
    /// control plane is not built and the test may be skipped.
    pub fn start(env: &[(&str, &str)]) -> anyhow::Result<Option<Self>> {
        Self::start_prepared(env, |_| Ok(()))
    }

    /// [`Running::start`], with `prepare` run on the control plane once Ichor is installed and
    /// before the replica starts.
    pub fn start_prepared(
        env: &[(&str, &str)],
        prepare: impl FnOnce(&ControlPlane) -> anyhow::Result<()>,
    ) -> anyhow::Result<Option<Self>> {
        Self::start_probed(env, prepare, true)
    }

    /// [`Running::start_prepared`] without waiting for the users webhook to admit a new user:
    /// for a `prepare` that leaves it refusing every new user (it fails closed while the
    /// controller may not read the credentials namespace). The webhooks are still served.
    pub fn start_prepared_users_webhook_refusing(
        env: &[(&str, &str)],
        prepare: impl FnOnce(&ControlPlane) -> anyhow::Result<()>,
    ) -> anyhow::Result<Option<Self>> {
        Self::start_probed(env, prepare, false)
    }

    fn start_probed(
        env: &[(&str, &str)],
        prepare: impl FnOnce(&ControlPlane) -> anyhow::Result<()>,
        probe_users: bool,
    ) -> anyhow::Result<Option<Self>> {
        let options = Options {
            extra_args: vec!["--enable-aggregator-routing=true".to_owned()],
            ..Options::default()
        };
        let Some(plane) = ControlPlane::start(options)? else {
            return Ok(None);
        };
        install::install(&plane)?;
        prepare(&plane)?;
        plane.apply(&ichor_user("alice", &["admin"]))?;
        plane.apply(&ichor_user("olga", &["operator"]))?;
        let dir = tempfile::tempdir()?;
        let kubeconfig = install::component_kubeconfig(&plane, 0, CONTROLLER_SERVICE_ACCOUNT)?;
        let mut replica = Replica::start_with(dir.path(), "ichor-controller-a", &kubeconfig, env)?;
        let settled = (|| -> anyhow::Result<()> {
            for name in [
                SIGNING_SECRET,
                TLS_SECRET,
                ichor_controller::run::watch::WEBHOOK_TLS_SECRET,
            ] {
                wait::until(&format!("Secret {name} with data"), SETTLE, || {
                    Ok(get(&plane, 0, "secret", name)?
                        .filter(|s| s["data"].as_object().is_some_and(|d| !d.is_empty())))
                })?;
            }
            wait::until("the trust ConfigMap", SETTLE, || {
                get(&plane, 0, "configmap", TRUST_CONFIGMAP)
            })?;
            install::wait_webhook_ca_bundles(&plane, "ichor-identity", SETTLE)?;
            crate::webhooks::serve_from(&plane, &replica)?;
            if !probe_users {
                return Ok(());
            }
            wait::until("the webhook reached through its Service", SETTLE, || {
                let dry = ["create", "--dry-run=server", "-o", "name", "-f", "-"];
                match plane.kubectl_as(Some(ALICE), &dry, Some(&ichor_user("probe", &["viewer"])))? {
                    Ok(_) => Ok(Some(())),
                    Err(stderr) if stderr.contains("failed calling webhook") => Ok(None),
                    Err(stderr) => Err(anyhow::anyhow!(stderr)),
                }
            })
        })();
        if let Err(e) = settled {
            replica.check_running().ok();
            return Err(e.context(replica.log_tail()));
        }
        Ok(Some(Self {
            plane,
            replica,
            _dir: dir,
        }))
    }
}
