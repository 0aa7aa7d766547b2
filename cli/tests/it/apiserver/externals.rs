//! Two issuers in one configuration: Ichor's and an external OpenID provider nobody here wrote
//! (panva's OpenID-certified `oidc-provider`, `ichor_testkit::external_idp`), rendered as the
//! `spec.authentication.external` entries of the cluster and trusted by a real kube-apiserver.
//! External users come out as `oidc:<email>` with `oidc:` groups (a careless prefix that a
//! name could complete to `system:` or `ichor:` is refused, and the rendered
//! `userValidationRules` refuse such names anyway:
//! `apiserver::attacks::external_prefix_spelling_ichor`); only `ichor-kube` (Ichor) and `kubernetes` (the IdP) are Kubernetes
//! audiences. Ichor's API takes the provider's people too, and gives them a kubeconfig whose
//! `ichor auth token` signs in at that provider.

use std::collections::BTreeMap;

use ichor_testkit::external_idp::{Account, Client, ExternalIdp, ExternalIdpOptions};

use crate::apiserver::site::{ADMIN_PASSWORD, Site, Terminal};

fn idp(accounts: &[(&str, &str, &[&str])]) -> Option<ExternalIdp> {
    if !ichor_testkit::external_idp::available() {
        return None;
    }
    let accounts: BTreeMap<String, Account> = accounts
        .iter()
        .map(|(name, email, groups)| ((*name).to_owned(), Account::new(email, groups)))
        .collect();
    Some(
        ExternalIdp::start(ExternalIdpOptions {
            accounts,
            // `kubernetes` is the CLI's (any loopback port), `ichor-ui` the UI's and the API's.
            clients: vec![Client::native("kubernetes"), Client::public("ichor-ui")],
            ..ExternalIdpOptions::default()
        })
        .unwrap(),
    )
}

/// A YAML list item of `spec.authentication.external`.
fn external(idp: &ExternalIdp, prefixes: &str) -> String {
    let ca: String = idp.ca_pem().lines().map(|l| format!("          {l}\n")).collect();
    format!(
        "      - issuerURL: {}\n        audiences: [kubernetes]\n{prefixes}        certificateAuthority: |\n{ca}",
        idp.issuer_url()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane and oidc-provider: hack/kube/build.sh, hack/install-test-deps.sh"]
async fn ichor_and_an_external_provider_are_trusted_side_by_side_and_system_identities_are_refused() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(corp) = idp(&[
        ("alice", "alice@example.org", &["dev", "ops"]),
        ("mallory", "mallory@example.org", &["system:masters"]),
    ]) else {
        return;
    };
    let externals = external(&corp, "");
    // Ichor's API accepts the corporate provider beside its own users; RBAC alone lets alice
    // (no Ichor role) get her kubeconfig.
    let ca_path = corp.ca_path().display().to_string();
    let rbac = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        rbac.path(),
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: alice-viewer\n\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: ichor-viewer\n\
         subjects:\n  - apiGroup: rbac.authorization.k8s.io\n    kind: User\n    name: oidc:alice@example.org\n",
    )
    .unwrap();
    let rbac_path = rbac.path().display().to_string();
    let dev_args = [
        "--rbac-file",
        rbac_path.as_str(),
        "--external-issuer-url",
        corp.issuer_url(),
        "--external-client-id",
        "ichor-ui",
        "--external-kube-client-id",
        "kubernetes",
        "--external-ca-file",
        ca_path.as_str(),
    ];
    let Some(site) = Site::start(&externals, &dev_args).await else {
        return;
    };
    let plane = &site.plane;

    // Ichor's users, unchanged beside the IdP.
    let ichor = site.kube_token("admin", ADMIN_PASSWORD).await.unwrap();
    let (name, groups) = plane.whoami_with_token(0, &ichor).unwrap();
    assert_eq!(name, "ichor:admin");
    assert!(groups.contains(&"ichor:admin".to_owned()), "{groups:?}");

    // The IdP's users, prefixed.
    let alice = corp.id_token("alice", "kubernetes").unwrap().id_token;
    let (name, mut groups) = plane.whoami_with_token(0, &alice).unwrap();
    groups.sort();
    assert_eq!(name, "oidc:alice@example.org");
    assert_eq!(groups, ["oidc:dev", "oidc:ops", "system:authenticated"]);
    // A group the IdP calls system:masters is oidc:system:masters here: no privilege.
    let mallory = corp.id_token("mallory", "kubernetes").unwrap().id_token;
    let (name, groups) = plane.whoami_with_token(0, &mallory).unwrap();
    assert_eq!(name, "oidc:mallory@example.org");
    assert!(groups.contains(&"oidc:system:masters".to_owned()), "{groups:?}");
    assert!(!groups.contains(&"system:masters".to_owned()), "{groups:?}");

    // Audiences: neither Ichor's ichor-ui tokens nor the IdP's ichor-ui tokens are credentials.
    let http = crate::dev_support::http_client(&site.dev);
    let ui = crate::dev_support::sign_in(&http, &site.dev, "ichor-ui", None, "admin", ADMIN_PASSWORD)
        .await
        .unwrap();
    let refused = plane.whoami_with_token(0, &ui).unwrap_err().to_string();
    assert!(refused.contains("Unauthorized"), "{refused}");
    let idp_ui = corp.id_token("alice", "ichor-ui").unwrap().id_token;
    let refused = plane.whoami_with_token(0, &idp_ui).unwrap_err().to_string();
    assert!(refused.contains("Unauthorized"), "{refused}");

    // An external user's own kubectl: the kubeconfig Ichor's API gives her (signed in with the
    // provider's ichor-ui token) runs `ichor auth token` at her provider; `ichor auth login`
    // with its arguments signs her in on the provider's page; kubectl is oidc:<email>.
    let terminal = Terminal::external(&site, &corp, "alice").await;
    terminal.login_external(&site, &corp).await;
    let (name, mut groups) = terminal.whoami(&site).await;
    groups.sort();
    assert_eq!(name, "oidc:alice@example.org");
    assert_eq!(groups, ["oidc:dev", "oidc:ops", "system:authenticated"]);
    // The plugin's cache and the provider's refresh token: a second command needs no sign-in.
    assert_eq!(terminal.whoami(&site).await.0, "oidc:alice@example.org");
}

