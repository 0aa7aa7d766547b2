//! Version 2 of the entry: the factors, a family's `amr`, which version is written, the bounds.

use super::*;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use proptest::prelude::*;

const HASH: &str =
    "$argon2id$v=19$m=65536,t=3,p=4$aWNob3ItZHVtbXktc2FsdA$c29tZSBvdXRwdXQgYnl0ZXMgaGVyZSEhISEhISE";
/// RFC 6238's test secret "12345678901234567890" in base32.
const SECRET: &str = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ";
const PASSKEY_ID: &str = "AAECAwQFBgcICQoLDA0ODw";
const T0: i64 = 1_793_872_800; // 2026-11-05T10:00:00Z

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap()
}

fn parse(json: &str) -> Result<CredentialsEntry, CredentialsError> {
    CredentialsEntry::parse("alice", json.as_bytes())
}

fn digest(i: usize) -> String {
    format!("{i:064x}")
}

/// A canonical base64url credential id, distinct for each `i`.
fn key_id(i: u8) -> String {
    URL_SAFE_NO_PAD.encode([i; 16])
}

fn passkey(id: &str, name: &str) -> StoredPasskey {
    StoredPasskey {
        id: id.to_owned(),
        name: name.to_owned(),
        passkey: serde_json::json!({"cred": {"counter": 7, "backup_eligible": false}}),
        created_at: at(T0 + 10),
        last_used_at: Some(at(T0 + 20)),
        backup_eligible: false,
        cloned_at: None,
    }
}

/// An entry with every factor and a family signed in with a passkey.
fn enrolled() -> CredentialsEntry {
    let mut entry = CredentialsEntry::new(HASH.to_owned(), at(T0), false)
        .start_family_with_amr(
            "fam1",
            "ichor-cli",
            "ichor-kube",
            &["pwd", "hwk", "mfa"],
            at(T0 + 60),
            SignedDuration::from_hours(12),
        )
        .unwrap();
    entry.v = FACTORS_ENTRY_VERSION;
    entry.factors = Factors {
        passkeys: vec![passkey(PASSKEY_ID, "YubiKey 5")],
        totp: Some(TotpFactor {
            secret: SECRET.to_owned(),
            created_at: at(T0 + 30),
            last_step: 59_795_761,
        }),
        recovery: Some(RecoveryCodes {
            digests: (0..RECOVERY_CODE_COUNT).map(digest).collect(),
            created_at: at(T0 + 40),
        }),
        failures: 0,
        failed_at: None,
        uses: 3,
    };
    entry
}

/// The field an `Invalid` error names, or the whole message for other errors.
fn refused_field(entry: &CredentialsEntry) -> String {
    match entry.to_json("alice").unwrap_err() {
        CredentialsError::Invalid { field, .. } => field,
        other => other.to_string(),
    }
}

#[test]
fn a_version_1_entry_reads_and_writes_byte_identically() {
    let json = format!(
        r#"{{"v":1,"hash":"{HASH}","notBefore":"2026-11-05T10:00:00Z","mustChange":false,"families":{{"a":{{"gen":1,"client":"ichor-ui","aud":"ichor-ui","iat":"2026-11-05T10:01:30Z","exp":"2026-11-05T11:01:30Z"}},"b":{{"gen":2,"client":"ichor-cli","aud":"ichor-kube","iat":"2026-11-05T10:01:00Z","exp":"2026-11-05T22:01:00Z","rotatedAt":"2026-11-05T10:06:40Z"}}}}}}"#
    );
    let entry = parse(&json).unwrap();
    assert_eq!((entry.v, entry.version()), (1, 1));
    assert!(entry.factors.is_empty());
    assert_eq!(entry.family("a").unwrap().amr_claim(), ["pwd"]);
    assert_eq!(entry.to_json("alice").unwrap(), json);
}

