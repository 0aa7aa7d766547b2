//! Whether the controller will take a `config` operation of a cluster up at all, checked before
//! one is created (and again when one is not taken up in time), so that the command fails at
//! once with what to set instead of following an operation nobody carries out.
//!
//! What the controller rolls out is read where the caller may read it, in this order: the
//! chart's deployed Helm release (`controller.rollout.clusters`, from Helm's release Secret, as
//! `ichor init` reads it), else the `ichor-controller` Deployment (`ICHOR_CONTROLLER_ROLLOUT`).
//! When the rollout is known to be on for the cluster, its Talos credentials Secret
//! `<cluster>-talosconfig` must exist too. A caller who may read none of these (the built-in
//! roles may not read Secrets or Deployments) gets no verdict: the command then only warns when
//! the operation is not taken up.

use ichor_renderers::crd::NAMESPACE;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Secret};
use kube::{Api, Client};

use crate::commands::init::{find_release, release, talos_secret};

/// The controller's Deployment in the chart.
use ichor_renderers::contract::CONTROLLER_DEPLOYMENT;
/// The controller's variable that turns the rollout on.
const ROLLOUT_ENV: &str = "ICHOR_CONTROLLER_ROLLOUT";

/// What is known of the controller's rollout of one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rollout {
    /// The cluster is rolled out (as far as the caller can see).
    On,
    /// The cluster is not rolled out: why and what to run, one paragraph.
    Off(String),
    /// The caller may read nothing that says.
    Unknown,
}

/// The `helm upgrade` that makes the release roll out `clusters` (its other values kept).
fn helm_command(release: &str, clusters: &[String]) -> String {
    format!(
        "helm upgrade {release} helm/ichor -n {NAMESPACE} --reuse-values --set-json \
         'controller.rollout.clusters={}'",
        serde_json::Value::from(clusters.to_vec())
    )
}

/// The sentence about the Secret `<cluster>-talosconfig` when it is missing, with the `ichor
/// init` command that creates it (for the issuer at `ui_url`, the release's, when known);
/// `None` when it exists or cannot be read.
async fn missing_credentials(client: &Client, cluster: &str, ui_url: Option<&str>) -> Option<String> {
    let name = talos_secret::secret_name(cluster);
    match Api::<Secret>::namespaced(client.clone(), NAMESPACE)
        .get_opt(&name)
        .await
    {
        Ok(None) => Some(format!(
            "Secret {NAMESPACE}/{name} does not exist: the controller reads cluster {cluster}'s Talos \
             credentials from it (keys talosconfig, an os:admin talosconfig of this cluster's context \
             only, and ca.crt, the cluster's Kubernetes CA). Create it, then run this command \
             again:\n\n    {}\n\n(it stores only the talosconfig's context named {cluster}, else the one \
             --talos-context NAME names, and the CA's certificates; a whole talosctl file, as `kubectl \
             create secret --from-file` would store it, commonly holds every cluster's os:admin keys)",
            talos_secret::create_command(cluster, ui_url)
        )),
        _ => None,
    }
}

/// Whether the controller rolls out `cluster` of `namespace` (see the module's text).
pub async fn check(client: &Client, namespace: &str, cluster: &str) -> Rollout {
    if namespace != NAMESPACE {
        return Rollout::Off(format!(
            "the controller rolls out TalosClusters of {NAMESPACE} only, not {namespace}/{cluster}"
        ));
    }
    let (listed, ui_url) = match find_release(client.clone(), None).await {
        Ok(found) => {
            let mut clusters = release::rollout_clusters(&found);
            if !clusters.iter().any(|c| c == cluster) {
                let now = if clusters.is_empty() {
                    "[] (the rollout is off)".to_owned()
                } else {
                    format!("[{}]", clusters.join(", "))
                };
                clusters.push(cluster.to_owned());
                let mut message = format!(
                    "the controller does not roll out cluster {cluster}: Helm release {NAMESPACE}/{} has \
                     controller.rollout.clusters={now}. Add the cluster (the release's other values are \
                     kept), then run this command again:\n\n    {}\n\n(`ichor init --ui-url URL --cluster \
                     {cluster}` does it too)",
                    found.name,
                    helm_command(&found.name, &clusters)
                );
                let ui_url = release::users_url(&found);
                if let Some(secret) = missing_credentials(client, cluster, ui_url.as_deref()).await {
                    message.push_str(&format!(". Then: {secret}"));
                }
                return Rollout::Off(message);
            }
            (true, release::users_url(&found))
        }
        Err(_) => (false, None),
    };
    if !listed {
        let deployment = Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
            .get_opt(CONTROLLER_DEPLOYMENT)
            .await;
        match deployment {
            Ok(Some(d)) if !rollout_on(&d) => {
                return Rollout::Off(format!(
                    "the controller does not roll out cluster {cluster}: Deployment \
                     {NAMESPACE}/{CONTROLLER_DEPLOYMENT} runs without the rollout ({ROLLOUT_ENV} is not \
                     \"true\"). Set the chart value controller.rollout.clusters to a list with {cluster} \
                     (e.g. {}), then run this command again",
                    helm_command("<release>", &[cluster.to_owned()])
                ));
            }
            Ok(Some(_)) => {}
            _ => return Rollout::Unknown,
        }
    }
    match missing_credentials(client, cluster, ui_url.as_deref()).await {
        Some(secret) => Rollout::Off(secret),
        None => Rollout::On,
    }
}

/// Whether a container of the Deployment's pod template turns the rollout on (the variable or
/// the flag).
fn rollout_on(deployment: &Deployment) -> bool {
    let containers = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    containers.iter().any(|c| {
        let env = c.env.as_deref().unwrap_or_default().iter().any(|e| {
            e.name == ROLLOUT_ENV && e.value.as_deref().is_some_and(|v| v.eq_ignore_ascii_case("true"))
        });
        let flag = c
            .args
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|a| a == "--rollout" || a == "--rollout=true");
        env || flag
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_helm_command_sets_the_whole_list_as_json() {
        assert_eq!(
            helm_command("ichor", &["staging".to_owned(), "prod".to_owned()]),
            "helm upgrade ichor helm/ichor -n ichor-system --reuse-values --set-json \
             'controller.rollout.clusters=[\"staging\",\"prod\"]'"
        );
    }

    #[test]
    fn the_rollout_is_on_by_the_chart_s_variable_or_the_flag() {
        let deployment = |env: serde_json::Value, args: serde_json::Value| -> Deployment {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "ichor-controller"},
                "spec": {"selector": {}, "template": {"spec": {"containers": [
                    {"name": "controller", "env": env, "args": args}
                ]}}}
            }))
            .unwrap()
        };
        assert!(!rollout_on(&deployment(
            serde_json::json!([]),
            serde_json::json!(["run"])
        )));
        assert!(rollout_on(&deployment(
            serde_json::json!([{"name": ROLLOUT_ENV, "value": "true"}]),
            serde_json::json!(["run"])
        )));
        assert!(rollout_on(&deployment(
            serde_json::json!([]),
            serde_json::json!(["run", "--rollout"])
        )));
    }
}
