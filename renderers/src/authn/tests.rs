//! End-to-end tests of `render`: its gates, snapshots of the rendered documents, and the
//! property that every valid `spec.authentication` renders to a configuration the validator
//! accepts.

use proptest::prelude::*;

use super::*;
use crate::auth::second_factor_policy::{SecondFactorLevel, SecondFactorPolicy};
use crate::crd::{
    AuthenticationSpec, ExternalIssuerSpec, IchorIssuerSpec, TalosCluster, TalosClusterSpec, VersionContract,
};

const TEST_CA: &str = include_str!("testdata/test-ca.pem");
const ENDPOINT: &str = "https://cp.example.net:6443";

fn trust() -> IchorTrust {
    IchorTrust {
        discovery_url: "https://10.96.0.42:8444/.well-known/openid-configuration".into(),
        ca_pem: TEST_CA.into(),
    }
}

fn cluster(contract: Option<&str>, auth: Option<AuthenticationSpec>) -> TalosCluster {
    TalosCluster::new(
        "prod",
        TalosClusterSpec {
            version_contract: contract.map(|c| c.parse::<VersionContract>().unwrap()),
            endpoint: ENDPOINT.into(),
            authentication: auth,
            cni: None,
        },
    )
}

fn ichor() -> Option<IchorIssuerSpec> {
    Some(IchorIssuerSpec {
        enabled: true,
        url: "https://ichor.example.com".into(),
    })
}

fn external(url: &str, audiences: &[&str]) -> ExternalIssuerSpec {
    ExternalIssuerSpec {
        issuer_url: url.into(),
        audiences: audiences.iter().map(|a| (*a).to_string()).collect(),
        ..Default::default()
    }
}

/// The policy of an installation that sets none.
fn off() -> SecondFactorPolicy {
    SecondFactorPolicy::default()
}

fn rendered(auth: AuthenticationSpec) -> Rendered {
    match render(&cluster(Some("v1.14"), Some(auth)), Some(&trust()), &off()) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    }
}

fn render_err(c: &TalosCluster, trust: Option<&IchorTrust>) -> RenderError {
    match render(c, trust, &off()) {
        Ok(r) => panic!("rendered: {}", r.yaml),
        Err(e) => e,
    }
}

#[test]
fn refuses_a_cluster_without_a_version_contract_naming_the_field() {
    let e = render_err(&cluster(None, None), None);
    assert_eq!(e, RenderError::ContractMissing);
    assert_eq!(
        e.to_string(),
        "spec.versionContract: required: structured authentication needs contract v1.14 or later"
    );
}

#[test]
fn refuses_a_contract_older_than_v1_14() {
    let e = render_err(&cluster(Some("v1.13"), Some(AuthenticationSpec::default())), None);
    assert!(e.to_string().starts_with(
        "spec.versionContract: v1.13 is too old: structured authentication needs contract v1.14 or later"
    ));
    assert!(render(&cluster(Some("v2.0"), None), None, &off()).is_ok());
}

#[test]
fn refuses_an_external_prefix_in_ichors_namespace() {
    let mut e = external("https://idp.example.org", &["k"]);
    e.groups_prefix = Some("ichor:".into());
    let err = render_err(
        &cluster(
            Some("v1.14"),
            Some(AuthenticationSpec {
                ichor: None,
                external: vec![e],
            }),
        ),
        None,
    );
    let RenderError::Prefix(list) = &err else {
        panic!("{err}")
    };
    assert_eq!(list[0].path, "spec.authentication.external[0].groupsPrefix");
}

#[test]
fn waits_for_the_trust_configmap_when_ichor_is_enabled() {
    let c = cluster(
        Some("v1.14"),
        Some(AuthenticationSpec {
            ichor: ichor(),
            external: vec![],
        }),
    );
    assert_eq!(render_err(&c, None), RenderError::WaitingForIchorTrust);
    let half = IchorTrust {
        ca_pem: String::new(),
        ..trust()
    };
    assert_eq!(render_err(&c, Some(&half)), RenderError::WaitingForIchorTrust);
    assert!(
        render_err(&c, None)
            .to_string()
            .contains("waiting for ichor-oidc-trust")
    );
}