#[test]
fn an_entry_with_factors_round_trips_as_version_2() {
    let entry = enrolled();
    let json = entry.to_json("alice").unwrap();
    insta::assert_snapshot!(json);
    assert!(json.starts_with(r#"{"v":2,"#), "{json}");
    let back = parse(&json).unwrap();
    assert_eq!(back, entry);
    assert_eq!(back.to_json("alice").unwrap(), json);
}

#[test]
fn a_family_amr_alone_makes_version_2() {
    let entry = CredentialsEntry::new(HASH.to_owned(), at(T0), false)
        .start_family_with_amr(
            "f",
            "ichor-ui",
            "ichor-ui",
            &["pwd", "otp", "mfa"],
            at(T0),
            SignedDuration::from_hours(1),
        )
        .unwrap();
    assert_eq!(entry.version(), 2);
    let json = entry.to_json("alice").unwrap();
    assert!(
        json.starts_with(r#"{"v":2,"#),
        "written as version 2 though built as 1: {json}"
    );
    assert!(json.ends_with(r#""amr":["pwd","otp","mfa"]}}}"#), "{json}");
    assert_eq!(
        parse(&json).unwrap().family("f").unwrap().amr_claim(),
        ["pwd", "otp", "mfa"]
    );
}

#[test]
fn an_entry_without_factors_is_written_as_version_1_whatever_it_was_read_as() {
    let v2 = format!(
        r#"{{"v":2,"hash":"{HASH}","notBefore":"2026-11-05T10:00:00Z","mustChange":true,"factors":{{}},"families":{{"f":{{"gen":1,"client":"c","aud":"a","iat":"2026-11-05T10:00:00Z","exp":"2026-11-05T11:00:00Z","amr":["pwd"]}}}}}}"#
    );
    let entry = parse(&v2).unwrap();
    assert_eq!(entry.v, ENTRY_VERSION, "read as the version it is written as");
    assert!(
        entry.family("f").unwrap().amr.is_empty(),
        "[\"pwd\"] reads as the default"
    );
    assert_eq!(
        entry.to_json("alice").unwrap(),
        format!(
            r#"{{"v":1,"hash":"{HASH}","notBefore":"2026-11-05T10:00:00Z","mustChange":true,"families":{{"f":{{"gen":1,"client":"c","aud":"a","iat":"2026-11-05T10:00:00Z","exp":"2026-11-05T11:00:00Z"}}}}}}"#
        )
    );
    // Removing the last factor goes back to version 1.
    let mut entry = enrolled();
    entry.factors = Factors::default();
    entry.families.clear();
    assert!(entry.to_json("alice").unwrap().starts_with(r#"{"v":1,"#));
}

#[test]
fn a_version_1_entry_with_version_2_fields_is_refused() {
    let json = enrolled()
        .to_json("alice")
        .unwrap()
        .replacen(r#""v":2"#, r#""v":1"#, 1);
    let err = parse(&json).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("credentials entry for user alice: v: is 1, but \"factors\""),
        "{err}"
    );
}

#[test]
fn each_passkey_bound_is_refused_naming_the_field() {
    let with = |change: &dyn Fn(&mut CredentialsEntry)| {
        let mut entry = enrolled();
        change(&mut entry);
        refused_field(&entry)
    };
    assert_eq!(
        with(&|e| e.factors.passkeys = (0..11).map(|i| passkey(&key_id(i), "k")).collect()),
        "factors.passkeys"
    );
    assert_eq!(
        with(&|e| e.factors.passkeys.push(passkey(PASSKEY_ID, "copy"))),
        "factors.passkeys[1].id"
    );
    for id in ["", "AAEC+w", "AAECAw==", "A", "AAECAw.."] {
        assert_eq!(
            with(&|e| e.factors.passkeys[0].id = id.to_owned()),
            "factors.passkeys[0].id",
            "{id:?}"
        );
    }
    let long_id = URL_SAFE_NO_PAD.encode(vec![7u8; MAX_CREDENTIAL_ID_BYTES + 1]);
    assert_eq!(
        with(&|e| e.factors.passkeys[0].id = long_id.clone()),
        "factors.passkeys[0].id"
    );
    for name in [
        "",
        "   ",
        "a\nb",
        "\u{1b}[31m",
        &"é".repeat(MAX_PASSKEY_NAME_CHARS + 1),
    ] {
        assert_eq!(
            with(&|e| e.factors.passkeys[0].name = name.to_owned()),
            "factors.passkeys[0].name",
            "{name:?}"
        );
    }
    assert_eq!(
        with(&|e| e.factors.passkeys[0].passkey = serde_json::json!("a string")),
        "factors.passkeys[0].passkey"
    );
    let big = serde_json::json!({ "cred": "x".repeat(MAX_PASSKEY_BYTES) });
    assert_eq!(
        with(&|e| e.factors.passkeys[0].passkey = big.clone()),
        "factors.passkeys[0].passkey"
    );
}

#[test]
fn the_largest_passkey_name_and_the_most_passkeys_are_accepted() {
    let mut entry = enrolled();
    entry.factors.passkeys = (0..10u8)
        .map(|i| passkey(&key_id(i), &"é".repeat(MAX_PASSKEY_NAME_CHARS)))
        .collect();
    let json = entry.to_json("alice").unwrap();
    assert_eq!(parse(&json).unwrap(), entry);
}

#[test]
fn eleven_passkeys_are_refused_while_reading() {
    let mut entry = enrolled();
    entry.factors.passkeys = (0..10u8).map(|i| passkey(&key_id(i), "k")).collect();
    let json = entry.to_json("alice").unwrap();
    let one = serde_json::to_string(&passkey(&key_id(200), "k")).unwrap();
    let json = json.replacen(r#""passkeys":["#, &format!(r#""passkeys":[{one},"#), 1);
    let err = parse(&json).unwrap_err();
    assert!(
        err.to_string().contains("factors.passkeys: more than 10 entries"),
        "{err}"
    );
}

#[test]
fn the_totp_secret_and_recovery_digests_are_bounded_naming_the_field() {
    let with = |change: &dyn Fn(&mut CredentialsEntry)| {
        let mut entry = enrolled();
        change(&mut entry);
        refused_field(&entry)
    };
    for secret in [
        &SECRET[1..],
        &SECRET.to_lowercase(),
        &format!("{}1", &SECRET[1..]),
        &format!("{SECRET}A"),
    ] {
        assert_eq!(
            with(&|e| e.factors.totp.as_mut().unwrap().secret = secret.to_owned()),
            "factors.totp.secret",
            "{secret:?}"
        );
    }
    assert_eq!(
        with(&|e| e.factors.recovery.as_mut().unwrap().digests.push(digest(99))),
        "factors.recovery.digests"
    );
    assert_eq!(
        with(&|e| e.factors.recovery.as_mut().unwrap().digests[3] = digest(0)),
        "factors.recovery.digests[3]"
    );
    for bad in [
        digest(1).to_uppercase(),
        digest(1)[1..].to_owned(),
        format!("{}g", &digest(1)[1..]),
    ] {
        assert_eq!(
            with(&|e| e.factors.recovery.as_mut().unwrap().digests[2] = bad.clone()),
            "factors.recovery.digests[2]",
            "{bad:?}"
        );
    }
    // Each use removes one digest, down to none.
    let mut entry = enrolled();
    entry.factors.recovery.as_mut().unwrap().digests.clear();
    assert_eq!(parse(&entry.to_json("alice").unwrap()).unwrap(), entry);
}

#[test]
fn a_family_amr_outside_rfc_8176_values_is_refused() {
    let with = |amr: &[&str]| {
        let mut entry = enrolled();
        entry.families.get_mut("fam1").unwrap().amr = amr.iter().map(|&v| v.to_owned()).collect();
        refused_field(&entry)
    };
    assert_eq!(with(&["pwd", "sms"]), "families[\"fam1\"].amr");
    assert_eq!(with(&["pwd", "mfa", "mfa"]), "families[\"fam1\"].amr");
    let entry = CredentialsEntry::new(HASH.to_owned(), at(T0), false);
    assert_eq!(
        entry.start_family_with_amr(
            "f",
            "c",
            "a",
            &["pwd", "face"],
            at(T0),
            SignedDuration::from_hours(1)
        ),
        Err(FamilyError::InvalidAmr(
            "\"face\" is not one of pwd, hwk, swk, otp, mfa".to_owned()
        ))
    );
    let pwd = entry
        .start_family_with_amr("f", "c", "a", &["pwd"], at(T0), SignedDuration::from_hours(1))
        .unwrap();
    assert_eq!(pwd.version(), ENTRY_VERSION, "[\"pwd\"] is the default");
}

#[test]
fn unknown_fields_inside_factors_are_refused() {
    let json =
        enrolled()
            .to_json("alice")
            .unwrap()
            .replacen(r#""lastStep":"#, r#""digits":8,"lastStep":"#, 1);
    let err = parse(&json).unwrap_err();
    assert!(err.to_string().contains("unknown field `digits`"), "{err}");
}

#[test]
fn debug_output_leaves_the_secret_and_digests_out() {
    let entry = enrolled();
    let printed = format!("{entry:?}");
    assert!(!printed.contains(SECRET), "{printed}");
    assert!(!printed.contains(&digest(1)), "{printed}");
    assert!(!printed.contains("argon2id"), "{printed}");
    assert!(
        !printed.contains("counter"),
        "the stored passkey is shown by size: {printed}"
    );
    assert!(
        printed.contains("YubiKey 5") && printed.contains("<10 redacted>"),
        "{printed}"
    );
    let mut bad = entry;
    bad.factors.totp.as_mut().unwrap().secret = format!("{SECRET}A");
    let message = bad.to_json("alice").unwrap_err().to_string();
    assert!(
        !message.contains(SECRET),
        "the refusal leaves the secret out: {message}"
    );
}

#[test]
fn a_factor_reset_removes_factors_and_sessions_and_keeps_the_password() {
    let entry = enrolled().with_factors_reset(at(T0 + 500));
    assert!(entry.factors.is_empty() && entry.families.is_empty());
    assert_eq!((entry.hash.as_str(), entry.not_before), (HASH, at(T0 + 500)));
    assert_eq!(entry.version(), ENTRY_VERSION);
    let changed = enrolled().with_new_password("$argon2id$new".to_owned(), at(T0 + 500), false);
    assert_eq!(
        changed.factors,
        enrolled().factors,
        "a password change keeps the factors"
    );
}

fn factors_strategy() -> impl Strategy<Value = Factors> {
    let passkeys = proptest::collection::btree_map(
        proptest::collection::vec(any::<u8>(), 1..=64).prop_map(|id| URL_SAFE_NO_PAD.encode(id)),
        (
            "[ -~]{0,63}[!-~]",
            any::<u32>(),
            any::<bool>(),
            proptest::option::of(0i64..1_000_000),
        ),
        0..=MAX_PASSKEYS,
    );
    (
        passkeys,
        proptest::option::of(("[A-Z2-7]{32}", any::<u64>())),
        proptest::option::of(proptest::collection::btree_set(
            "[0-9a-f]{64}",
            0..=RECOVERY_CODE_COUNT,
        )),
    )
        .prop_map(|(passkeys, totp, recovery)| Factors {
            passkeys: passkeys
                .into_iter()
                .map(|(id, (name, counter, backup_eligible, used))| StoredPasskey {
                    id,
                    name,
                    passkey: serde_json::json!({"cred": {"counter": counter}}),
                    created_at: at(T0),
                    last_used_at: used.map(|u| at(T0 + u)),
                    backup_eligible,
                    cloned_at: None,
                })
                .collect(),
            totp: totp.map(|(secret, last_step)| TotpFactor {
                secret,
                created_at: at(T0),
                last_step,
            }),
            recovery: recovery.map(|digests| RecoveryCodes {
                digests: digests.into_iter().collect(),
                created_at: at(T0),
            }),
            failures: 0,
            failed_at: None,
            uses: 0,
        })
}

proptest! {
    #[test]
    fn every_valid_version_2_entry_round_trips(factors in factors_strategy(), amr in proptest::sample::subsequence(AMR_VALUES.to_vec(), 0..=5)) {
        let mut entry = CredentialsEntry::new(HASH.to_owned(), at(T0), false)
            .start_family_with_amr("f", "ichor-cli", "ichor-kube", &amr, at(T0), SignedDuration::from_hours(1))
            .unwrap();
        entry.factors = factors;
        entry.v = entry.version();
        let json = entry.to_json("alice").unwrap();
        let back = CredentialsEntry::parse("alice", json.as_bytes()).unwrap();
        prop_assert_eq!(&back, &entry);
        prop_assert_eq!(back.to_json("alice").unwrap(), json);
    }
}
