//! Tests of the `keys.json` parser: every rule accepted and refused, redaction, queries.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::keys::*;
use super::testdata::*;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use jiff::Timestamp;
use proptest::prelude::*;
use serde_json::{Value, json};

const SECRET_B64: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn valid() -> Value {
    json!({
        "v": 1,
        "keys": [
            {"kid": "k-20270101-0000", "alg": "RS256", "pem": RSA2048_PKCS8,
             "createdAt": "2027-01-01T00:00:00Z", "activeFrom": "2027-01-01T00:00:00Z",
             "retireAfter": "2027-02-01T02:25:00Z"},
            {"kid": "k-20270131-0000", "alg": "RS256", "pem": RSA2048_PKCS8,
             "createdAt": "2027-01-31T00:00:00Z", "activeFrom": "2027-01-31T00:10:00Z"}
        ],
        "hmac": [
            {"kid": "h-20270101-0000", "secret": SECRET_B64,
             "createdAt": "2027-01-01T00:00:00Z", "activeFrom": "2027-01-01T00:00:00Z"}
        ]
    })
}

fn parse(v: &Value) -> Result<KeysDocument, KeysError> {
    KeysDocument::parse(v.to_string().as_bytes())
}

fn field_error(v: &Value) -> (String, FieldProblem) {
    match parse(v) {
        Err(KeysError::Field { path, problem }) => (path, problem),
        other => panic!("expected a field error, got {other:?}"),
    }
}

#[test]
fn accepts_a_valid_document_and_reads_every_field() {
    let doc = parse(&valid()).unwrap();
    assert_eq!(doc.keys().len(), 2);
    assert_eq!(doc.keys()[0].kid(), "k-20270101-0000");
    assert_eq!(doc.keys()[0].alg(), "RS256");
    assert_eq!(doc.keys()[0].pem().expose(), RSA2048_PKCS8);
    assert_eq!(doc.keys()[0].retire_after(), Some(ts("2027-02-01T02:25:00Z")));
    assert_eq!(doc.keys()[1].retire_after(), None);
    assert_eq!(
        doc.hmac()[0].secret().expose(),
        &core::array::from_fn::<u8, 32, _>(|i| i as u8)
    );
}

#[test]
fn accepts_empty_lists_and_a_null_retire_after() {
    assert_eq!(
        parse(&json!({"v": 1, "keys": [], "hmac": []})).unwrap(),
        KeysDocument::empty()
    );
    let mut v = valid();
    v["hmac"][0]["retireAfter"] = Value::Null;
    assert_eq!(parse(&v).unwrap().hmac()[0].retire_after(), None);
}

#[test]
fn serializes_to_a_document_the_parser_reads_back_identically() {
    let doc = parse(&valid()).unwrap();
    let json = doc.to_json();
    assert_eq!(KeysDocument::parse(json.as_bytes()).unwrap(), doc);
    assert_eq!(KeysDocument::parse(json.as_bytes()).unwrap().to_json(), json);
}

#[test]
fn refuses_version_2_with_a_message_naming_the_supported_version() {
    let mut v = valid();
    v["v"] = json!(2);
    v["future"] = json!(true);
    let err = parse(&v).unwrap_err();
    assert_eq!(
        err.to_string(),
        "v: keys.json version 2 is not supported; this build reads version 1 only (upgrade it)"
    );
}

#[test]
fn refuses_a_missing_or_non_integer_version() {
    let mut v = valid();
    v.as_object_mut().unwrap().remove("v");
    assert_eq!(field_error(&v), ("v".into(), FieldProblem::Missing));
    v["v"] = json!("1");
    assert!(matches!(field_error(&v), (p, FieldProblem::WrongType { .. }) if p == "v"));
}

#[test]
fn refuses_unknown_fields_at_every_level() {
    let mut v = valid();
    v["extra"] = json!(1);
    assert!(matches!(field_error(&v), (p, FieldProblem::Unknown { .. }) if p == "extra"));
    let mut v = valid();
    v["keys"][1]["use"] = json!("sig");
    assert!(matches!(field_error(&v), (p, FieldProblem::Unknown { .. }) if p == "keys[1].use"));
    let mut v = valid();
    v["hmac"][0]["alg"] = json!("HS256");
    assert!(matches!(field_error(&v), (p, FieldProblem::Unknown { .. }) if p == "hmac[0].alg"));
}

#[test]
fn refuses_a_field_that_appears_twice() {
    let text = valid().to_string().replacen("\"v\":1", "\"v\":1,\"v\":1", 1);
    assert_eq!(
        KeysDocument::parse(text.as_bytes()).unwrap_err(),
        KeysError::Field {
            path: "v".into(),
            problem: FieldProblem::Duplicate
        }
    );
}

