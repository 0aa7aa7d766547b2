//! The cases of the differential test: golden configurations, the renderer's own outputs,
//! hand-picked edge files and generated ones.
//!
//! The generator builds each file as a JSON value (so it can hold what our typed model cannot:
//! unknown fields, wrong types, `null`), from small pools biased to the edges of every rule of
//! `ValidateAuthenticationConfiguration`, and writes it as YAML or JSON. A fixed seed makes
//! every run draw the same cases.

use ichor_golden::{fixture, shapes};
use ichor_renderers::authn::{self, IchorTrust};
use ichor_renderers::cluster::installations_second_factor;
use ichor_server::manifest_files::load_dir;
use proptest::{
    collection::vec,
    prelude::*,
    sample::select,
    strategy::ValueTree,
    test_runner::{Config, RngAlgorithm, TestRng, TestRunner},
};
use serde_json::{Map, Value, json};

/// How many generated configurations the test runs.
pub const GENERATED: usize = 2400;

/// One file and what the caller knows besides it.
#[derive(Debug, Clone)]
pub struct Case {
    /// Where the case comes from (`golden:...`, `edge:...`, `gen:<n>`).
    pub id: String,
    /// The service-account issuers of the cluster.
    pub disallowed: Vec<String>,
    /// The file's text.
    pub text: String,
}

const TEST_CA: &str = include_str!("../../../../renderers/src/authn/testdata/test-ca.pem");
const ENDPOINT: &str = "https://cp.example.net:6443";

/// Every case, in a fixed order.
pub fn all() -> Vec<Case> {
    let mut out = golden();
    out.extend(rendered());
    out.extend(edges());
    out.extend(generated(GENERATED));
    out
}

/// Each `configuration` in the golden snapshots, as YAML and as JSON, with and without the
/// first issuer disallowed.
fn golden() -> Vec<Case> {
    let bodies = crate::snapshot_bodies::snapshot_bodies::<Value>(|name| {
        name.ends_with(".snap")
            && (name.starts_with("it__render__") || name.starts_with("ichor_renderers__authn__"))
    });
    let mut out = Vec::new();
    for (name, value) in bodies {
        for (k, config) in configurations(&value).into_iter().enumerate() {
            out.extend(variants(&format!("golden:{name}:{k}"), &config));
        }
    }
    assert!(out.len() >= 8, "the golden configurations were found");
    out
}

/// Every object under a `configuration` key that is an `AuthenticationConfiguration`.
fn configurations(v: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == "configuration" && x["kind"] == "AuthenticationConfiguration" {
                    out.push(x.clone());
                } else {
                    out.extend(configurations(x));
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| out.extend(configurations(x))),
        _ => {}
    }
    out
}

/// A configuration as YAML and as JSON, without and with its first issuer disallowed.
fn variants(id: &str, config: &Value) -> Vec<Case> {
    let mut disallowed = vec![vec![], vec![ENDPOINT.to_string()]];
    if let Some(url) = config["jwt"][0]["issuer"]["url"].as_str() {
        disallowed.push(vec![url.to_string(), ENDPOINT.to_string()]);
    }
    let mut out = Vec::new();
    for (d, list) in disallowed.into_iter().enumerate() {
        out.push(Case {
            id: format!("{id}:yaml:{d}"),
            disallowed: list.clone(),
            text: serde_yaml::to_string(config).unwrap(),
        });
        out.push(Case {
            id: format!("{id}:json:{d}"),
            disallowed: list,
            text: serde_json::to_string_pretty(config).unwrap(),
        });
    }
    out
}

/// The renderer's own output (`authn::build`, before its validation) for every fixture shape,
/// with the cluster's endpoint disallowed as `render` does.
fn rendered() -> Vec<Case> {
    let trust = IchorTrust {
        discovery_url: "https://10.96.0.42:8444/.well-known/openid-configuration".into(),
        ca_pem: TEST_CA.into(),
    };
    let mut out = Vec::new();
    for shape in shapes() {
        let Ok(manifests) = load_dir(&fixture(&shape)) else {
            continue;
        };
        for cluster in &manifests.clusters {
            let auth = cluster.spec.authentication.clone().unwrap_or_default();
            let second_factor = installations_second_factor(&manifests.installations);
            let config = authn::build(&auth, Some(&trust), &second_factor);
            let mut disallowed = vec![];
            if !cluster.spec.endpoint.is_empty() {
                disallowed.push(cluster.spec.endpoint.clone());
            }
            out.push(Case {
                id: format!("rendered:{shape}"),
                disallowed,
                text: serde_yaml::to_string(&config).unwrap(),
            });
        }
    }
    assert!(out.len() >= 5, "every fixture shape renders a configuration");
    out
}

