//! One accepted and one refused case (at least) for every rule of the spec's section 6, with
//! the exact message the kube-apiserver prints.

use super::*;
use crate::authn::model::{
    AnonymousAuthCondition, AnonymousAuthConfig, ClaimOrExpression, ExtraMapping, JwtAuthenticator,
};

mod cel_types;
mod claims;
mod issuer;
mod user_and_anonymous;

type Config = AuthenticationConfiguration;

const TEST_CA: &str = include_str!("../testdata/test-ca.pem");

fn authenticator(url: &str) -> JwtAuthenticator {
    JwtAuthenticator {
        issuer: Issuer {
            url: url.into(),
            audiences: vec!["aud".into()],
            ..Default::default()
        },
        claim_mappings: ClaimMappings {
            username: PrefixedClaimOrExpression {
                claim: "sub".into(),
                prefix: Some(String::new()),
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    }
}

fn base() -> Config {
    Config {
        jwt: vec![authenticator("https://issuer.example.com")],
        ..Default::default()
    }
}

fn options() -> ValidationOptions {
    ValidationOptions {
        disallowed_issuers: vec![
            "https://cp.example.net:6443".into(),
            "https://a.example.net".into(),
        ],
    }
}

fn texts(c: &Config) -> Vec<String> {
    validate(c, &options()).iter().map(ToString::to_string).collect()
}

fn issuer(c: &mut Config) -> &mut Issuer {
    &mut c.jwt[0].issuer
}
fn mappings(c: &mut Config) -> &mut ClaimMappings {
    &mut c.jwt[0].claim_mappings
}
fn url(u: &str) -> impl Fn(&mut Config) + '_ {
    move |c| issuer(c).url = u.into()
}
fn discovery(u: &str) -> impl Fn(&mut Config) + '_ {
    move |c| issuer(c).discovery_url = Some(u.into())
}
fn audiences<'a>(auds: &'a [&'a str], policy: &'a str) -> impl Fn(&mut Config) + 'a {
    move |c| {
        issuer(c).audiences = auds.iter().map(|a| (*a).to_string()).collect();
        issuer(c).audience_match_policy = policy.into();
    }
}
fn claim_rules<'a>(rules: &'a [(&'a str, &'a str, &'a str, &'a str)]) -> impl Fn(&mut Config) + 'a {
    move |c| {
        c.jwt[0].claim_validation_rules = rules
            .iter()
            .map(
                |(claim, required_value, expression, message)| ClaimValidationRule {
                    claim: (*claim).into(),
                    required_value: (*required_value).into(),
                    expression: (*expression).into(),
                    message: (*message).into(),
                },
            )
            .collect();
    }
}
fn prefixed(claim: &str, prefix: Option<&str>, expression: &str) -> PrefixedClaimOrExpression {
    PrefixedClaimOrExpression {
        claim: claim.into(),
        prefix: prefix.map(Into::into),
        expression: expression.into(),
    }
}
fn username<'a>(claim: &'a str, prefix: Option<&'a str>, expr: &'a str) -> impl Fn(&mut Config) + 'a {
    move |c| mappings(c).username = prefixed(claim, prefix, expr)
}
fn groups<'a>(claim: &'a str, prefix: Option<&'a str>, expr: &'a str) -> impl Fn(&mut Config) + 'a {
    move |c| mappings(c).groups = prefixed(claim, prefix, expr)
}
fn uid<'a>(claim: &'a str, expr: &'a str) -> impl Fn(&mut Config) + 'a {
    move |c| {
        mappings(c).uid = ClaimOrExpression {
            claim: claim.into(),
            expression: expr.into(),
        }
    }
}
fn extra<'a>(entries: &'a [(&'a str, &'a str)]) -> impl Fn(&mut Config) + 'a {
    move |c| {
        mappings(c).extra = entries
            .iter()
            .map(|(k, v)| ExtraMapping {
                key: (*k).into(),
                value_expression: (*v).into(),
            })
            .collect();
    }
}
fn user_rules<'a>(exprs: &'a [&'a str]) -> impl Fn(&mut Config) + 'a {
    move |c| {
        c.jwt[0].user_validation_rules = exprs
            .iter()
            .map(|e| UserValidationRule {
                expression: (*e).into(),
                message: String::new(),
            })
            .collect();
    }
}
fn anonymous(enabled: bool, paths: &[&str]) -> Option<AnonymousAuthConfig> {
    Some(AnonymousAuthConfig {
        enabled,
        conditions: paths
            .iter()
            .map(|p| AnonymousAuthCondition { path: (*p).into() })
            .collect(),
    })
}

fn check(id: &str, mutate: impl Fn(&mut Config), want: &[&str]) {
    let mut c = base();
    mutate(&mut c);
    assert_eq!(texts(&c), want, "rule {id}");
}

const DOMAIN_DETAIL: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const EMAIL_DETAIL: &str = "claims.email_verified must be used in claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email is used in claimMappings.username.expression";

#[test]
fn the_base_configuration_is_valid() {
    assert!(texts(&base()).is_empty());
}

#[test]
fn top_level_rules() {
    let many = |n: usize| {
        move |c: &mut Config| {
            c.jwt = (0..n)
                .map(|i| authenticator(&format!("https://i{i}.example")))
                .collect()
        }
    };
    check("V-T1", many(64), &[]);
    check(
        "V-T1",
        many(65),
        &["jwt: Too many: 65: must have at most 64 items"],
    );
    check(
        "V-T1",
        |c: &mut Config| {
            many(65)(c);
            c.jwt[3].issuer.url = String::new();
        },
        &["jwt: Too many: 65: must have at most 64 items"],
    );

    let two = |a: &'static str, b: &'static str| {
        move |c: &mut Config| c.jwt = vec![authenticator(a), authenticator(b)]
    };
    check("V-T2", two("https://a.example", "https://b.example"), &[]);
    check(
        "V-T2",
        two("https://a.example", "https://a.example"),
        &[r#"jwt[1].issuer.url: Duplicate value: "https://a.example""#],
    );
    check("V-T2", two("https://a.example", "https://a.example/"), &[]);

    let disc = |a: &'static str, b: &'static str| {
        move |c: &mut Config| {
            c.jwt = vec![
                authenticator("https://a.example"),
                authenticator("https://b.example"),
            ];
            c.jwt[0].issuer.discovery_url = Some(a.into());
            c.jwt[1].issuer.discovery_url = Some(b.into());
        }
    };
    check("V-T3", disc("", ""), &[]);
    check("V-T3", disc("https://d.example/1", "https://d.example/2"), &[]);
    check(
        "V-T3",
        disc("https://d.example/x", "https://d.example/x"),
        &[r#"jwt[1].issuer.discoveryURL: Duplicate value: "https://d.example/x""#],
    );
}

#[test]
fn emits_errors_in_upstream_order_across_sections_and_authenticators() {
    let mut c = base();
    c.jwt.push(authenticator("https://issuer.example.com"));
    c.jwt.push(authenticator("https://issuer.example.com"));
    issuer(&mut c).url = "http://issuer.example.com".into();
    c.jwt[1].issuer.audiences = vec!["a".into(), "b".into()];
    user_rules(&[""])(&mut c);
    claim_rules(&[("", "", "", "")])(&mut c);
    username("", None, "")(&mut c);
    egress_and_ca(&mut c);
    c.jwt[1].issuer.discovery_url = Some("https://issuer.example.com".into());
    c.anonymous = anonymous(false, &["/x"]);
    assert_eq!(
        texts(&c),
        [
            r#"jwt[0].issuer.url: Invalid value: "http://issuer.example.com": URL scheme must be https"#,
            r#"jwt[0].issuer.certificateAuthority: Invalid value: "<omitted>": data does not contain any valid RSA or ECDSA certificates"#,
            r#"jwt[0].issuer.egressSelectorType: Invalid value: "x": egress selector must be either controlplane or cluster"#,
            "jwt[0].claimValidationRules[0]: Required value: claim or expression is required",
            "jwt[0].claimMappings.username: Required value: claim or expression is required",
            "jwt[0].userValidationRules[0].expression: Required value",
            r#"jwt[1].issuer.discoveryURL: Invalid value: "https://issuer.example.com": discoveryURL must be different from URL"#,
            r#"jwt[1].issuer.audienceMatchPolicy: Invalid value: "": audienceMatchPolicy must be MatchAny for multiple audiences"#,
            r#"jwt[2].issuer.url: Duplicate value: "https://issuer.example.com""#,
            r#"anonymous.conditions: Invalid value: [{"Path":"/x"}]: enabled should be set to true when conditions are defined"#,
        ]
    );
}

fn egress_and_ca(c: &mut Config) {
    issuer(c).certificate_authority = "junk".into();
    issuer(c).egress_selector_type = "x".into();
}

#[test]
fn aggregates_the_hardware_run_error_as_the_kube_apiserver_printed_it() {
    let mut c = base();
    audiences(&["a", "b"], "")(&mut c);
    assert_eq!(
        aggregate_text(&c),
        r#"jwt[0].issuer.audienceMatchPolicy: Invalid value: "": audienceMatchPolicy must be MatchAny for multiple audiences"#
    );
    url("http://x")(&mut c);
    assert_eq!(
        aggregate_text(&c),
        r#"[jwt[0].issuer.url: Invalid value: "http://x": URL scheme must be https, jwt[0].issuer.audienceMatchPolicy: Invalid value: "": audienceMatchPolicy must be MatchAny for multiple audiences]"#
    );
}

fn aggregate_text(c: &Config) -> String {
    crate::authn::field::aggregate(&validate(c, &options()))
}