#[test]
fn refuses_an_enabled_ichor_issuer_without_a_url() {
    let auth = AuthenticationSpec {
        ichor: Some(IchorIssuerSpec {
            enabled: true,
            url: String::new(),
        }),
        external: vec![],
    };
    let e = render_err(&cluster(Some("v1.14"), Some(auth)), Some(&trust()));
    assert_eq!(e, RenderError::IchorUrlMissing);
    assert!(
        e.to_string()
            .starts_with("spec.authentication.ichor.url: required")
    );
}

#[test]
fn refuses_more_than_three_external_providers() {
    let ext = (0..4)
        .map(|i| external(&format!("https://idp{i}.example.org"), &["k"]))
        .collect();
    let e = render_err(
        &cluster(
            Some("v1.14"),
            Some(AuthenticationSpec {
                ichor: None,
                external: ext,
            }),
        ),
        None,
    );
    assert_eq!(
        e.to_string(),
        "spec.authentication.external: 4 providers listed, at most 3 are allowed"
    );
}

#[test]
fn an_invalid_configuration_never_leaves_the_renderer() {
    let auth = AuthenticationSpec {
        ichor: None,
        external: vec![
            external(ENDPOINT, &["k"]),
            external("http://idp.example.org?x", &["a", "a", ""]),
            external("http://idp.example.org?x", &[]),
        ],
    };
    let err = render_err(&cluster(Some("v1.14"), Some(auth)), None);
    let RenderError::Invalid(errors) = &err else {
        panic!("{err}")
    };
    let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    insta::assert_yaml_snapshot!("invalid_input_errors", texts);
    assert!(
        err.to_string()
            .starts_with("invalid authentication configuration: [jwt[0].issuer.url: Invalid value")
    );
}

#[test]
fn renders_the_ichor_issuer_alone() {
    let r = rendered(AuthenticationSpec {
        ichor: ichor(),
        external: vec![],
    });
    insta::assert_yaml_snapshot!("ichor_only", r.document);
}

#[test]
fn renders_ichor_and_three_external_providers_in_order() {
    let mut a = external("https://idp.example.org/realms/main", &["kubernetes"]);
    a.certificate_authority = Some(TEST_CA.into());
    let mut b = external("https://login.example.net", &["k8s"]);
    b.username_claim = Some("preferred_username".into());
    b.groups_claim = Some("roles".into());
    b.username_prefix = Some("corp:".into());
    b.groups_prefix = Some("corp-groups:".into());
    let c = external("https://accounts.example.com", &["cluster-a"]);
    let r = rendered(AuthenticationSpec {
        ichor: ichor(),
        external: vec![a, b, c],
    });
    let urls: Vec<_> = r
        .configuration
        .jwt
        .iter()
        .map(|j| j.issuer.url.as_str())
        .collect();
    assert_eq!(
        urls,
        [
            "https://ichor.example.com",
            "https://idp.example.org/realms/main",
            "https://login.example.net",
            "https://accounts.example.com"
        ]
    );
    insta::assert_yaml_snapshot!("ichor_and_three_externals", r.document);
    insta::assert_snapshot!("ichor_and_three_externals_serde_yaml", r.yaml);
}

#[test]
fn renders_match_any_for_an_external_with_several_audiences() {
    let r = rendered(AuthenticationSpec {
        ichor: None,
        external: vec![external(
            "https://idp.example.org",
            &["kubernetes", "ichor-ui", "cli"],
        )],
    });
    assert_eq!(r.configuration.jwt[0].issuer.audience_match_policy, "MatchAny");
    insta::assert_yaml_snapshot!("external_several_audiences", r.document);
}