const HEAD: &str = "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\n";
const ONE_JWT: &str = "jwt:\n- issuer:\n    url: https://a.example.com\n    audiences: [k]\n  claimMappings:\n    username: {claim: sub, prefix: ''}\n";

/// Hand-picked files for the decoder: YAML 1.1 scalars, `null`s, duplicated keys, other
/// document shapes.
fn edges() -> Vec<Case> {
    let yaml = |body: &str| format!("{HEAD}{body}");
    let texts: Vec<(&str, String)> = vec![
        ("empty", String::new()),
        ("whitespace", "  \n".into()),
        ("comment-only", "# nothing\n".into()),
        ("null-document", "null\n".into()),
        ("list-document", "[]\n".into()),
        ("empty-object", "{}\n".into()),
        ("head-only", HEAD.into()),
        ("no-api-version", "kind: AuthenticationConfiguration\n".into()),
        ("no-kind", "apiVersion: apiserver.config.k8s.io/v1\n".into()),
        (
            "authorization-kind",
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\n".into(),
        ),
        ("jwt-null", yaml("jwt: null\n")),
        ("jwt-tilde", yaml("jwt: ~\n")),
        ("jwt-empty-value", yaml("jwt:\n")),
        ("jwt-object", yaml("jwt: {}\n")),
        ("jwt-string", yaml("jwt: abc\n")),
        ("anonymous-null", yaml("anonymous: null\n")),
        ("anonymous-empty", yaml("anonymous: {}\n")),
        ("anonymous-enabled-yes", yaml("anonymous: {enabled: yes}\n")),
        ("anonymous-enabled-on", yaml("anonymous: {enabled: on}\n")),
        ("anonymous-enabled-no", yaml("anonymous:\n  enabled: no\n  conditions: [{path: /x}]\n")),
        ("anonymous-enabled-quoted", yaml("anonymous: {enabled: 'true'}\n")),
        ("anonymous-enabled-int", yaml("anonymous: {enabled: 1}\n")),
        ("anonymous-enabled-True", yaml("anonymous: {enabled: True}\n")),
        ("anonymous-path-int", yaml("anonymous: {enabled: true, conditions: [{path: 1}]}\n")),
        ("anonymous-path-null", yaml("anonymous: {enabled: true, conditions: [{path: null}]}\n")),
        ("anonymous-condition-null", yaml("anonymous: {enabled: true, conditions: [null]}\n")),
        ("url-int", yaml(&ONE_JWT.replace("https://a.example.com", "123"))),
        ("url-float", yaml(&ONE_JWT.replace("https://a.example.com", "1.5"))),
        ("url-bool", yaml(&ONE_JWT.replace("https://a.example.com", "true"))),
        ("url-yes", yaml(&ONE_JWT.replace("https://a.example.com", "yes"))),
        ("url-off", yaml(&ONE_JWT.replace("https://a.example.com", "off"))),
        ("url-quoted-int", yaml(&ONE_JWT.replace("https://a.example.com", "'123'"))),
        ("url-octal", yaml(&ONE_JWT.replace("https://a.example.com", "0755"))),
        ("url-hex", yaml(&ONE_JWT.replace("https://a.example.com", "0x1F"))),
        ("url-inf", yaml(&ONE_JWT.replace("https://a.example.com", ".inf"))),
        ("url-timestamp", yaml(&ONE_JWT.replace("https://a.example.com", "2001-12-14"))),
        ("url-null", yaml(&ONE_JWT.replace("https://a.example.com", "null"))),
        ("audience-int", yaml(&ONE_JWT.replace("[k]", "[1]"))),
        ("audience-yes", yaml(&ONE_JWT.replace("[k]", "[yes]"))),
        ("audience-null", yaml(&ONE_JWT.replace("[k]", "[null]"))),
        ("audiences-string", yaml(&ONE_JWT.replace("[k]", "k"))),
        ("prefix-null", yaml(&ONE_JWT.replace("prefix: ''", "prefix: null"))),
        ("prefix-tilde", yaml(&ONE_JWT.replace("prefix: ''", "prefix: ~"))),
        ("prefix-empty-value", yaml(&ONE_JWT.replace("prefix: ''", "prefix: "))),
        ("prefix-int", yaml(&ONE_JWT.replace("prefix: ''", "prefix: 1"))),
        ("prefix-no", yaml(&ONE_JWT.replace("prefix: ''", "prefix: no"))),
        ("unknown-top", yaml(&format!("{ONE_JWT}foo: 1\n"))),
        ("unknown-issuer", yaml(&ONE_JWT.replace("audiences: [k]", "audiences: [k]\n    audience: x"))),
        ("wrong-case-key", yaml(&ONE_JWT.replace("url:", "URL:"))),
        ("discovery-url-lower", yaml(&ONE_JWT.replace("url:", "discoveryUrl:"))),
        ("duplicate-top", yaml(&format!("{ONE_JWT}kind: AuthenticationConfiguration\n"))),
        ("duplicate-nested", yaml(&ONE_JWT.replace("audiences: [k]", "audiences: [k]\n    audiences: [j]"))),
        ("anchor-alias", yaml("anonymous: &a {enabled: true}\njwt: []\n")),
        ("alias-reuse", yaml("jwt:\n- &j\n  issuer: {url: 'https://a', audiences: [k]}\n  claimMappings: {username: {claim: sub, prefix: ''}}\n- *j\n")),
        ("tab-indent", format!("{HEAD}jwt:\n\t- issuer: {{}}\n")),
        ("two-documents", format!("{HEAD}---\n{HEAD}")),
        ("bom", format!("\u{feff}{HEAD}")),
        ("json", r#"{"apiVersion":"apiserver.config.k8s.io/v1","kind":"AuthenticationConfiguration","jwt":[]}"#.into()),
        ("json-duplicate", r#"{"apiVersion":"apiserver.config.k8s.io/v1","kind":"AuthenticationConfiguration","jwt":[],"jwt":[]}"#.into()),
        ("json-trailing", r#"{"apiVersion":"apiserver.config.k8s.io/v1","kind":"AuthenticationConfiguration"} x"#.into()),
        ("json-url-number", r#"{"apiVersion":"apiserver.config.k8s.io/v1","kind":"AuthenticationConfiguration","jwt":[{"issuer":{"url":1}}]}"#.into()),
        ("json-enabled-string", r#"{"apiVersion":"apiserver.config.k8s.io/v1","kind":"AuthenticationConfiguration","anonymous":{"enabled":"true"}}"#.into()),
        ("json-null-fields", r#"{"apiVersion":"apiserver.config.k8s.io/v1","kind":"AuthenticationConfiguration","jwt":[{"issuer":null,"claimMappings":null,"claimValidationRules":null}],"anonymous":null}"#.into()),
        ("json-api-version-null", r#"{"apiVersion":null,"kind":"AuthenticationConfiguration"}"#.into()),
        ("flow-json-in-yaml", format!("{HEAD}jwt: [{{\"issuer\": {{\"url\": \"https://x\"}}}}]\n")),
        ("indented-json", r#"  {"apiVersion":"apiserver.config.k8s.io/v1","kind":"AuthenticationConfiguration"}"#.into()),
    ];
    texts
        .into_iter()
        .map(|(id, text)| Case {
            id: format!("edge:{id}"),
            disallowed: vec![],
            text,
        })
        .collect()
}

const URLS: &[&str] = &[
    "https://issuer.example.com",
    "https://issuer.example.com",
    "https://issuer.example.com/",
    "https://issuer.example.com/realms/main",
    "https://issuer.example.com/realms/main/",
    "https://other.example.org",
    "https://other.example.org",
    ENDPOINT,
    "http://issuer.example.com",
    "HTTPS://issuer.example.com",
    "https://user@issuer.example.com",
    "https://user:pass@issuer.example.com",
    "https://@issuer.example.com",
    "https://issuer.example.com?x=1",
    "https://issuer.example.com?",
    "https://issuer.example.com#frag",
    "https://issuer.example.com#",
    "http://u@issuer.example.com?q#f",
    "issuer.example.com",
    "https://",
    "https:foo",
    "https://issuer-url:invalid-port",
    "https://[::1]:8443",
    "https://[::1",
    "https://exa mple.com",
    "https://example.com/%zz",
    "https://ex%41mple.com",
    "https://example.com:99999",
    "//example.com",
    ":foo",
    "ftp://example.com",
    "https://exämple.com/ä",
    "https://example.com/a b",
    "https://10.0.0.1:6443/",
    "",
];

const DISCOVERY_SUFFIXES: &[&str] = &["", "/", "//", "/.well-known/openid-configuration"];

const AUDIENCES: &[&str] = &["kubernetes", "kubernetes", "ichor-ui", "", "a"];
const POLICIES: &[&str] = &["", "MatchAny", "MatchAny", "matchany", "MatchAll"];
const EGRESS: &[&str] = &["", "controlplane", "cluster", "Cluster", "etcd"];
const CLAIMS: &[&str] = &["hd", "sub", "hd", "email"];
const PREFIXES: &[&str] = &["", "oidc:", "p:"];
const EXTRA_KEYS: &[&str] = &[
    "example.org/foo",
    "example.org/foo",
    "example.org/Foo",
    "Example.org/foo",
    "foo",
    "/foo",
    "example.org/",
    "",
    "k8s.io/x",
    "sub.k8s.io/x",
    "ak8s.io/x",
    "kubernetes.io/x",
    "a.kubernetes.io/x",
    "exa_mple.org/x",
    "example.org/a b",
    "-bad.org/x",
    "example.org/a/b",
    "example..org/x",
    "example.org/ä",
];

/// Boolean (and some not) expressions over `claims`, valid and not.
const CLAIM_RULES: &[&str] = &[
    "claims.hd == 'example.com'",
    "claims.?email_verified.orValue(true) == true",
    "claims.email_verified == true",
    "has(claims.sub)",
    "claims.aud.exists(a, a == 'x')",
    "size(claims.groups) > 0",
    "claims.sub.startsWith('a')",
    "true",
    "claims.sub",
    "'yes'",
    "1 + 'a' == 2",
    "user.username == 'x'",
    "foo.bar",
    "claims.x ==",
    "claims.x == 'a",
    "(claims.x",
];

/// Mapping expressions over `claims`, valid and not.
const MAPPINGS: &[&str] = &[
    "claims.sub",
    "claims.email",
    "claims.email + ':' + claims.sub",
    "'static'",
    "claims.?email.orValue('')",
    "[claims.email_verified, claims.email][1]",
    "has(claims.email_verified) ? claims.email : claims.sub",
    "claims.groups.map(g, 'x:' + g)",
    "dyn(claims.groups).map(g, 'x:' + g)",
    "claims['email']",
    "claims.email_",
    "user.username",
    "claims.sub +",
    "1 + 'a'",
    "claims.sub ?? 'x'",
];

/// Expressions over `user`, valid and not.
const USER_RULES: &[&str] = &[
    "!user.username.startsWith('system:')",
    "!user.groups.exists(g, g.startsWith('system:'))",
    "user.username != ''",
    "user.groups.all(g, g != 'x')",
    "'x' in user.groups",
    "size(user.uid) > 0",
    "user.username",
    "user.foo == 1",
    "claims.sub == 'x'",
    "user.username ==",
    "!user.username.startsWith('system:')",
];

fn s(pool: &'static [&'static str]) -> BoxedStrategy<Value> {
    select(pool).prop_map(|x| json!(x)).boxed()
}

/// Absent (`None`), the value, or (rarely) `null`.
fn opt(v: BoxedStrategy<Value>, absent: u32) -> BoxedStrategy<Option<Value>> {
    prop_oneof![
        absent => Just(None),
        6 => v.prop_map(Some),
        1 => Just(Some(Value::Null)),
    ]
    .boxed()
}

fn object(fields: Vec<(&'static str, BoxedStrategy<Option<Value>>)>) -> BoxedStrategy<Value> {
    fields
        .into_iter()
        .map(|(k, f)| f.prop_map(move |v| (k, v)))
        .collect::<Vec<_>>()
        .prop_map(|kvs| {
            Value::Object(
                kvs.into_iter()
                    .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
                    .collect::<Map<_, _>>(),
            )
        })
        .boxed()
}

fn list(item: BoxedStrategy<Value>, max: usize) -> BoxedStrategy<Value> {
    vec(item, 0..=max).prop_map(Value::Array).boxed()
}

fn certificate_authority() -> BoxedStrategy<Value> {
    let (head, tail) = TEST_CA.split_at(TEST_CA.len() / 2);
    let pems: Vec<String> = vec![
        TEST_CA.into(),
        TEST_CA.into(),
        format!("{TEST_CA}{TEST_CA}"),
        "not a pem".into(),
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".into(),
        TEST_CA.replace("CERTIFICATE", "PUBLIC KEY"),
        TEST_CA.replacen("-----\n", "-----\nProc-Type: 4,ENCRYPTED\n\n", 1),
        format!("{TEST_CA}garbage\n"),
        format!("garbage\n{TEST_CA}"),
        format!("{head}\n-----END CERTIFICATE-----\n"),
        tail.into(),
        String::new(),
    ];
    select(pems).prop_map(Value::String).boxed()
}

fn issuer() -> BoxedStrategy<Value> {
    (select(URLS), select(DISCOVERY_SUFFIXES), 0..4u8)
        .prop_flat_map(|(url, suffix, how)| {
            let discovery = match how {
                0 => s(URLS),
                1 => Just(json!(format!("{}{suffix}", url.trim_end_matches('/')))).boxed(),
                _ => Just(json!(format!("https://10.96.0.{how}:8444{suffix}"))).boxed(),
            };
            object(vec![
                ("url", opt(Just(json!(url)).boxed(), 1)),
                ("discoveryURL", opt(discovery, 6)),
                ("certificateAuthority", opt(certificate_authority(), 6)),
                ("audiences", opt(list(s(AUDIENCES), 3), 1)),
                ("audienceMatchPolicy", opt(s(POLICIES), 4)),
                ("egressSelectorType", opt(s(EGRESS), 8)),
            ])
        })
        .boxed()
}

fn prefixed(claims: &'static [&'static str]) -> BoxedStrategy<Value> {
    object(vec![
        ("claim", opt(s(claims), 3)),
        ("prefix", opt(s(PREFIXES), 3)),
        ("expression", opt(s(MAPPINGS), 5)),
    ])
}

fn authenticator() -> BoxedStrategy<Value> {
    let rule = object(vec![
        ("claim", opt(s(CLAIMS), 3)),
        ("requiredValue", opt(s(&["example.com", ""]), 4)),
        ("expression", opt(s(CLAIM_RULES), 3)),
        ("message", opt(s(&["", "must be"]), 5)),
    ]);
    let extra = object(vec![
        ("key", opt(s(EXTRA_KEYS), 1)),
        ("valueExpression", opt(s(MAPPINGS), 1)),
    ]);
    let mappings = object(vec![
        (
            "username",
            opt(prefixed(&["sub", "email", "preferred_username"]), 1),
        ),
        ("groups", opt(prefixed(&["groups", "roles"]), 3)),
        (
            "uid",
            opt(
                object(vec![
                    ("claim", opt(s(&["sub", "oid"]), 3)),
                    ("expression", opt(s(MAPPINGS), 4)),
                ]),
                4,
            ),
        ),
        ("extra", opt(list(extra, 3), 4)),
    ]);
    let user_rule = object(vec![
        ("expression", opt(s(USER_RULES), 1)),
        ("message", opt(s(&["", "no"]), 3)),
    ]);
    object(vec![
        ("issuer", opt(issuer(), 1)),
        ("claimValidationRules", opt(list(rule, 3), 4)),
        ("claimMappings", opt(mappings, 1)),
        ("userValidationRules", opt(list(user_rule, 3), 4)),
    ])
}

fn anonymous() -> BoxedStrategy<Value> {
    object(vec![
        ("enabled", opt(any::<bool>().prop_map(Value::Bool).boxed(), 1)),
        (
            "conditions",
            opt(
                list(object(vec![("path", opt(s(&["/livez", "", "/readyz"]), 1))]), 2),
                3,
            ),
        ),
    ])
}

/// A change that makes the file undecodable or odd: an unknown field, a key with the wrong
/// case, a wrong type, a duplicated key.
#[derive(Clone, Copy, Debug)]
enum Mutation {
    None,
    UnknownTopField,
    UnknownIssuerField,
    UpperCaseUrlKey,
    UrlNumber,
    AudiencesString,
    EnabledString,
    JwtObject,
    DuplicateKind,
}

fn mutate(v: &mut Value, m: Mutation) {
    let first_issuer = v.pointer_mut("/jwt/0/issuer").and_then(Value::as_object_mut);
    match (m, first_issuer) {
        (Mutation::UnknownIssuerField, Some(i)) => {
            i.insert("audience".into(), json!("x"));
        }
        (Mutation::UpperCaseUrlKey, Some(i)) => {
            let url = i.remove("url").unwrap_or(json!("https://x"));
            i.insert("URL".into(), url);
        }
        (Mutation::UrlNumber, Some(i)) => {
            i.insert("url".into(), json!(443));
        }
        (Mutation::AudiencesString, Some(i)) => {
            i.insert("audiences".into(), json!("kubernetes"));
        }
        _ => {}
    }
    let root = v.as_object_mut().expect("the root is an object");
    match m {
        Mutation::UnknownTopField => {
            root.insert("authorization".into(), json!({}));
        }
        Mutation::EnabledString => {
            root.insert("anonymous".into(), json!({"enabled": "true"}));
        }
        Mutation::JwtObject => {
            root.insert("jwt".into(), json!({}));
        }
        _ => {}
    }
}

fn configuration() -> BoxedStrategy<(Value, Mutation, bool)> {
    let jwt = prop_oneof![
        40 => list(authenticator(), 3),
        1 => authenticator().prop_map(|a| Value::Array(vec![a; 65])).boxed(),
    ];
    let config = object(vec![
        (
            "apiVersion",
            opt(
                prop_oneof![
                    6 => s(&[
                        "apiserver.config.k8s.io/v1beta1",
                        "apiserver.config.k8s.io/v1",
                        "apiserver.config.k8s.io/v1alpha1",
                    ]),
                    1 => s(&["apiserver.config.k8s.io/v2", "v1", "apiserver.k8s.io/v1beta1"]),
                ]
                .boxed(),
                0,
            ),
        ),
        (
            "kind",
            opt(
                prop_oneof![20 => s(&["AuthenticationConfiguration"]), 1 => s(&["Foo", "AuthorizationConfiguration"])]
                    .boxed(),
                0,
            ),
        ),
        ("jwt", opt(jwt.boxed(), 1)),
        ("anonymous", opt(anonymous(), 4)),
    ]);
    let mutation = prop_oneof![
        40 => Just(Mutation::None),
        1 => Just(Mutation::UnknownTopField),
        1 => Just(Mutation::UnknownIssuerField),
        1 => Just(Mutation::UpperCaseUrlKey),
        1 => Just(Mutation::UrlNumber),
        1 => Just(Mutation::AudiencesString),
        1 => Just(Mutation::EnabledString),
        1 => Just(Mutation::JwtObject),
        1 => Just(Mutation::DuplicateKind),
    ];
    (config, mutation, any::<bool>()).boxed()
}

fn text((mut v, m, as_json): (Value, Mutation, bool)) -> String {
    mutate(&mut v, m);
    let dup = matches!(m, Mutation::DuplicateKind);
    if as_json {
        let t = serde_json::to_string(&v).unwrap();
        match (dup, t.strip_suffix('}')) {
            (true, Some(body)) => format!("{body},\"kind\":\"AuthenticationConfiguration\"}}"),
            _ => t,
        }
    } else {
        let t = serde_yaml::to_string(&v).unwrap();
        if dup {
            format!("{t}kind: AuthenticationConfiguration\n")
        } else {
            t
        }
    }
}

/// `n` generated cases from a fixed seed.
fn generated(n: usize) -> Vec<Case> {
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    let config = configuration();
    let disallowed = vec(select(URLS).prop_map(str::to_string), 0..=2);
    (0..n)
        .map(|i| {
            let c = config.new_tree(&mut runner).expect("a configuration").current();
            let d = disallowed.new_tree(&mut runner).expect("a list").current();
            Case {
                id: format!("gen:{i}"),
                disallowed: d,
                text: text(c),
            }
        })
        .collect()
}