#[test]
fn refuses_missing_required_fields() {
    for (list, field) in [
        ("keys", "kid"),
        ("keys", "alg"),
        ("keys", "pem"),
        ("keys", "createdAt"),
        ("keys", "activeFrom"),
        ("hmac", "secret"),
    ] {
        let mut v = valid();
        v[list][0].as_object_mut().unwrap().remove(field);
        assert_eq!(
            field_error(&v),
            (format!("{list}[0].{field}"), FieldProblem::Missing)
        );
    }
    let mut v = valid();
    v.as_object_mut().unwrap().remove("hmac");
    assert_eq!(field_error(&v), ("hmac".into(), FieldProblem::Missing));
}

#[test]
fn refuses_a_document_larger_than_one_mebibyte() {
    let text = format!(
        "{{\"v\":1,\"keys\":[],\"hmac\":[]}}{}",
        " ".repeat(MAX_DOCUMENT_BYTES)
    );
    assert!(matches!(
        KeysDocument::parse(text.as_bytes()),
        Err(KeysError::TooLarge { .. })
    ));
}

#[test]
fn refuses_non_json_with_a_position_and_no_content() {
    let err = KeysDocument::parse(b"{\"v\":1,\"keys\":[\"-----BEGIN PRIVATE KEY-----MIIsecret").unwrap_err();
    assert!(matches!(err, KeysError::Syntax { line: 1, .. }), "{err:?}");
    assert!(!err.to_string().contains("MII"));
}

#[test]
fn refuses_more_than_sixteen_keys_in_a_list() {
    let mut v = valid();
    let one = v["hmac"][0].clone();
    v["hmac"] = Value::Array(
        (0..17)
            .map(|i| {
                let mut k = one.clone();
                k["kid"] = json!(format!("h-{i}"));
                k
            })
            .collect(),
    );
    assert_eq!(
        field_error(&v),
        ("hmac".into(), FieldProblem::TooMany { count: 17, limit: 16 })
    );
    v["hmac"].as_array_mut().unwrap().pop();
    assert_eq!(parse(&v).unwrap().hmac().len(), 16);
}

#[test]
fn refuses_two_keys_with_the_same_kid() {
    let mut v = valid();
    v["keys"][1]["kid"] = json!("k-20270101-0000");
    assert_eq!(
        field_error(&v),
        (
            "keys[1].kid".into(),
            FieldProblem::DuplicateKid {
                kid: "k-20270101-0000".into(),
                first: "keys[0]".into()
            }
        )
    );
}

#[test]
fn refuses_malformed_kids() {
    for kid in ["", "k 1", "k/1", &"k".repeat(65), "ключ"] {
        let mut v = valid();
        v["keys"][0]["kid"] = json!(kid);
        assert_eq!(
            field_error(&v),
            ("keys[0].kid".into(), FieldProblem::BadKid),
            "{kid}"
        );
    }
    let mut v = valid();
    v["keys"][0]["kid"] = json!("A.b_c-9");
    assert!(parse(&v).is_ok());
}

#[test]
fn refuses_any_algorithm_but_rs256() {
    for alg in ["RS384", "ES256", "none", "rs256"] {
        let mut v = valid();
        v["keys"][0]["alg"] = json!(alg);
        assert_eq!(
            field_error(&v),
            ("keys[0].alg".into(), FieldProblem::UnsupportedAlg)
        );
    }
}

#[test]
fn refuses_a_pkcs1_key_saying_pkcs8_is_required() {
    let mut v = valid();
    v["keys"][1]["pem"] = json!(RSA2048_PKCS1);
    let err = parse(&v).unwrap_err();
    assert_eq!(
        err,
        KeysError::Field {
            path: "keys[1].pem".into(),
            problem: FieldProblem::Pkcs1
        }
    );
    assert!(err.to_string().starts_with("keys[1].pem: is a PKCS#1"));
    assert!(err.to_string().contains("PKCS#8"));
}

#[test]
fn refuses_pem_that_is_not_one_rsa_pkcs8_key_of_an_accepted_size() {
    let cases: Vec<(String, FieldProblem)> = vec![
        ("not pem at all".into(), FieldProblem::NotPem),
        (
            format!("{RSA2048_PKCS8}{RSA2048_PKCS8}"),
            FieldProblem::NotOnePemBlock,
        ),
        (format!("{RSA2048_PKCS8}trailing"), FieldProblem::NotOnePemBlock),
        (P256_PKCS8.into(), FieldProblem::NotRsa),
        (RSA1024_PKCS8.into(), FieldProblem::RsaSize { bits: 1024 }),
        (
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".into(),
            FieldProblem::WrongPemLabel {
                label: "CERTIFICATE".into(),
            },
        ),
        (
            "-----BEGIN PRIVATE KEY-----\nMAMCAQA=\n-----END PRIVATE KEY-----\n".into(),
            FieldProblem::BadPkcs8,
        ),
    ];
    for (pem, problem) in cases {
        let mut v = valid();
        v["keys"][0]["pem"] = json!(pem);
        assert_eq!(field_error(&v), ("keys[0].pem".into(), problem));
    }
}