#[test]
fn the_rendered_yaml_quotes_bang_expressions_and_colon_prefixes_and_round_trips() {
    let r = rendered(AuthenticationSpec {
        ichor: ichor(),
        external: vec![external("https://idp.example.org", &["k"])],
    });
    assert!(
        r.yaml
            .contains("expression: '!user.username.startsWith(''system:'')'"),
        "{}",
        r.yaml
    );
    assert!(r.yaml.contains("prefix: 'ichor:'"), "{}", r.yaml);
    let back: KubeAuthenticationConfig = serde_yaml::from_str(&r.yaml).unwrap();
    assert_eq!(back, r.document);
    // The embedded configuration parses strictly as an AuthenticationConfiguration file too.
    let inner = serde_yaml::to_string(&r.configuration).unwrap();
    assert_eq!(parse(inner.as_bytes(), "inner.yaml").unwrap(), r.configuration);
}

#[test]
fn the_hash_is_the_sha256_of_the_canonical_json_and_follows_content() {
    let a = rendered(AuthenticationSpec {
        ichor: ichor(),
        external: vec![],
    });
    let b = rendered(AuthenticationSpec {
        ichor: ichor(),
        external: vec![],
    });
    assert_eq!(a.sha256, b.sha256);
    assert_eq!(a.sha256.len(), 64);
    assert_eq!(a.sha256, a.document.sha256_hex().unwrap());
    let c = rendered(AuthenticationSpec {
        ichor: ichor(),
        external: vec![external("https://i.example.org", &["k"])],
    });
    assert_ne!(a.sha256, c.sha256);
}

#[test]
fn a_cluster_without_authentication_gets_talos_default_content() {
    let r = render(&cluster(Some("v1.14"), None), None, &off()).unwrap();
    assert!(r.configuration.jwt.is_empty());
    assert_eq!(r.configuration.anonymous, Some(build::default_anonymous()));
}

fn second_factor(default: SecondFactorLevel, roles: &[(&str, SecondFactorLevel)]) -> SecondFactorPolicy {
    let roles = roles.iter().map(|(r, l)| ((*r).to_owned(), *l)).collect();
    SecondFactorPolicy::new(default, roles).unwrap()
}

