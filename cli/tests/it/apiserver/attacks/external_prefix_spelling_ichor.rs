//! An external provider whose prefix is the beginning of `ichor:` (`ichor`, `ich`, `i`): its
//! people choose the rest. A group `:admin` at the provider would be `ichor:admin` at the
//! kube-apiserver (Ichor's administrators' group) and a user name `:alice` would be Ichor's
//! `ichor:alice`.
//!
//! The attack: a `TalosCluster` whose external entry has `usernamePrefix: ichor` and
//! `groupsPrefix: ichor`, and tokens of that provider whose claims complete the prefix. The
//! renderer (and so the controller and the admission webhook, which share its prefix rules)
//! refuses the prefix; and should such a configuration reach an apiserver anyway (written by
//! hand, or by a renderer without the rule), the `userValidationRules` the builder puts into
//! every external entry make the real kube-apiserver refuse the `ichor:` names while the
//! provider's other people still sign in.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ichor_renderers::auth::second_factor_policy::SecondFactorPolicy;
use ichor_renderers::authn::{self, RenderError, cel};
use ichor_renderers::crd::TalosCluster;
use ichor_testkit::control_plane::{ControlPlane, Options};
use ichor_testkit::external_idp::{self, Account, Client, ExternalIdp, ExternalIdpOptions};

/// A YAML item of `spec.authentication.external` for `idp` with both prefixes `prefix`.
fn careless_entry(idp: &ExternalIdp, prefix: &str) -> String {
    let ca: String = idp.ca_pem().lines().map(|l| format!("          {l}\n")).collect();
    format!(
        "      - issuerURL: {}\n        audiences: [kubernetes]\n        usernamePrefix: {prefix:?}\n\
         \x20       groupsPrefix: {prefix:?}\n        certificateAuthority: |\n{ca}",
        idp.issuer_url()
    )
}

fn careless_cluster(entries: &[String]) -> TalosCluster {
    let yaml = format!(
        "apiVersion: ichor.maesh.dev/v1alpha1\nkind: TalosCluster\nmetadata:\n  name: test\n  namespace: ichor-system\n\
         spec:\n  versionContract: v1.14\n  authentication:\n    external:\n{}",
        entries.concat()
    );
    serde_yaml::from_str(&yaml).unwrap()
}

fn idp(accounts: &[(&str, &str, &[&str])]) -> ExternalIdp {
    let accounts: BTreeMap<String, Account> = accounts
        .iter()
        .map(|(name, email, groups)| ((*name).to_owned(), Account::new(email, groups)))
        .collect();
    ExternalIdp::start(ExternalIdpOptions {
        accounts,
        clients: vec![Client::native("kubernetes")],
        ..ExternalIdpOptions::default()
    })
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane and oidc-provider: hack/kube/build.sh, hack/install-test-deps.sh"]
async fn an_external_prefix_that_spells_ichor_is_refused_and_its_ichor_names_never_authenticate() {
    if !external_idp::available() {
        return;
    }
    let corp = idp(&[
        ("carol", "carol@example.org", &["dev"]),
        // Completes the prefix `ichor` to Ichor's user `ichor:alice`.
        ("eve", ":alice", &[]),
        // Completes the groups prefix `ichor` to Ichor's administrators' group.
        ("mallory", "mallory@example.org", &[":admin"]),
    ]);
    // The same with `system`: Kubernetes' own names.
    let other = idp(&[
        ("dave", "dave@example.org", &[]),
        ("trent", ":kube-controller-manager", &[]),
        ("oscar", "oscar@example.org", &[":masters"]),
    ]);

    // The gate: the renderer refuses the prefix, naming both fields.
    for prefix in ["ichor", "ich", "i", "system", "sys"] {
        let cluster = careless_cluster(&[careless_entry(&corp, prefix)]);
        match authn::render(&cluster, None, &SecondFactorPolicy::default()) {
            Err(RenderError::Prefix(errors)) => {
                let paths: Vec<_> = errors.iter().map(|e| e.path.as_str()).collect();
                assert_eq!(
                    paths,
                    [
                        "spec.authentication.external[0].usernamePrefix",
                        "spec.authentication.external[0].groupsPrefix"
                    ],
                    "{prefix:?}"
                );
                assert!(
                    errors[0].to_string().contains("could complete it"),
                    "{}",
                    errors[0]
                );
            }
            answer => panic!("the prefix {prefix:?} was not refused: {answer:?}"),
        }
    }

    // Past the gate: the configuration the builder makes of that spec, given to a real
    // kube-apiserver as it is.
    let cluster = careless_cluster(&[careless_entry(&corp, "ichor"), careless_entry(&other, "system")]);
    let auth = cluster.spec.authentication.as_ref().unwrap();
    let configuration = authn::build(auth, None, &SecondFactorPolicy::default());
    let rules: Vec<_> = configuration.jwt[0]
        .user_validation_rules
        .iter()
        .map(|r| r.expression.as_str())
        .collect();
    assert!(
        rules.contains(&cel::RULE_NO_ICHOR_USERNAME) && rules.contains(&cel::RULE_NO_ICHOR_GROUPS),
        "the external entry carries no ichor: rule: {rules:?}"
    );
    let yaml = serde_yaml::to_string(&configuration).unwrap();
    let Some(plane) = tokio::task::spawn_blocking(move || {
        ControlPlane::start(Options {
            authentication_config: yaml,
            ..Options::default()
        })
    })
    .await
    .unwrap()
    .unwrap() else {
        return;
    };

    // The providers' other people sign in (the authenticators work, prefixes and all).
    for (provider, who, want) in [
        (&corp, "carol", "ichorcarol@example.org"),
        (&other, "dave", "systemdave@example.org"),
    ] {
        let token = provider.id_token(who, "kubernetes").unwrap().id_token;
        let started = Instant::now();
        let name = loop {
            match plane.whoami_with_token(0, &token) {
                Ok((name, _)) => break name,
                Err(e) => {
                    assert!(
                        started.elapsed() < Duration::from_secs(60),
                        "the apiserver never accepted {who}'s token: {e}\n{}",
                        plane.log(0)
                    );
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        };
        assert_eq!(name, want);
    }

    // The ones whose claims complete a prefix to `ichor:` or `system:` are refused.
    for (provider, who) in [
        (&corp, "eve"),
        (&corp, "mallory"),
        (&other, "trent"),
        (&other, "oscar"),
    ] {
        let token = provider.id_token(who, "kubernetes").unwrap().id_token;
        let refused = match plane.whoami_with_token(0, &token) {
            Ok(identity) => panic!("{who} authenticated as {identity:?}"),
            Err(e) => e.to_string(),
        };
        assert!(refused.contains("Unauthorized"), "{who}: {refused}");
    }
}
