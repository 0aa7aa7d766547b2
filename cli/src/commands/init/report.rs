//! What `ichor init` prints once its writes are done: the upgrade on stderr, then the next
//! commands on stdout (the Talos credentials Secret's, when it is missing, and the rollout's).

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
    } else if plan.namespace == NAMESPACE {
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
        TalosSecret::Missing => {
            eprintln!(
                "\nThe rollout reads cluster {}'s Talos credentials from Secret {NAMESPACE}/{name}, which does \
                 not exist. Create it (talosconfig: an os:admin talosconfig of the cluster; ca.crt: its \
                 Kubernetes CA, PEM), or run this command again with --talosconfig FILE --kube-ca FILE:\n",
                plan.cluster
            );
            println!("{}", talos_secret::create_command(&plan.cluster));
        }
    }
    eprintln!(
        "\nNext, roll the change out to the control planes (restarts each kube-apiserver, one at a time; no \
         reboot):\n"
    );
    println!("ichor config apply --cluster {}", plan.cluster);
}