fn with_policy(auth: AuthenticationSpec, policy: &SecondFactorPolicy) -> Rendered {
    match render(&cluster(Some("v1.14"), Some(auth)), Some(&trust()), policy) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn required_roles_put_second_factor_rules_on_ichors_entry_only() {
    use SecondFactorLevel::{Off, Optional, Required};
    let policy = second_factor(
        Optional,
        &[("viewer", Off), ("operator", Required), ("admin", Required)],
    );
    let r = with_policy(
        AuthenticationSpec {
            ichor: ichor(),
            external: vec![external("https://idp.example.org", &["kubernetes"])],
        },
        &policy,
    );
    let ichor_rules: Vec<_> = r.configuration.jwt[0]
        .claim_validation_rules
        .iter()
        .map(|c| c.message.as_str())
        .collect();
    assert_eq!(
        ichor_rules,
        [
            "ichor:admin needs a second factor",
            "ichor:operator needs a second factor"
        ]
    );
    assert!(r.configuration.jwt[1].claim_validation_rules.is_empty());
    let options = ValidationOptions {
        disallowed_issuers: vec![ENDPOINT.into()],
    };
    assert!(validate(&r.configuration, &options).is_empty());
    assert!(r.yaml.contains("claimValidationRules:"), "{}", r.yaml);
    let back: KubeAuthenticationConfig = serde_yaml::from_str(&r.yaml).unwrap();
    assert_eq!(back, r.document);
    insta::assert_yaml_snapshot!("ichor_second_factor_per_role", r.document);

    let everyone = with_policy(
        AuthenticationSpec {
            ichor: ichor(),
            external: vec![],
        },
        &second_factor(Required, &[("admin", Required)]),
    );
    insta::assert_yaml_snapshot!("ichor_second_factor_everyone", everyone.document);
    assert_ne!(everyone.sha256, r.sha256);
}

#[test]
fn a_policy_that_requires_nothing_renders_byte_for_byte_what_no_policy_does() {
    use SecondFactorLevel::{Off, Optional};
    let spec = || AuthenticationSpec {
        ichor: ichor(),
        external: vec![external("https://idp.example.org", &["kubernetes"])],
    };
    let none = rendered(spec());
    assert!(!none.yaml.contains("claimValidationRules"), "{}", none.yaml);
    for policy in [
        off(),
        second_factor(Optional, &[]),
        second_factor(Off, &[("admin", Optional), ("viewer", Off)]),
    ] {
        let r = with_policy(spec(), &policy);
        assert_eq!(
            (r.yaml.as_str(), r.sha256.as_str()),
            (none.yaml.as_str(), none.sha256.as_str())
        );
    }
    // Without Ichor's issuer there is no entry to carry a rule.
    let externals_only = AuthenticationSpec {
        ichor: None,
        external: vec![external("https://idp.example.org", &["kubernetes"])],
    };
    let plain = render(
        &cluster(Some("v1.14"), Some(externals_only.clone())),
        None,
        &off(),
    )
    .unwrap();
    let strict = render(
        &cluster(Some("v1.14"), Some(externals_only)),
        None,
        &SecondFactorPolicy::required_of_everyone(),
    )
    .unwrap();
    assert_eq!(plain.yaml, strict.yaml);
}

const PREFIXES: &[&str] = &["oidc:", "corp:", "sso-", "idp/", "x"];
const AUDIENCES: &[&str] = &["kubernetes", "ichor-ui", "cli", "cluster-a", "k8s", "api"];

fn external_strategy(index: usize) -> impl Strategy<Value = ExternalIssuerSpec> {
    (
        "[a-z][a-z0-9]{0,8}",
        proptest::sample::subsequence(AUDIENCES, 1..=4).prop_shuffle(),
        proptest::option::of(proptest::sample::select(
            &["email", "sub", "preferred_username"][..],
        )),
        proptest::option::of(proptest::sample::select(&["groups", "roles"][..])),
        proptest::option::of(proptest::sample::select(PREFIXES)),
        proptest::option::of(proptest::sample::select(PREFIXES)),
        any::<bool>(),
    )
        .prop_map(move |(realm, auds, uc, gc, up, gp, ca)| ExternalIssuerSpec {
            issuer_url: format!("https://idp{index}.example.com/realms/{realm}"),
            audiences: auds.iter().map(|a| (*a).to_string()).collect(),
            username_claim: uc.map(Into::into),
            groups_claim: gc.map(Into::into),
            username_prefix: up.map(Into::into),
            groups_prefix: gp.map(Into::into),
            certificate_authority: ca.then(|| TEST_CA.to_string()),
        })
}

fn spec_strategy() -> impl Strategy<Value = AuthenticationSpec> {
    let ichor = proptest::option::of((any::<bool>(), "[a-z]{1,10}")).prop_map(|o| {
        o.map(|(enabled, host)| IchorIssuerSpec {
            enabled,
            url: format!("https://{host}.example.org"),
        })
    });
    let externals = (0usize..=3).prop_flat_map(|n| (0..n).map(external_strategy).collect::<Vec<_>>());
    (ichor, externals).prop_map(|(ichor, external)| AuthenticationSpec { ichor, external })
}

proptest! {
    #[test]
    fn every_valid_spec_renders_and_its_output_validates(auth in spec_strategy()) {
        let c = cluster(Some("v1.14"), Some(auth.clone()));
        let r = render(&c, Some(&trust()), &off()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let options = ValidationOptions { disallowed_issuers: vec![ENDPOINT.into()] };
        prop_assert!(validate(&r.configuration, &options).is_empty());
        let expected = usize::from(auth.ichor.as_ref().is_some_and(|i| i.enabled)) + auth.external.len();
        prop_assert_eq!(r.configuration.jwt.len(), expected);
        // What is applied parses back strictly to the same configuration.
        let inner = serde_yaml::to_string(&r.configuration).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parse(inner.as_bytes(), "p").map_err(|e| TestCaseError::fail(e.to_string()))?, r.configuration);
    }
}
