//! Every built-in role holds `create` on `pods/portforward` in `ichor-system`, for `ichor ui`. The
//! attack: a viewer opens a tunnel to the controller's webhook port (an RBAC oracle: it answers
//! whether a named user holds a verb) or to the issuer's internal listener. Admission runs
//! before the apiserver looks the pod up, so no pod needs to run: a port-forward of an Ichor
//! role to anything but an issuer pod's 8443 is refused by the chart's policy; one to the issuer
//! gets past admission (and then finds no such pod here).

use std::time::Duration;

use ichor_testkit::control_plane::{ControlPlane, Options};
use ichor_testkit::install::{self, NAMESPACE};
use ichor_testkit::wait;

const VERA: (&str, &[&str]) = ("ichor:vera", &["ichor:viewer"]);

fn forward(plane: &ControlPlane, pod: &str, port: u16) -> anyhow::Result<Result<String, String>> {
    let uri = format!("/api/v1/namespaces/{NAMESPACE}/pods/{pod}/portforward?ports={port}");
    plane.kubectl_as(Some(VERA), &["create", "--raw", &uri, "-f", "-"], Some("{}"))
}

fn by_the_policy(answer: &Result<String, String>) -> bool {
    matches!(answer, Err(e) if e.contains("may port-forward only to the issuer pods"))
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn a_viewer_cannot_port_forward_to_the_controller_or_the_issuers_internal_listener() -> anyhow::Result<()> {
    let Some(plane) = ControlPlane::start(Options::default())? else {
        return Ok(());
    };
    install::install(&plane)?;
    // An admission policy takes effect a moment after it is created (on the code without it, the
    // refusal never comes and this fails).
    let first = wait::until(
        "the tunnel to the controller refused",
        Duration::from_secs(30),
        || {
            let answer = forward(&plane, "ichor-controller-5d4f8b7c9-x2x7q", 9443)?;
            Ok(by_the_policy(&answer).then_some(answer))
        },
    )?;
    eprintln!("{first:?}");
    for (pod, port) in [
        ("ichor-controller-5d4f8b7c9-x2x7q", 8080),
        ("ichor-issuer-6b9c7d5f4-abcde", 8444),
        ("ichor-issuer-6b9c7d5f4-abcde", 9090),
        ("etcd-backup-0", 8443),
    ] {
        let answer = forward(&plane, pod, port)?;
        assert!(by_the_policy(&answer), "{pod}:{port}: {answer:?}");
    }
    // `ichor ui`'s tunnel passes admission: what stops it here is the missing pod.
    let answer = forward(&plane, "ichor-issuer-6b9c7d5f4-abcde", 8443)?;
    assert!(!by_the_policy(&answer), "{answer:?}");
    assert!(
        matches!(&answer, Err(e) if e.contains("not found") || e.contains("NotFound")),
        "{answer:?}"
    );
    Ok(())
}
