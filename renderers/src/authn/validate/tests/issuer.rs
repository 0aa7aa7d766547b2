//! `jwt[].issuer`: the URL, the discovery URL, the audiences, the CA and the egress selector.

use super::*;

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