/// Turning Ichor's users on where a site's provider is already trusted keeps every external
/// login working. Before: the kube-apiserver trusts the provider alone (users off), an external
/// user's kubectl token works and no Ichor token does. The switch: Ichor's issuer beside the
/// provider in the rendered configuration, the apiserver restarted with it (as `ichor config
/// apply` does). After: the token taken before the switch still works, a new login at the
/// provider works, Ichor's own users work too, and Ichor's API takes the provider's people.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane and oidc-provider: hack/kube/build.sh, hack/install-test-deps.sh"]
async fn turning_users_on_beside_a_trusted_provider_keeps_every_external_login_working() {
    use crate::apiserver::site::cluster;
    use ichor_issuer::api::proto::{WhoAmIRequest, user_service_client::UserServiceClient};
    use ichor_renderers::auth::second_factor_policy::SecondFactorPolicy;
    use ichor_renderers::authn;

    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(corp) = idp(&[("alice", "alice@example.org", &["dev"])]) else {
        return;
    };
    let ca_path = corp.ca_path().display().to_string();
    let dev_args = [
        "--external-issuer-url",
        corp.issuer_url(),
        "--external-client-id",
        "ichor-ui",
        "--external-kube-client-id",
        "kubernetes",
        "--external-ca-file",
        ca_path.as_str(),
    ];
    let entry = external(&corp, "");
    let Some(mut site) = Site::start(&entry, &dev_args).await else {
        return;
    };

    // Before: users off, the provider alone.
    let mut users_off = cluster(&site.dev.url, &entry);
    users_off.spec.authentication.as_mut().unwrap().ichor = None;
    let rendered = authn::render(&users_off, None, &SecondFactorPolicy::default()).unwrap();
    let config = serde_yaml::to_string(&rendered.configuration).unwrap();
    assert!(
        !config.contains(&site.dev.url),
        "users off renders no Ichor issuer:\n{config}"
    );
    site.plane
        .restart_apiserver(0, Some(&config), crate::apiserver::site::RESTART_TIMEOUT)
        .unwrap();
    let plane = &site.plane;
    let before = corp.id_token("alice", "kubernetes").unwrap();
    assert_eq!(
        wait_whoami(plane, &before.id_token).await.0,
        "oidc:alice@example.org"
    );
    let ichor = site.kube_token("admin", ADMIN_PASSWORD).await.unwrap();
    let refused = plane.whoami_with_token(0, &ichor).unwrap_err().to_string();
    assert!(refused.contains("Unauthorized"), "users off: {refused}");

    // The switch: Ichor's issuer beside the provider.
    let both = site.authentication_config(&entry);
    site.plane
        .restart_apiserver(0, Some(&both), crate::apiserver::site::RESTART_TIMEOUT)
        .unwrap();
    let plane = &site.plane;
    site.wait_trusted().await;

    // After: the token from before, a new login and a refresh at the provider, Ichor's admin.
    let (name, mut groups) = wait_whoami(plane, &before.id_token).await;
    groups.sort();
    assert_eq!(name, "oidc:alice@example.org");
    assert_eq!(groups, ["oidc:dev", "system:authenticated"]);
    let fresh = corp.id_token("alice", "kubernetes").unwrap().id_token;
    assert_eq!(
        plane.whoami_with_token(0, &fresh).unwrap().0,
        "oidc:alice@example.org"
    );
    let refreshed = corp
        .refresh("kubernetes", before.refresh_token.as_deref().unwrap())
        .unwrap()
        .id_token;
    assert_eq!(
        plane.whoami_with_token(0, &refreshed).unwrap().0,
        "oidc:alice@example.org"
    );
    assert_eq!(plane.whoami_with_token(0, &ichor).unwrap().0, "ichor:admin");
    // And Ichor's API takes her with her provider's token for the UI's client.
    let ui = corp.id_token("alice", "ichor-ui").unwrap().id_token;
    let me = UserServiceClient::new(crate::dev_support::channel(&site.dev).await)
        .who_am_i(crate::dev_support::authed(WhoAmIRequest {}, &ui))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(me.name, "oidc:alice@example.org");
    assert!(me.roles.is_empty());
}

/// `kubectl auth whoami` with `token`, retried for up to 60 s while the restarted apiserver's
/// JWT authenticators read their providers' keys.
async fn wait_whoami(
    plane: &ichor_testkit::control_plane::ControlPlane,
    token: &str,
) -> (String, Vec<String>) {
    let started = std::time::Instant::now();
    loop {
        match plane.whoami_with_token(0, token) {
            Ok(who) => return who,
            Err(e) if started.elapsed() < std::time::Duration::from_secs(60) => {
                eprintln!("not yet: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
            Err(e) => panic!("the apiserver never accepted the token: {e}"),
        }
    }
}
