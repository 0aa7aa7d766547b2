//! Tests of the strict parser: what the kube-apiserver refuses is refused with the same words,
//! YAML is typed as go-yaml v2 types it, and serialisation writes only what is set.

use super::*;

const MINIMAL: &str = "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\n";

fn err(text: &str) -> String {
    match parse(text.as_bytes(), "auth.yaml") {
        Ok(c) => panic!("accepted: {c:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn refuses_empty_input_like_the_kube_apiserver() {
    assert_eq!(err(""), "auth.yaml: empty config data");
    assert_eq!(err("  \n"), "auth.yaml: empty config data");
}

#[test]
fn refuses_a_file_over_one_mebibyte() {
    let big = format!("{MINIMAL}#{}\n", "x".repeat(MAX_CONFIG_BYTES));
    assert!(matches!(
        parse(big.as_bytes(), "f"),
        Err(ParseError::TooLarge { .. })
    ));
}

#[test]
fn refuses_the_wrong_api_version_or_kind() {
    assert_eq!(
        err("apiVersion: v1\nkind: AuthenticationConfiguration\n"),
        "auth.yaml: apiVersion \"v1\" is not a version of AuthenticationConfiguration: write apiVersion: apiserver.config.k8s.io/v1beta1"
    );
    assert_eq!(
        err("apiVersion: apiserver.config.k8s.io/v1\nkind: Foo\n"),
        "auth.yaml: kind \"Foo\" is not AuthenticationConfiguration: write kind: AuthenticationConfiguration"
    );
    assert!(err("jwt: []\n").contains("apiVersion \"\""));
}

#[test]
fn accepts_every_served_version() {
    for v in SERVED_API_VERSIONS {
        let text = format!("apiVersion: {v}\nkind: AuthenticationConfiguration\njwt: []\n");
        assert!(parse(text.as_bytes(), "f").is_ok(), "{v}");
    }
}

#[test]
fn refuses_an_unknown_field_and_names_its_path() {
    let e = err(&format!(
        "{MINIMAL}jwt:\n- issuer:\n    url: https://x\n    audience: [a]\n"
    ));
    assert!(
        e.starts_with("auth.yaml: jwt[0].issuer.audience: unknown field `audience`, expected one of"),
        "{e}"
    );
    assert!(e.ends_with("(line 6 column 5)"), "{e}");
}

#[test]
fn refuses_a_duplicated_field() {
    let e = err(&format!(
        "{MINIMAL}anonymous:\n  enabled: true\n  enabled: false\n"
    ));
    assert!(e.contains("duplicate") && e.contains("enabled"), "{e}");
    let j = r#"{"apiVersion":"apiserver.config.k8s.io/v1beta1","kind":"AuthenticationConfiguration","jwt":[],"jwt":[]}"#;
    let e = parse(j.as_bytes(), "a.json").unwrap_err().to_string();
    assert!(e.contains("duplicate field `jwt`"), "{e}");
}

#[test]
fn reports_line_and_column_of_malformed_yaml() {
    let e = err("apiVersion: [\n");
    assert!(e.starts_with("auth.yaml: malformed YAML at line"), "{e}");
    let e = parse(b"{\"apiVersion\": }", "a.json").unwrap_err().to_string();
    assert!(e.starts_with("a.json: malformed JSON at line 1 column"), "{e}");
}

#[test]
fn reports_a_wrong_type_with_its_path() {
    let e = err(&format!("{MINIMAL}jwt:\n- issuer:\n    audiences: abc\n"));
    assert!(
        e.starts_with("auth.yaml: jwt[0].issuer.audiences: invalid type"),
        "{e}"
    );
}

#[test]
fn keeps_an_empty_prefix_apart_from_an_absent_one() {
    let text = format!(
        "{MINIMAL}jwt:\n- claimMappings:\n    username: {{claim: sub, prefix: \"\"}}\n    groups: {{claim: g, prefix: null}}\n"
    );
    let c = parse(text.as_bytes(), "f").unwrap();
    assert_eq!(c.jwt[0].claim_mappings.username.prefix.as_deref(), Some(""));
    assert_eq!(c.jwt[0].claim_mappings.groups.prefix, None);
}

#[test]
fn reads_json_and_yaml_alike() {
    let j = r#"{"apiVersion":"apiserver.config.k8s.io/v1beta1","kind":"AuthenticationConfiguration",
        "anonymous":{"enabled":true,"conditions":[{"path":"/livez"}]}}"#;
    let y = format!("{MINIMAL}anonymous:\n  enabled: true\n  conditions:\n  - path: /livez\n");
    assert_eq!(
        parse(j.as_bytes(), "a").unwrap(),
        parse(y.as_bytes(), "b").unwrap()
    );
}

#[test]
fn serialises_only_what_is_set() {
    let c = AuthenticationConfiguration {
        anonymous: Some(AnonymousAuthConfig {
            enabled: false,
            conditions: vec![],
        }),
        ..Default::default()
    };
    let text = serde_yaml::to_string(&c).unwrap();
    assert_eq!(text, format!("{MINIMAL}jwt: []\nanonymous:\n  enabled: false\n"));
}

#[test]
fn types_yaml_scalars_as_the_kube_apiserver_does() {
    let anon = |v: &str| parse(format!("{MINIMAL}anonymous: {{enabled: {v}}}\n").as_bytes(), "f");
    for yes in ["yes", "on", "y", "True"] {
        assert!(anon(yes).unwrap().anonymous.unwrap().enabled, "{yes}");
    }
    assert!(!anon("off").unwrap().anonymous.unwrap().enabled);
    assert!(anon("'true'").is_err(), "a quoted string is no boolean");
    let url = |v: &str| {
        parse(
            format!("{MINIMAL}jwt:\n- issuer: {{url: {v}, audiences: [a]}}\n").as_bytes(),
            "f",
        )
    };
    for not_a_string in ["123", "1.5", "true", "yes", "0x1F"] {
        let e = url(not_a_string).unwrap_err().to_string();
        assert!(e.contains("jwt[0].issuer.url"), "{not_a_string}: {e}");
    }
    assert_eq!(url("'123'").unwrap().jwt[0].issuer.url, "123");
    assert_eq!(url("2001-12-14").unwrap().jwt[0].issuer.url, "2001-12-14");
}

#[test]
fn reads_null_list_items_as_zero_values() {
    let text =
        format!("{MINIMAL}jwt:\n- issuer: {{audiences: [null, a]}}\nanonymous: {{conditions: [null]}}\n");
    let c = parse(text.as_bytes(), "f").unwrap();
    assert_eq!(c.jwt[0].issuer.audiences, ["", "a"]);
    assert_eq!(
        c.anonymous.unwrap().conditions,
        [AnonymousAuthCondition::default()]
    );
}

#[test]
fn reads_the_first_of_several_yaml_documents() {
    let c = parse(format!("{MINIMAL}jwt: []\n---\nfoo: 1\n").as_bytes(), "f").unwrap();
    assert!(c.jwt.is_empty());
}

proptest::proptest! {
    #[test]
    fn never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
        let _ = parse(&bytes, "fuzz");
    }

    #[test]
    fn never_panics_on_arbitrary_text_after_a_valid_header(tail in "[ -~\n]{0,256}") {
        let _ = parse(format!("{MINIMAL}{tail}").as_bytes(), "fuzz");
    }
}
