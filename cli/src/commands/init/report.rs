//! What `ichor init` prints once its writes are done: the upgrade on stderr, then the next
//! commands on stdout (the Talos credentials Secret's, when it is missing, and the rollout's).
//! The Secret's is `ichor init` again with the credentials files, never `kubectl create secret
//! --from-file`, which would store the whole talosconfig (commonly every cluster's `os:admin`
//! keys).

use ichor_renderers::crd::NAMESPACE;

use super::{InitPlan, InitReport, TalosSecret, talos_secret};

/// What the upgrade did, or that none was needed (stderr).
pub(super) fn print_release(report: &InitReport, plan: &InitPlan) {
    if report.upgraded {
        let rollout = report
            .rollout_clusters
            .as_ref()
            .map(|c| format!(", controller.rollout.clusters=[{}]", c.join(", ")))
            .unwrap_or_default();
        eprintln!(
            "Helm release {NAMESPACE}/{}: upgraded with ichorUI.users.enabled=true, externalURL={}{rollout} \
             (not waited for: the issuer's pods become ready once the controller issued their keys and \
             leaf; the controller's pods restart when its rollout changed).",
            report.release, plan.ui_url
        );
    } else if plan.namespace == NAMESPACE && report.rolled_out {
        eprintln!(
            "Helm release {NAMESPACE}/{} runs the issuer at {} and rolls out cluster {} already.",
            report.release, plan.ui_url, plan.cluster
        );
    } else {
        eprintln!(
            "Helm release {NAMESPACE}/{} runs the issuer at {} already.",
            report.release, plan.ui_url
        );
    }
    if !plan.rollout && plan.namespace == NAMESPACE {
        eprintln!(
            "--no-rollout: controller.rollout.clusters is left as the release has it{}, and no Secret \
             {NAMESPACE}/{} was created or read.",
            if report.rolled_out {
                " (it lists the cluster already)"
            } else {
                " (without the cluster: the controller does not roll it out)"
            },
            talos_secret::secret_name(&plan.cluster)
        );
    }
    if plan.namespace != NAMESPACE {
        eprintln!(
            "note: the controller rolls out TalosClusters of {NAMESPACE} only; {}/{} is not added to \
             controller.rollout.clusters.",
            plan.namespace, plan.cluster
        );
    }
}

/// The Talos credentials Secret (stderr), then the next commands (stdout): the one creating
/// that Secret when it is missing, and the rollout.
pub(super) fn print_next(report: &InitReport, plan: &InitPlan) {
    let name = talos_secret::secret_name(&plan.cluster);
    match report.talos_secret {
        TalosSecret::Created => eprintln!(
            "Created Secret {NAMESPACE}/{name} (keys talosconfig and ca.crt) from --talosconfig and --kube-ca."
        ),
        TalosSecret::Kept if plan.talos_credentials.is_some() => eprintln!(
            "Secret {NAMESPACE}/{name} exists already; it was kept (--talosconfig and --kube-ca were not used)."
        ),
        TalosSecret::Kept | TalosSecret::NotApplicable => {}
        TalosSecret::NotRolledOut if !report.rolled_out => {
            eprintln!(
                "\nRoll the change out to cluster {}'s control planes your own way (each kube-apiserver \
                 must restart), e.g. from your machine with your talosconfig: `ichor config apply --dir \
                 DIR` (see `ichor config apply --help`).",
                plan.cluster
            );
            return;
        }
        TalosSecret::NotRolledOut => {}
        TalosSecret::Missing => {
            eprintln!(
                "\nThe rollout reads cluster {}'s Talos credentials from Secret {NAMESPACE}/{name}, which does \
                 not exist. Create it by running this command again with an os:admin talosconfig of the \
                 cluster and its Kubernetes CA (PEM); it stores only the file's context named {} (else pass \
                 --talos-context NAME) and the CA's CERTIFICATE blocks, not your other clusters' keys:\n",
                plan.cluster, plan.cluster
            );
            println!(
                "{}",
                talos_secret::create_command(&plan.cluster, Some(&plan.ui_url))
            );
        }
    }
    eprintln!(
        "\nNext, roll the change out to the control planes (restarts each kube-apiserver, one at a time; no \
         reboot):\n"
    );
    println!("ichor config apply --cluster {}", plan.cluster);
}