#[test]
fn refuses_timestamps_that_are_not_rfc3339() {
    for bad in [
        "2027-01-01",
        "2027-01-01T00:00:00",
        "yesterday",
        "2027-01-01T00:00:00Z[UTC]",
    ] {
        let mut v = valid();
        v["keys"][0]["createdAt"] = json!(bad);
        assert_eq!(
            field_error(&v),
            ("keys[0].createdAt".into(), FieldProblem::BadTimestamp),
            "{bad}"
        );
    }
    let mut v = valid();
    v["keys"][0]["retireAfter"] = json!(5);
    assert!(matches!(field_error(&v), (p, FieldProblem::WrongType { .. }) if p == "keys[0].retireAfter"));
}

#[test]
fn accepts_an_rfc3339_offset_and_reads_the_same_instant() {
    let mut v = valid();
    v["hmac"][0]["createdAt"] = json!("2027-01-01T01:00:00+01:00");
    assert_eq!(
        parse(&v).unwrap().hmac()[0].created_at(),
        ts("2027-01-01T00:00:00Z")
    );
}

#[test]
fn refuses_active_from_before_created_at() {
    let mut v = valid();
    v["keys"][1]["activeFrom"] = json!("2027-01-30T23:59:59Z");
    assert_eq!(
        field_error(&v),
        ("keys[1].activeFrom".into(), FieldProblem::ActiveBeforeCreated)
    );
}

#[test]
fn refuses_retire_after_not_later_than_active_from() {
    let mut v = valid();
    v["keys"][0]["retireAfter"] = json!("2027-01-01T00:00:00Z");
    assert_eq!(
        field_error(&v),
        ("keys[0].retireAfter".into(), FieldProblem::RetireNotAfterActive)
    );
}

#[test]
fn refuses_hmac_secrets_that_are_not_32_bytes_of_standard_base64() {
    let mut v = valid();
    v["hmac"][0]["secret"] = json!(STANDARD.encode([7u8; 31]));
    assert_eq!(
        field_error(&v),
        ("hmac[0].secret".into(), FieldProblem::SecretLength { len: 31 })
    );
    v["hmac"][0]["secret"] = json!(STANDARD.encode([7u8; 33]));
    assert_eq!(
        field_error(&v),
        ("hmac[0].secret".into(), FieldProblem::SecretLength { len: 33 })
    );
    v["hmac"][0]["secret"] = json!("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"); // no padding
    assert_eq!(
        field_error(&v),
        ("hmac[0].secret".into(), FieldProblem::BadBase64)
    );
    v["hmac"][0]["secret"] = json!("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh-_"); // url-safe
    assert_eq!(
        field_error(&v),
        ("hmac[0].secret".into(), FieldProblem::BadBase64)
    );
}

#[test]
fn errors_never_contain_key_material() {
    // The PEM and the secret put where other types are expected, or in unknown fields.
    let mut docs = Vec::new();
    let mut v = valid();
    v["v"] = json!(RSA2048_PKCS8);
    docs.push(v);
    let mut v = valid();
    v["keys"] = json!(RSA2048_PKCS8);
    docs.push(v);
    let mut v = valid();
    v["hmac"][0]["createdAt"] = json!(SECRET_B64);
    docs.push(v);
    let mut v = valid();
    v["hmac"][0][SECRET_B64] = json!(SECRET_B64);
    docs.push(v);
    let mut v = valid();
    v["keys"][0]["kid"] = json!(RSA2048_PKCS8);
    docs.push(v);
    for v in docs {
        let msg = parse(&v).unwrap_err().to_string();
        assert!(!msg.contains("MII") && !msg.contains("AAECAwQF"), "{msg}");
    }
}

#[test]
fn debug_output_redacts_the_pem_and_the_secret() {
    let doc = parse(&valid()).unwrap();
    let debug = format!("{doc:?}");
    assert!(debug.contains("<redacted>"));
    assert!(debug.contains("k-20270101-0000"));
    assert!(!debug.contains("MII") && !debug.contains("BEGIN"), "{debug}");
    assert!(!debug.contains("[0, 1, 2"), "{debug}");
}

