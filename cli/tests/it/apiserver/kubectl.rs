//! Real kubectl, real issuer, real apiserver: a kubeconfig from `GetMyKubeconfig` runs
//! `ichor auth token`, the person signs in once in the "browser", and the apiserver's JWT
//! authenticator — configured by our rendered AuthenticationConfiguration, reaching the issuer's
//! internal discovery listener under the Ichor CA — maps them to `ichor:<name>` with their role
//! groups, which the chart's ClusterRoles authorize.

use crate::apiserver::site::{Site, Terminal};

const ICHOR_USER: &str = "apiVersion: ichor.maesh.dev/v1alpha1
kind: IchorUser
metadata:
  name: dave
  namespace: ichor-system
spec:
  roles: [viewer]
";

/// `TalosConfigPatch` is Ichor core's kind, which identity neither defines nor reads: a CRD that
/// keeps any content, so the apiserver serves the resource the roles name.
const CONFIG_PATCH_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: talosconfigpatches.ichor.maesh.dev
spec:
  group: ichor.maesh.dev
  scope: Namespaced
  names: {plural: talosconfigpatches, singular: talosconfigpatch, kind: TalosConfigPatch}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

const CONFIG_PATCH: &str = "apiVersion: ichor.maesh.dev/v1alpha1
kind: TalosConfigPatch
metadata:
  name: sysctl
  namespace: ichor-system
spec:
  patch: {}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane: hack/kube/build.sh"]
async fn kubectl_signs_in_through_ichor_and_each_role_is_authorized_by_the_chart_roles() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(site) = Site::start("", &[]).await else {
        return;
    };
    site.plane.apply(CONFIG_PATCH_CRD).unwrap();
    site.plane
        .kubectl_run(
            &[
                "wait",
                "--for=condition=Established",
                "crd/talosconfigpatches.ichor.maesh.dev",
            ],
            None,
        )
        .unwrap();
    let alice = site.person("alice", &["viewer"], "alice's own password").await;
    let bob = site.person("bob", &["operator"], "bob's own password!").await;
    let admin = Terminal::open(&site, "admin", crate::apiserver::site::ADMIN_PASSWORD).await;
    admin.login(&site).await;

    for (t, role) in [(&alice, "viewer"), (&bob, "operator"), (&admin, "admin")] {
        let (name, groups) = t.whoami(&site).await;
        assert_eq!(name, format!("ichor:{}", t.user));
        let mut groups = groups;
        groups.sort();
        assert_eq!(
            groups,
            [format!("ichor:{role}"), "system:authenticated".to_owned()],
            "{}",
            t.user
        );
        let (again, _) = t.whoami(&site).await;
        assert_eq!(again, name);
    }

    // A viewer reads the clusters but changes nothing.
    let listed = alice
        .kubectl_ok(
            &site,
            &["get", "talosclusters.ichor.maesh.dev", "-n", "ichor-system"],
        )
        .await;
    assert!(!listed.contains("Forbidden"), "{listed}");
    assert!(
        !alice
            .can_i(&site, "create", "talosconfigpatches.ichor.maesh.dev")
            .await
    );
    assert!(!alice.can_i(&site, "create", "ichorusers.ichor.maesh.dev").await);
    // An operator creates config patches, not users.
    assert!(
        bob.can_i(&site, "create", "talosconfigpatches.ichor.maesh.dev")
            .await
    );
    let patch_file = bob.home.path().join("patch.yaml");
    std::fs::write(&patch_file, CONFIG_PATCH).unwrap();
    let refused = alice
        .kubectl(&site, &["create", "-f", patch_file.to_str().unwrap()])
        .await;
    assert!(!refused.status.success(), "a viewer created a config patch");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("Forbidden"));
    let created = bob
        .kubectl_ok(&site, &["create", "-f", patch_file.to_str().unwrap()])
        .await;
    assert!(
        created.contains("talosconfigpatch.ichor.maesh.dev/sysctl created"),
        "{created}"
    );
    assert!(!bob.can_i(&site, "create", "ichorusers.ichor.maesh.dev").await);
    // An admin creates IchorUsers, for real.
    assert!(admin.can_i(&site, "create", "ichorusers.ichor.maesh.dev").await);
    let user_file = admin.home.path().join("dave.yaml");
    std::fs::write(&user_file, ICHOR_USER).unwrap();
    let created = admin
        .kubectl_ok(&site, &["apply", "-f", user_file.to_str().unwrap()])
        .await;
    assert!(
        created.contains("ichoruser.ichor.maesh.dev/dave created"),
        "{created}"
    );
    let refused = bob
        .kubectl(&site, &["delete", "ichoruser", "dave", "-n", "ichor-system"])
        .await;
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("Forbidden"));

    // No role reads a Secret.
    for t in [&alice, &bob, &admin] {
        assert!(
            !t.can_i(&site, "get", "secrets").await,
            "{} may read secrets",
            t.user
        );
        let out = t.kubectl(&site, &["get", "secrets", "-n", "ichor-system"]).await;
        assert!(!out.status.success(), "{} listed secrets", t.user);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "User \"ichor:{}\" cannot list resource \"secrets\"",
                t.user
            )),
            "{stderr}"
        );
    }
}
