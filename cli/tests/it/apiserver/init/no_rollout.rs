//! `ichor init --no-rollout` on a real control plane with the real helm: the operator rolls the
//! control planes out another way, so the upgrade turns users on but leaves the release's
//! `controller.rollout.clusters` as it was, no Secret `<cluster>-talosconfig` is created, and
//! the command says so instead of printing `ichor config apply`.

use ichor_testkit::control_plane::{ControlPlane, Options};
use ichor_testkit::helm::Helm;
use ichor_testkit::install::{self, NAMESPACE};
use serde_json::json;

use super::webhooks::Webhooks;
use super::{CLUSTER, OPERATOR_VALUES, RELEASE, TALOS_CLUSTER, URL, get, init_with};
use crate::support::text;

#[test]
#[ignore = "needs the control plane and helm: hack/kube/build.sh"]
fn init_with_no_rollout_leaves_the_release_s_rollout_list_and_creates_no_talos_secret() {
    let options = Options {
        extra_args: vec!["--enable-aggregator-routing=true".to_owned()],
        ..Options::default()
    };
    let Some(plane) = ControlPlane::start(options).unwrap() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let Some(helm) = Helm::new(&plane, home.path()) else {
        return;
    };
    install::install_crds(&plane).unwrap();
    plane.apply(TALOS_CLUSTER).unwrap();
    // The operator's own rollout list, which names another cluster.
    let mut values = OPERATOR_VALUES.to_vec();
    values.extend(["--set", "controller.rollout.clusters={staging}"]);
    helm.install_chart(RELEASE, &values).unwrap();
    let before = json!({"controller": {"replicas": 1, "rollout": {"clusters": ["staging"]}}});
    assert_eq!(helm.user_values(RELEASE).unwrap(), before);
    let _webhooks = Webhooks::serve(&plane, CLUSTER).unwrap();

    let out = init_with(&helm, home.path(), tmp.path(), URL, &["--no-rollout"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");

    // Users on; the rollout list exactly as the operator left it.
    assert_eq!(helm.revision(RELEASE).unwrap(), (2, "deployed".to_owned()));
    assert_eq!(
        helm.user_values(RELEASE).unwrap(),
        json!({"controller": {"replicas": 1, "rollout": {"clusters": ["staging"]}},
            "ichorUI": {"users": {"enabled": true, "externalURL": URL}}})
    );
    assert_eq!(
        get(&plane, "taloscluster", CLUSTER)["spec"]["authentication"]["ichor"],
        json!({"enabled": true, "url": URL})
    );
    assert!(
        plane
            .get_json(0, "secret", NAMESPACE, "prod-talosconfig")
            .unwrap()
            .is_none(),
        "no Talos credentials Secret"
    );

    // The report says what was left alone, and prints no rollout command.
    for expected in [
        "--no-rollout: controller.rollout.clusters is left as the release has it (without the cluster",
        "no Secret ichor-system/prod-talosconfig was created or read",
        "ichor config apply --dir",
    ] {
        assert!(stderr.contains(expected), "{expected:?} not in:\n{stderr}");
    }
    assert!(!stderr.contains("controller.rollout.clusters=["), "{stderr}");
    assert_eq!(stdout, "", "no next command on stdout: {stderr}");
}