#[test]
fn constructors_apply_the_same_rules_as_the_parser() {
    let pem = PrivateKeyPem::new(RSA2048_PKCS8.into()).unwrap();
    assert_eq!(
        PrivateKeyPem::new(RSA2048_PKCS1.into()).unwrap_err(),
        FieldProblem::Pkcs1
    );
    let t0 = ts("2027-01-01T00:00:00Z");
    let t1 = ts("2027-01-01T00:10:00Z");
    let err = RsaKey::new("k-1".into(), pem.clone(), t1, t0, None).unwrap_err();
    assert_eq!(
        err,
        KeysError::Field {
            path: "activeFrom".into(),
            problem: FieldProblem::ActiveBeforeCreated
        }
    );
    let mut doc = KeysDocument::empty();
    doc.insert_rsa(RsaKey::new("k-1".into(), pem.clone(), t0, t1, None).unwrap())
        .unwrap();
    assert!(
        doc.insert_rsa(RsaKey::new("k-1".into(), pem, t0, t1, None).unwrap())
            .is_err()
    );
    let h = HmacKey::new("h-1".into(), HmacSecret::new([1; 32]), t0, t0, None).unwrap();
    assert!(KeysDocument::new(vec![], vec![h.clone(), h]).is_err());
}

#[test]
fn signing_key_is_the_latest_active_and_retire_after_is_exclusive() {
    let doc = parse(&valid()).unwrap();
    // Before the successor's activeFrom the first key signs; both are published.
    let before = ts("2027-01-31T00:09:59Z");
    assert_eq!(doc.signing_key(before).unwrap().kid(), "k-20270101-0000");
    assert_eq!(doc.published(before).len(), 2);
    // At activeFrom the successor signs.
    let at = ts("2027-01-31T00:10:00Z");
    assert_eq!(doc.signing_key(at).unwrap().kid(), "k-20270131-0000");
    // One second before retireAfter the old key is still published; at retireAfter it is gone.
    let retire = ts("2027-02-01T02:25:00Z");
    let kids = |t| {
        doc.published(t)
            .iter()
            .map(|k| k.kid().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        kids(ts("2027-02-01T02:24:59Z")),
        ["k-20270101-0000", "k-20270131-0000"]
    );
    assert_eq!(kids(retire), ["k-20270131-0000"]);
    // Nothing signs before the first activeFrom.
    assert!(doc.signing_key(ts("2026-12-31T23:59:59Z")).is_none());
}

#[test]
fn hmac_queries_follow_the_same_rules_and_verify_with_pending_keys() {
    let mut v = valid();
    v["hmac"].as_array_mut().unwrap().push(json!({
        "kid": "h-20270131-0000", "secret": STANDARD.encode([9u8; 32]),
        "createdAt": "2027-01-31T00:00:00Z", "activeFrom": "2027-01-31T00:10:00Z"}));
    let doc = parse(&v).unwrap();
    let t = ts("2027-01-31T00:05:00Z");
    assert_eq!(doc.signing_hmac(t).unwrap().kid(), "h-20270101-0000");
    assert_eq!(doc.verifying_hmacs(t).len(), 2);
    assert_eq!(
        doc.signing_hmac(ts("2027-01-31T00:10:00Z")).unwrap().kid(),
        "h-20270131-0000"
    );
}

fn arb_key_times() -> impl Strategy<Value = (i64, i64, Option<i64>)> {
    (
        0i64..4_000_000_000,
        0i64..10_000_000,
        proptest::option::of(1i64..10_000_000),
    )
        .prop_map(|(c, a, r)| (c, c + a, r.map(|r| c + a + r)))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn parse_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = KeysDocument::parse(&bytes);
    }

    #[test]
    fn parse_never_panics_on_mutated_valid_documents(cut in 0usize..4000, byte in any::<u8>()) {
        let mut text = valid().to_string().into_bytes();
        let i = cut % text.len();
        text[i] = byte;
        let _ = KeysDocument::parse(&text);
        text.truncate(i);
        prop_assert!(KeysDocument::parse(&text).is_err());
    }

    #[test]
    fn serialize_then_parse_is_the_identity(
        rsa in proptest::collection::vec(arb_key_times(), 0..4),
        hmac in proptest::collection::vec((arb_key_times(), any::<[u8; 32]>()), 0..4),
    ) {
        let pem = PrivateKeyPem::new(RSA2048_PKCS8.into()).unwrap();
        let at = |s: i64| Timestamp::from_second(s).unwrap();
        let keys = rsa.iter().enumerate().map(|(i, (c, a, r))| {
            RsaKey::new(format!("k-{i}"), pem.clone(), at(*c), at(*a), r.map(at)).unwrap()
        }).collect();
        let hmac = hmac.iter().enumerate().map(|(i, ((c, a, r), s))| {
            HmacKey::new(format!("h-{i}"), HmacSecret::new(*s), at(*c), at(*a), r.map(at)).unwrap()
        }).collect();
        let doc = KeysDocument::new(keys, hmac).unwrap();
        prop_assert_eq!(KeysDocument::parse(doc.to_json().as_bytes()).unwrap(), doc);
    }
}
