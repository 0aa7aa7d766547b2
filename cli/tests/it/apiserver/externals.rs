//! Two issuers in one configuration: Ichor's and an external OpenID provider nobody here wrote
//! (panva's OpenID-certified `oidc-provider`, `ichor_testkit::external_idp`), rendered as the
//! `spec.authentication.external` entries of the cluster and trusted by a real kube-apiserver.
//! External users come out as `oidc:<email>` with `oidc:` groups; the rendered
//! `userValidationRules` refuse any mapped name or group in `system:` even where a careless
//! prefix would make one; only `ichor-kube` (Ichor) and `kubernetes` (the IdP) are Kubernetes
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
async fn ichor_and_an_external_provider_are_trusted_side_by_side_and_system_identities_are_refused() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(corp) = idp(&[
        ("alice", "alice@example.org", &["dev", "ops"]),
        ("mallory", "mallory@example.org", &["system:masters"]),
    ]) else {
        return;
    };
    // A second provider whose (careless) prefixes start with "system": its claims can complete
    // them to `system:` names, which only the validation rules stop.
    let careless = idp(&[
        ("carol", "carol@example.org", &[]),
        ("eve", ":admin", &[]),
        ("trent", "trent@example.org", &[":masters"]),
    ])
    .unwrap();
    let externals = format!(
        "{}{}",
        external(&corp, ""),
        external(
            &careless,
            "        usernamePrefix: \"system\"\n        groupsPrefix: \"system\"\n"
        )
    );
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

    // The careless prefixes: a harmless name passes; `system:` names and groups are refused
    // (same provider, same entry: only the mapped values differ).
    let carol = careless.id_token("carol", "kubernetes").unwrap().id_token;
    assert_eq!(
        plane.whoami_with_token(0, &carol).unwrap().0,
        "systemcarol@example.org"
    );
    for who in ["eve", "trent"] {
        let token = careless.id_token(who, "kubernetes").unwrap().id_token;
        let refused = plane.whoami_with_token(0, &token).unwrap_err().to_string();
        assert!(refused.contains("Unauthorized"), "{who}: {refused}");
    }
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
