//! One accepted and one refused case (at least) for every rule of the spec's section 6, with
//! the exact message the kube-apiserver prints.

use super::*;
use crate::authn::model::{
    AnonymousAuthCondition, AnonymousAuthConfig, ClaimOrExpression, ExtraMapping, JwtAuthenticator,
};

type Config = AuthenticationConfiguration;

const TEST_CA: &str = include_str!("testdata/test-ca.pem");

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
fn issuer_url_rules() {
    check("V-I1", url(""), &["jwt[0].issuer.url: Required value"]);
    check("V-I2", url("https://issuer.example.com:8443/realms/x"), &[]);
    check(
        "V-I2",
        url("https://issuer-url:invalid-port"),
        &[
            r#"jwt[0].issuer.url: Invalid value: "https://issuer-url:invalid-port": parse "https://issuer-url:invalid-port": invalid port ":invalid-port" after host"#,
        ],
    );
    check(
        "V-I2",
        url("https://exa mple.com"),
        &[
            r#"jwt[0].issuer.url: Invalid value: "https://exa mple.com": parse "https://exa mple.com": invalid character " " in host name"#,
        ],
    );
    check(
        "V-I2",
        url("://issuer"),
        &[r#"jwt[0].issuer.url: Invalid value: "://issuer": parse "://issuer": missing protocol scheme"#],
    );
    check("V-I3", url("https://cp.example.net:6443/"), &[]);
    check(
        "V-I3",
        url("https://cp.example.net:6443"),
        &[
            r#"jwt[0].issuer.url: Invalid value: "https://cp.example.net:6443": URL must not overlap with disallowed issuers: [https://a.example.net https://cp.example.net:6443]"#,
        ],
    );
    check("V-I4", url("HTTPS://issuer.example.com"), &[]);
    check(
        "V-I4",
        url("http://issuer.example.com"),
        &[r#"jwt[0].issuer.url: Invalid value: "http://issuer.example.com": URL scheme must be https"#],
    );
    check(
        "V-I4",
        url("issuer.example.com"),
        &[r#"jwt[0].issuer.url: Invalid value: "issuer.example.com": URL scheme must be https"#],
    );
    check("V-I4", url("https://"), &[]);
    check("V-I4", url("https:foo"), &[]);
    check("V-I5", url("https://x.example/@y"), &[]);
    check(
        "V-I5",
        url("https://user:pw@x.example"),
        &[
            r#"jwt[0].issuer.url: Invalid value: "https://user:pw@x.example": URL must not contain a username or password"#,
        ],
    );
    check(
        "V-I5",
        url("https://@x.example"),
        &[
            r#"jwt[0].issuer.url: Invalid value: "https://@x.example": URL must not contain a username or password"#,
        ],
    );
    check("V-I6", url("https://x.example?"), &[]);
    check(
        "V-I6",
        url("https://x.example?a=b"),
        &[r#"jwt[0].issuer.url: Invalid value: "https://x.example?a=b": URL must not contain a query"#],
    );
    check("V-I7", url("https://x.example#"), &[]);
    check(
        "V-I7",
        url("https://x.example#f"),
        &[r#"jwt[0].issuer.url: Invalid value: "https://x.example#f": URL must not contain a fragment"#],
    );
    check(
        "V-I4..I7",
        url("http://u@x?q#f"),
        &[
            r#"jwt[0].issuer.url: Invalid value: "http://u@x?q#f": URL scheme must be https"#,
            r#"jwt[0].issuer.url: Invalid value: "http://u@x?q#f": URL must not contain a username or password"#,
            r#"jwt[0].issuer.url: Invalid value: "http://u@x?q#f": URL must not contain a query"#,
            r#"jwt[0].issuer.url: Invalid value: "http://u@x?q#f": URL must not contain a fragment"#,
        ],
    );
}

#[test]
fn discovery_url_rules() {
    check(
        "V-D1",
        discovery("https://10.96.0.42:8444/.well-known/openid-configuration"),
        &[],
    );
    check(
        "V-D1",
        discovery("https://issuer.example.com//"),
        &[
            r#"jwt[0].issuer.discoveryURL: Invalid value: "https://issuer.example.com//": discoveryURL must be different from URL"#,
        ],
    );
    check(
        "V-D1",
        |c: &mut Config| {
            url("")(c);
            discovery("https://d.example")(c)
        },
        &["jwt[0].issuer.url: Required value"],
    );
    check(
        "V-D2",
        discovery("https://10.0.0.1:port/x"),
        &[
            r#"jwt[0].issuer.discoveryURL: Invalid value: "https://10.0.0.1:port/x": parse "https://10.0.0.1:port/x": invalid port ":port" after host"#,
        ],
    );
    check(
        "V-D3",
        discovery("http://10.96.0.42/x"),
        &[r#"jwt[0].issuer.discoveryURL: Invalid value: "http://10.96.0.42/x": URL scheme must be https"#],
    );
    check(
        "V-D4",
        discovery("https://u@10.96.0.42/x"),
        &[
            r#"jwt[0].issuer.discoveryURL: Invalid value: "https://u@10.96.0.42/x": URL must not contain a username or password"#,
        ],
    );
    check(
        "V-D5",
        discovery("https://10.96.0.42/x?y"),
        &[
            r#"jwt[0].issuer.discoveryURL: Invalid value: "https://10.96.0.42/x?y": URL must not contain a query"#,
        ],
    );
    check(
        "V-D6",
        discovery("https://10.96.0.42/x#y"),
        &[
            r#"jwt[0].issuer.discoveryURL: Invalid value: "https://10.96.0.42/x#y": URL must not contain a fragment"#,
        ],
    );
    check(
        "V-D (no disallowed check)",
        discovery("https://cp.example.net:6443"),
        &[],
    );
}

#[test]
fn audience_rules() {
    check(
        "V-A1",
        audiences(&[], ""),
        &["jwt[0].issuer.audiences: Required value: at least one jwt[0].issuer.audiences is required"],
    );
    check(
        "V-A1",
        audiences(&[], "MatchAll"),
        &["jwt[0].issuer.audiences: Required value: at least one jwt[0].issuer.audiences is required"],
    );
    check("V-A2", audiences(&["a", "b"], "MatchAny"), &[]);
    check(
        "V-A2",
        audiences(&["a", ""], "MatchAny"),
        &["jwt[0].issuer.audiences[1]: Required value"],
    );
    check(
        "V-A3",
        audiences(&["a", "a"], "MatchAny"),
        &[r#"jwt[0].issuer.audiences[1]: Duplicate value: "a""#],
    );
    check(
        "V-A2+A3",
        audiences(&["", ""], "MatchAny"),
        &[
            "jwt[0].issuer.audiences[0]: Required value",
            "jwt[0].issuer.audiences[1]: Required value",
            r#"jwt[0].issuer.audiences[1]: Duplicate value: """#,
        ],
    );
    check(
        "V-A4",
        audiences(&["a", "b"], ""),
        &[
            r#"jwt[0].issuer.audienceMatchPolicy: Invalid value: "": audienceMatchPolicy must be MatchAny for multiple audiences"#,
        ],
    );
    check(
        "V-A4",
        audiences(&["a", "b"], "<x>"),
        &[
            r#"jwt[0].issuer.audienceMatchPolicy: Invalid value: "\u003cx\u003e": audienceMatchPolicy must be MatchAny for multiple audiences"#,
        ],
    );
    check("V-A5", audiences(&["a"], "MatchAny"), &[]);
    check(
        "V-A5",
        audiences(&["a"], "MatchAll"),
        &[
            r#"jwt[0].issuer.audienceMatchPolicy: Invalid value: "MatchAll": audienceMatchPolicy must be empty or MatchAny for single audience"#,
        ],
    );
}

#[test]
fn certificate_authority_and_egress_rules() {
    let ca = |pem: String| move |c: &mut Config| issuer(c).certificate_authority = pem.clone();
    check("V-C1", ca(TEST_CA.to_string()), &[]);
    check("V-C1", ca(format!("# a comment\n{TEST_CA}")), &[]);
    const NO_CERT: &str = r#"jwt[0].issuer.certificateAuthority: Invalid value: "<omitted>": data does not contain any valid RSA or ECDSA certificates"#;
    check("V-C1", ca("not a pem".into()), &[NO_CERT]);
    let key = pem::encode(&pem::Pem::new("PRIVATE KEY", vec![1, 2, 3]));
    check("V-C1", ca(key), &[NO_CERT]);

    let mut c = base();
    issuer(&mut c).certificate_authority =
        pem::encode(&pem::Pem::new("CERTIFICATE", vec![0x30, 0x03, 1, 2, 3]));
    assert_eq!(
        texts(&c),
        [r#"jwt[0].issuer.certificateAuthority: Invalid value: "<omitted>": x509: malformed certificate"#],
        "V-C2 with Go's text"
    );

    let egress = |v: &'static str| move |c: &mut Config| issuer(c).egress_selector_type = v.into();
    check("V-E2", egress("controlplane"), &[]);
    check("V-E2", egress("cluster"), &[]);
    check(
        "V-E2",
        egress("Cluster"),
        &[
            r#"jwt[0].issuer.egressSelectorType: Invalid value: "Cluster": egress selector must be either controlplane or cluster"#,
        ],
    );
}

#[test]
fn claim_validation_rules() {
    let p = "jwt[0].claimValidationRules";
    check("V-R1", claim_rules(&[("hd", "example.com", "", "")]), &[]);
    check(
        "V-R1",
        claim_rules(&[("hd", "", "claims.hd == 'x'", "m")]),
        &[&format!(
            r#"{p}[0]: Invalid value: "hd": claim and expression can't both be set"#
        )],
    );
    check(
        "V-R2",
        claim_rules(&[("", "v", "", "")]),
        &[&format!(
            "{p}[0]: Required value: claim or expression is required"
        )],
    );
    check(
        "V-R3",
        claim_rules(&[("hd", "", "", "m")]),
        &[&format!(
            r#"{p}[0].message: Invalid value: "m": may not be specified when claim is set"#
        )],
    );
    check(
        "V-R4",
        claim_rules(&[("hd", "a", "", ""), ("other", "", "", "")]),
        &[],
    );
    check(
        "V-R4",
        claim_rules(&[("hd", "a", "", ""), ("hd", "b", "", "")]),
        &[&format!(r#"{p}[1].claim: Duplicate value: "hd""#)],
    );
    check(
        "V-R5",
        claim_rules(&[("", "", "claims.hd == 'x'", "hd must be x")]),
        &[],
    );
    check(
        "V-R5",
        claim_rules(&[("", "v", "claims.hd == 'x'", "")]),
        &[&format!(
            r#"{p}[0].requiredValue: Invalid value: "v": may not be specified when expression is set"#
        )],
    );
    check(
        "V-R6",
        claim_rules(&[("", "", "claims.a == 'x'", ""), ("", "", "claims.a == 'x'", "")]),
        &[&format!(
            r#"{p}[1].expression: Duplicate value: "claims.a == 'x'""#
        )],
    );
    check(
        "V-R7",
        claim_rules(&[("", "", "sets.equivalent(claims.aud, ['a'])", "")]),
        &[],
    );
    check(
        "V-R7",
        claim_rules(&[("", "", "user.username == 'x'", "")]),
        &[&format!(
            "{p}[0].expression: Invalid value: \"user.username == 'x'\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'user' (in container '')\n | user.username == 'x'\n | ^"
        )],
    );
    check(
        "V-R8",
        claim_rules(&[("", "", "'yes'", "")]),
        &[&format!(
            r#"{p}[0].expression: Invalid value: "'yes'": must evaluate to bool"#
        )],
    );
}

#[test]
fn claim_mapping_rules() {
    let p = "jwt[0].claimMappings";
    check("V-M1", username("", None, "claims.sub"), &[]);
    check(
        "V-M1",
        username("sub", Some(""), "claims.sub"),
        &[&format!(
            r#"{p}.username: Invalid value: "": claim and expression can't both be set"#
        )],
    );
    check(
        "V-M2",
        username("", None, ""),
        &[&format!(
            "{p}.username: Required value: claim or expression is required"
        )],
    );
    check(
        "V-M3",
        username("", Some(""), "claims.sub"),
        &[&format!(
            r#"{p}.username.prefix: Invalid value: "": may not be specified when expression is set"#
        )],
    );
    check(
        "V-M4",
        username("", None, "foo.sub"),
        &[&format!(
            "{p}.username.expression: Invalid value: \"foo.sub\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo.sub\n | ^"
        )],
    );
    check("V-M5", username("email", Some(""), ""), &[]);
    check(
        "V-M5",
        username("sub", None, ""),
        &[&format!(
            "{p}.username.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing"
        )],
    );
    check("V-M6", groups("", Some("lonely:"), ""), &[]);
    check(
        "V-M6",
        groups("groups", Some(""), "claims.groups"),
        &[&format!(
            r#"{p}.groups: Invalid value: "": claim and expression can't both be set"#
        )],
    );
    check("V-M7", groups("", None, "claims.groups"), &[]);
    check(
        "V-M7",
        groups("", Some("g:"), "claims.groups"),
        &[&format!(
            r#"{p}.groups.prefix: Invalid value: "g:": may not be specified when expression is set"#
        )],
    );
    check("V-M8", groups("groups", Some("oidc:"), ""), &[]);
    check(
        "V-M8",
        groups("groups", None, ""),
        &[&format!(
            "{p}.groups.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing"
        )],
    );
    check(
        "V-M9",
        groups("", None, "user.groups"),
        &[&format!(
            "{p}.groups.expression: Invalid value: \"user.groups\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'user' (in container '')\n | user.groups\n | ^"
        )],
    );
    check("V-U1", uid("sub", ""), &[]);
    check(
        "V-U1",
        uid("sub", "claims.sub"),
        &[&format!(
            r#"{p}.uid: Invalid value: "": claim and expression can't both be set"#
        )],
    );
    check("V-U2", uid("", "claims.sub"), &[]);
    check(
        "V-U2",
        uid("", "user.uid"),
        &[&format!(
            "{p}.uid.expression: Invalid value: \"user.uid\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'user' (in container '')\n | user.uid\n | ^"
        )],
    );
}

#[test]
fn extra_mapping_rules() {
    let p = "jwt[0].claimMappings.extra";
    check("V-X1", extra(&[("example.org/foo", "claims.foo")]), &[]);
    check(
        "V-X1",
        extra(&[("", "claims.foo")]),
        &[&format!("{p}[0].key: Required value")],
    );
    check(
        "V-X2",
        extra(&[("foo", "claims.foo")]),
        &[&format!(
            r#"{p}[0].key: Invalid value: "foo": must be a domain-prefixed path (such as "acme.io/foo")"#
        )],
    );
    check(
        "V-X2",
        extra(&[("example.org/", "claims.foo")]),
        &[&format!(
            r#"{p}[0].key: Invalid value: "example.org/": must be a domain-prefixed path (such as "acme.io/foo")"#
        )],
    );
    check(
        "V-X3",
        extra(&[("-bad.org/foo", "claims.foo")]),
        &[&format!(
            r#"{p}[0].key: Invalid value: "-bad.org": {DOMAIN_DETAIL}"#
        )],
    );
    check("V-X4", extra(&[("example.org/a/b~c:d", "claims.foo")]), &[]);
    check(
        "V-X4",
        extra(&[("example.org/foo bar", "claims.foo")]),
        &[&format!(
            r#"{p}[0].key: Invalid value: "foo bar": Invalid path (regex used for validation is '[A-Za-z0-9/\-._~%!$&'()*+,;=:]+')"#
        )],
    );
    check(
        "V-X5",
        extra(&[("example.org/Foo", "claims.foo")]),
        &[&format!(
            r#"{p}[0].key: Invalid value: "example.org/Foo": must be lowercase"#
        )],
    );
    check(
        "V-X3+X5",
        extra(&[("Example.org/foo", "claims.foo")]),
        &[
            &format!(r#"{p}[0].key: Invalid value: "Example.org": {DOMAIN_DETAIL}"#),
            &format!(r#"{p}[0].key: Invalid value: "Example.org/foo": must be lowercase"#),
        ],
    );
    check("V-X6", extra(&[("ak8s.io/foo", "claims.foo")]), &[]);
    check(
        "V-X6",
        extra(&[("sub.kubernetes.io/foo", "claims.foo")]),
        &[&format!(
            r#"{p}[0].key: Invalid value: "sub.kubernetes.io/foo": k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use"#
        )],
    );
    check(
        "V-X7",
        extra(&[("example.org/a", "claims.a"), ("example.org/b", "claims.b")]),
        &[],
    );
    check(
        "V-X7",
        extra(&[("example.org/a", "claims.a"), ("example.org/a", "")]),
        &[&format!(r#"{p}[1].key: Duplicate value: "example.org/a""#)],
    );
    check(
        "V-X8",
        extra(&[("example.org/a", "")]),
        &[&format!("{p}[0].valueExpression: Required value")],
    );
    check(
        "V-X9",
        extra(&[("example.org/a", "dyn(claims.a).map(x, x + 'y')")]),
        &[],
    );
    // A claim's value is `any`, which cel-go does not range over.
    check(
        "V-X9",
        extra(&[("example.org/a", "claims.a.map(x, x + 'y')")]),
        &[&format!(
            "{p}[0].valueExpression: Invalid value: \"claims.a.map(x, x + 'y')\": compilation failed: ERROR: <input>:1:7: expression of type 'any' cannot be range of a comprehension (must be list, map, or dynamic)\n | claims.a.map(x, x + 'y')\n | ......^"
        )],
    );
    check(
        "V-X9",
        extra(&[("example.org/a", "user.extra")]),
        &[&format!(
            "{p}[0].valueExpression: Invalid value: \"user.extra\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'user' (in container '')\n | user.extra\n | ^"
        )],
    );
}

#[test]
fn email_verified_rule() {
    let refused =
        format!(r#"jwt[0].claimMappings.username.expression: Invalid value: "claims.email": {EMAIL_DETAIL}"#);
    check("V-M10", username("", None, "claims.email"), &[&refused]);
    check(
        "V-M10",
        username("", None, "claims.?email.orValue('') + ''"),
        &[&format!(
            r#"jwt[0].claimMappings.username.expression: Invalid value: "claims.?email.orValue('') + ''": {EMAIL_DETAIL}"#
        )],
    );
    check(
        "V-M10",
        |c: &mut Config| {
            username("", None, "claims.email")(c);
            claim_rules(&[("", "", "claims.?email_verified.orValue(true) == true", "")])(c);
        },
        &[],
    );
    check(
        "V-M10",
        |c: &mut Config| {
            username("", None, "claims.email")(c);
            extra(&[("example.org/v", "string(claims.email_verified)")])(c);
        },
        &[],
    );
    check(
        "V-M10",
        username("", None, "claims.email_verified ? claims.email : ''"),
        &[],
    );
    check("V-M10", username("", None, "claims.other.claims.email"), &[]);
    check("V-M10", username("email", Some(""), ""), &[]);
    // A username mapping with any error does not take part (upstream keeps only clean results).
    check(
        "V-M10",
        username("", Some("x:"), "claims.email"),
        &[
            r#"jwt[0].claimMappings.username.prefix: Invalid value: "x:": may not be specified when expression is set"#,
        ],
    );
    // An email_verified read inside an expression that fails to compile does not count.
    check(
        "V-M10",
        |c: &mut Config| {
            username("", None, "claims.email")(c);
            claim_rules(&[("", "", "claims.email_verified == user.x", "")])(c);
        },
        &[
            "jwt[0].claimValidationRules[0].expression: Invalid value: \"claims.email_verified == user.x\": compilation failed: ERROR: <input>:1:26: undeclared reference to 'user' (in container '')\n | claims.email_verified == user.x\n | .........................^",
            &refused,
        ],
    );
}

#[test]
fn user_validation_rules() {
    let p = "jwt[0].userValidationRules";
    check("V-V1", user_rules(&["!user.username.startsWith('system:')"]), &[]);
    check(
        "V-V1",
        user_rules(&[""]),
        &[&format!("{p}[0].expression: Required value")],
    );
    check(
        "V-V2",
        user_rules(&[
            "!user.username.startsWith('system:')",
            "!user.groups.exists(g, g.startsWith('system:'))",
        ]),
        &[],
    );
    check(
        "V-V2",
        user_rules(&["user.uid != ''", "user.uid != ''"]),
        &[&format!(
            r#"{p}[1].expression: Duplicate value: "user.uid != ''""#
        )],
    );
    check(
        "V-V3",
        user_rules(&["claims.sub != ''"]),
        &[&format!(
            "{p}[0].expression: Invalid value: \"claims.sub != ''\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'claims' (in container '')\n | claims.sub != ''\n | ^"
        )],
    );
    check("V-V4", user_rules(&["true"]), &[]);
    check(
        "V-V4",
        user_rules(&["'x'"]),
        &[&format!(
            r#"{p}[0].expression: Invalid value: "'x'": must evaluate to bool"#
        )],
    );
}

#[test]
fn anonymous_rules() {
    check(
        "V-N1",
        |c: &mut Config| c.anonymous = anonymous(true, &["/livez"]),
        &[],
    );
    check("V-N1", |c: &mut Config| c.anonymous = anonymous(false, &[]), &[]);
    check(
        "V-N1",
        |c: &mut Config| c.anonymous = anonymous(false, &["/livez", "/a<b"]),
        &[
            r#"anonymous.conditions: Invalid value: [{"Path":"/livez"},{"Path":"/a\u003cb"}]: enabled should be set to true when conditions are defined"#,
        ],
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

/// Type errors cel-go finds, with its texts (checked against the kube-apiserver's validator).
#[test]
fn cel_type_errors_as_the_kube_apiserver_reports_them() {
    let p = "jwt[0].userValidationRules[0].expression";
    check(
        "V-V4",
        user_rules(&["user.username"]),
        &[&format!(
            r#"{p}: Invalid value: "user.username": must evaluate to bool"#
        )],
    );
    check(
        "V-V3",
        user_rules(&["user.foo == 1"]),
        &[&format!(
            "{p}: Invalid value: \"user.foo == 1\": compilation failed: ERROR: <input>:1:5: undefined field 'foo'\n | user.foo == 1\n | ....^"
        )],
    );
    let r = "jwt[0].claimValidationRules[0].expression";
    check(
        "V-R8",
        claim_rules(&[("", "", "claims.sub", "")]),
        &[&format!(
            r#"{r}: Invalid value: "claims.sub": must evaluate to bool"#
        )],
    );
    check(
        "V-R7",
        claim_rules(&[("", "", "1 + 'a' == 2", "")]),
        &[&format!(
            "{r}: Invalid value: \"1 + 'a' == 2\": compilation failed: ERROR: <input>:1:3: found no matching overload for '_+_' applied to '(int, string)'\n | 1 + 'a' == 2\n | ..^"
        )],
    );
    check(
        "V-R7",
        claim_rules(&[("", "", "size(claims.groups) > 0", "")]),
        &[],
    );
}
