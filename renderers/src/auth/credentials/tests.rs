use super::*;
use proptest::prelude::*;

const HASH: &str =
    "$argon2id$v=19$m=65536,t=3,p=4$aWNob3ItZHVtbXktc2FsdA$c29tZSBvdXRwdXQgYnl0ZXMgaGVyZSEhISEhISE";

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap()
}

const T0: i64 = 1_793_872_800; // 2026-11-05T10:00:00Z

fn hours(h: i64) -> SignedDuration {
    SignedDuration::from_hours(h)
}

fn entry_with_family() -> CredentialsEntry {
    CredentialsEntry::new(HASH.to_owned(), at(T0), false)
        .start_family("fam1", "ichor-cli", "ichor-kube", at(T0 + 60), hours(12))
        .unwrap()
}

fn parse(json: &str) -> Result<CredentialsEntry, CredentialsError> {
    CredentialsEntry::parse("alice", json.as_bytes())
}

#[test]
fn the_canonical_json_has_a_stable_field_order() {
    // Families sorted by id whatever the insertion order; rotatedAt only once rotated.
    let entry = entry_with_family()
        .start_family("a-first", "ichor-ui", "ichor-ui", at(T0 + 90), hours(1))
        .unwrap();
    let Rotation::Rotated { entry, .. } = entry.rotate_family("fam1", 1, at(T0 + 400)) else {
        panic!("expected a rotation");
    };
    let json = entry.to_json("alice").unwrap();
    insta::assert_snapshot!(json);
    assert_eq!(parse(&json), Ok(entry));
}

#[test]
fn reads_the_seed_format_without_families() {
    let json = format!(r#"{{"v":1,"hash":"{HASH}","notBefore":"2026-11-05T10:00:00Z","mustChange":true}}"#);
    let entry = parse(&json).unwrap();
    assert!(entry.must_change);
    assert_eq!(entry.not_before, at(T0));
    assert!(entry.families.is_empty());
    assert_eq!(
        entry.to_json("alice").unwrap(),
        json,
        "empty families are omitted"
    );
    let with_empty = format!(
        r#"{{"v":1,"hash":"{HASH}","notBefore":"2026-11-05T10:00:00Z","mustChange":true,"families":{{}}}}"#
    );
    assert_eq!(parse(&with_empty), Ok(entry));
}

#[test]
fn refuses_an_unknown_version_by_number() {
    let err = parse(r#"{"v":3,"hash":"x","somethingNew":true}"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        "credentials entry for user alice: unsupported version 3; this build reads versions 1 and 2"
    );
    let err = parse(r#"{"v":"1"}"#).unwrap_err();
    assert_eq!(
        err,
        CredentialsError::UnsupportedVersion {
            user: "alice".to_owned(),
            got: "\"1\"".to_owned()
        }
    );
}

#[test]
fn refuses_a_missing_version() {
    let err = parse(&format!(
        r#"{{"hash":"{HASH}","notBefore":"2026-11-05T10:00:00Z","mustChange":true}}"#
    ))
    .unwrap_err();
    assert_eq!(
        err,
        CredentialsError::MissingVersion {
            user: "alice".to_owned()
        }
    );
}

#[test]
fn refuses_what_is_not_a_json_object() {
    for json in ["", "[]", "nul", "{\"v\":1"] {
        let err = parse(json).unwrap_err();
        assert!(
            matches!(err, CredentialsError::NotJson { .. }),
            "{json:?}: {err:?}"
        );
    }
}

#[test]
fn refuses_an_unknown_field() {
    let json = format!(
        r#"{{"v":1,"hash":"{HASH}","notBefore":"2026-11-05T10:00:00Z","mustChange":true,"password":"x"}}"#
    );
    let err = parse(&json).unwrap_err();
    assert!(err.to_string().contains("unknown field `password`"), "{err}");
    let json = format!(
        r#"{{"v":1,"hash":"{HASH}","notBefore":"2026-11-05T10:00:00Z","mustChange":true,"families":{{"f":{{"gen":1,"client":"c","aud":"a","iat":"2026-11-05T10:00:00Z","exp":"2026-11-05T11:00:00Z","extra":1}}}}}}"#
    );
    assert!(
        parse(&json)
            .unwrap_err()
            .to_string()
            .contains("unknown field `extra`")
    );
}

#[test]
fn refuses_a_missing_field_naming_it() {
    let err = parse(&format!(r#"{{"v":1,"hash":"{HASH}","mustChange":true}}"#)).unwrap_err();
    assert!(err.to_string().contains("missing field `notBefore`"), "{err}");
}

#[test]
fn refuses_a_hash_that_is_not_argon2id() {
    let json = r#"{"v":1,"hash":"$2b$12$abcdefghijklmnopqrstuv","notBefore":"2026-11-05T10:00:00Z","mustChange":false}"#;
    let err = parse(json).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("credentials entry for user alice: hash: must be an argon2id PHC string"),
        "{err}"
    );
}

#[test]
fn refuses_an_entry_over_64_kib_before_parsing() {
    let big = vec![b' '; MAX_ENTRY_BYTES + 1];
    let err = CredentialsEntry::parse("alice", &big).unwrap_err();
    assert_eq!(
        err,
        CredentialsError::TooLarge {
            user: "alice".to_owned(),
            got: MAX_ENTRY_BYTES + 1
        }
    );
}

fn families_json(ids: &[String]) -> String {
    let families: Vec<String> = ids
        .iter()
        .map(|id| {
            format!(r#""{id}":{{"gen":1,"client":"ichor-cli","aud":"ichor-kube","iat":"2026-11-05T10:00:00Z","exp":"2026-11-05T22:00:00Z"}}"#)
        })
        .collect();
    format!(
        r#"{{"v":1,"hash":"{HASH}","notBefore":"2026-11-05T10:00:00Z","mustChange":false,"families":{{{}}}}}"#,
        families.join(",")
    )
}

#[test]
fn accepts_32_families_and_refuses_33() {
    let ids: Vec<String> = (0..33).map(|i| format!("f{i}")).collect();
    assert_eq!(parse(&families_json(&ids[..32])).unwrap().families.len(), 32);
    let err = parse(&families_json(&ids)).unwrap_err();
    assert!(err.to_string().contains("more than 32 entries"), "{err}");
}

#[test]
fn refuses_a_family_id_listed_twice() {
    let err = parse(&families_json(&["a".to_owned(), "a".to_owned()])).unwrap_err();
    assert!(err.to_string().contains("family id \"a\" appears twice"), "{err}");
}

#[test]
fn refuses_a_family_that_ends_before_it_starts() {
    let mut entry = entry_with_family();
    if let Some(f) = entry.families.get_mut("fam1") {
        f.exp = at(T0);
    }
    let err = entry.to_json("alice").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("credentials entry for user alice: families[\"fam1\"].exp: "),
        "{err}"
    );
}

#[test]
fn refuses_a_family_id_with_other_characters() {
    let err = parse(&families_json(&["a b".to_owned()])).unwrap_err();
    assert!(
        err.to_string().contains("families[\"a b\"]: the id must be"),
        "{err}"
    );
}

#[test]
fn debug_output_leaves_the_hash_out() {
    let printed = format!("{:?}", entry_with_family());
    assert!(!printed.contains("argon2id"), "{printed}");
    assert!(printed.contains("fam1"), "{printed}");
}

#[test]
fn a_token_issued_in_the_second_of_not_before_is_accepted_and_one_before_is_not() {
    let entry = CredentialsEntry::new(HASH.to_owned(), Timestamp::constant(T0, 700_000_000), false);
    assert_eq!(entry.not_before, at(T0), "notBefore is stored in whole seconds");
    assert!(is_token_valid_for(at(T0), &entry));
    assert!(is_token_valid_for(Timestamp::constant(T0, 1), &entry));
    assert!(is_token_valid_for(at(T0 + 1), &entry));
    assert!(!is_token_valid_for(at(T0 - 1), &entry));
    assert!(!is_token_valid_for(
        Timestamp::constant(T0 - 1, 999_999_999),
        &entry
    ));
}

#[test]
fn revoke_all_moves_not_before_and_drops_every_family() {
    let entry = entry_with_family().revoke_all(at(T0 + 100));
    assert_eq!(entry.not_before, at(T0 + 100));
    assert!(entry.families.is_empty());
    assert!(!entry.accepts_issued_at(at(T0 + 99)));
}

#[test]
fn a_new_password_revokes_and_sets_must_change() {
    let entry = entry_with_family().with_new_password("$argon2id$new".to_owned(), at(T0 + 100), true);
    assert_eq!(entry.hash, "$argon2id$new");
    assert!(entry.must_change);
    assert_eq!(entry.not_before, at(T0 + 100));
    assert!(entry.families.is_empty());
}

#[test]
fn a_rehash_keeps_sessions() {
    let before = entry_with_family();
    let entry = before.with_rehashed_password("$argon2id$new".to_owned());
    assert_eq!(entry.hash, "$argon2id$new");
    assert_eq!(
        (entry.not_before, &entry.families),
        (before.not_before, &before.families)
    );
}

#[test]
fn start_family_records_the_session() {
    let entry = entry_with_family();
    let family = entry.family("fam1").unwrap();
    assert_eq!(
        family,
        &Family {
            generation: FIRST_GENERATION,
            client: "ichor-cli".to_owned(),
            aud: "ichor-kube".to_owned(),
            iat: at(T0 + 60),
            exp: at(T0 + 60 + 12 * 3600),
            rotated_at: None,
            amr: Vec::new(),
        }
    );
}

#[test]
fn start_family_refuses_bad_input() {
    let entry = entry_with_family();
    let now = at(T0 + 120);
    assert_eq!(
        entry.start_family("fam1", "c", "a", now, hours(1)),
        Err(FamilyError::AlreadyExists("fam1".to_owned()))
    );
    assert_eq!(
        entry.start_family("", "c", "a", now, hours(1)),
        Err(FamilyError::InvalidId)
    );
    assert_eq!(
        entry.start_family("f/2", "c", "a", now, hours(1)),
        Err(FamilyError::InvalidId)
    );
    assert_eq!(
        entry.start_family("f2", "", "a", now, hours(1)),
        Err(FamilyError::InvalidValue { field: "client" })
    );
    assert_eq!(
        entry.start_family("f2", "c", "a b", now, hours(1)),
        Err(FamilyError::InvalidValue { field: "aud" })
    );
    assert_eq!(
        entry.start_family("f2", "c", "a", now, SignedDuration::ZERO),
        Err(FamilyError::InvalidLifetime(SignedDuration::ZERO))
    );
}

#[test]
fn start_family_drops_ended_families_then_the_oldest_when_full() {
    let mut entry = CredentialsEntry::new(HASH.to_owned(), at(T0), false);
    entry = entry.start_family("expired", "c", "a", at(T0), hours(1)).unwrap();
    for i in 0..31 {
        entry = entry
            .start_family(&format!("f{i:02}"), "c", "a", at(T0 + 10 + i), hours(12))
            .unwrap();
    }
    assert_eq!(entry.families.len(), 32);
    // Two hours later: the expired one goes first, so nothing live is dropped.
    let entry = entry
        .start_family("new1", "c", "a", at(T0 + 7200), hours(12))
        .unwrap();
    assert_eq!(entry.families.len(), 32);
    assert!(entry.family("expired").is_none() && entry.family("f00").is_some());
    // Full of live families: the one that started earliest (f00) makes room, and says so first.
    assert_eq!(entry.families_displaced_at(at(T0 + 7300)), ["f00"]);
    let entry = entry
        .start_family("new2", "c", "a", at(T0 + 7300), hours(12))
        .unwrap();
    assert_eq!(entry.families.len(), 32);
    assert!(entry.family("f00").is_none() && entry.family("f01").is_some() && entry.family("new2").is_some());
}

#[test]
fn no_live_family_is_displaced_while_there_is_room_or_an_ended_one_to_drop() {
    let mut entry = CredentialsEntry::new(HASH.to_owned(), at(T0), false);
    entry = entry.start_family("short", "c", "a", at(T0), hours(1)).unwrap();
    for i in 0..30 {
        entry = entry
            .start_family(&format!("f{i:02}"), "c", "a", at(T0 + 10 + i), hours(12))
            .unwrap();
    }
    assert!(
        entry.families_displaced_at(at(T0 + 100)).is_empty(),
        "31 live: room for one"
    );
    let entry = entry
        .start_family("f30", "c", "a", at(T0 + 100), hours(12))
        .unwrap();
    assert_eq!(
        entry.families_displaced_at(at(T0 + 200)),
        ["short"],
        "32 live: the oldest goes"
    );
    assert!(
        entry.families_displaced_at(at(T0 + 3600)).is_empty(),
        "the oldest has ended: it is pruned, nothing live is displaced"
    );
}

#[test]
fn presenting_the_current_generation_rotates() {
    let entry = entry_with_family();
    let Rotation::Rotated { entry, generation } = entry.rotate_family("fam1", 1, at(T0 + 300)) else {
        panic!("expected a rotation");
    };
    assert_eq!(generation, 2);
    let family = entry.family("fam1").unwrap();
    assert_eq!((family.generation, family.rotated_at), (2, Some(at(T0 + 300))));
    assert_eq!(
        family.exp,
        at(T0 + 60 + 12 * 3600),
        "rotation never extends the family"
    );
}

#[test]
fn the_generation_just_replaced_within_ten_seconds_gets_the_same_successor() {
    let Rotation::Rotated { entry, .. } = entry_with_family().rotate_family("fam1", 1, at(T0 + 300)) else {
        panic!("expected a rotation");
    };
    assert_eq!(
        entry.rotate_family("fam1", 1, at(T0 + 300)),
        Rotation::Grace { generation: 2 }
    );
    assert_eq!(
        entry.rotate_family("fam1", 1, at(T0 + 309)),
        Rotation::Grace { generation: 2 }
    );
}

#[test]
fn the_generation_just_replaced_after_ten_seconds_revokes_the_family() {
    let Rotation::Rotated { entry, .. } = entry_with_family().rotate_family("fam1", 1, at(T0 + 300)) else {
        panic!("expected a rotation");
    };
    let outcome = entry.rotate_family("fam1", 1, at(T0 + 310));
    let Rotation::Refused {
        entry: Some(written),
        reason,
    } = outcome
    else {
        panic!("expected a refusal with a write: {outcome:?}");
    };
    assert_eq!(
        reason,
        RefusalReason::Reuse {
            presented: 1,
            current: 2
        }
    );
    assert!(written.family("fam1").is_none());
}

#[test]
fn an_older_generation_revokes_the_family_even_within_the_window() {
    let mut entry = entry_with_family();
    for (generation, t) in [(1, 300), (2, 600)] {
        let Rotation::Rotated { entry: next, .. } = entry.rotate_family("fam1", generation, at(T0 + t))
        else {
            panic!("expected a rotation");
        };
        entry = next;
    }
    let outcome = entry.rotate_family("fam1", 1, at(T0 + 601));
    assert!(
        matches!(
            outcome,
            Rotation::Refused {
                entry: Some(_),
                reason: RefusalReason::Reuse {
                    presented: 1,
                    current: 3
                }
            }
        ),
        "{outcome:?}"
    );
    let future = entry.rotate_family("fam1", 9, at(T0 + 601));
    assert!(
        matches!(
            future,
            Rotation::Refused {
                reason: RefusalReason::Reuse { .. },
                ..
            }
        ),
        "{future:?}"
    );
}

#[test]
fn a_family_past_its_end_is_refused_and_removed() {
    let entry = entry_with_family();
    let end = at(T0 + 60 + 12 * 3600);
    let outcome = entry.rotate_family("fam1", 1, end);
    let Rotation::Refused {
        entry: Some(written),
        reason: RefusalReason::Expired,
    } = outcome
    else {
        panic!("expected expiry: {outcome:?}");
    };
    assert!(written.families.is_empty());
    assert!(matches!(
        entry.rotate_family("fam1", 1, at(T0 + 60 + 12 * 3600 - 1)),
        Rotation::Rotated { .. }
    ));
}

#[test]
fn a_family_started_before_not_before_is_refused() {
    let mut entry = entry_with_family();
    entry.not_before = at(T0 + 61);
    let outcome = entry.rotate_family("fam1", 1, at(T0 + 100));
    assert!(
        matches!(
            outcome,
            Rotation::Refused {
                entry: Some(_),
                reason: RefusalReason::BeforeNotBefore
            }
        ),
        "{outcome:?}"
    );
}

#[test]
fn an_unknown_family_is_refused_with_nothing_to_write() {
    assert_eq!(
        entry_with_family().rotate_family("other", 1, at(T0 + 100)),
        Rotation::Refused {
            entry: None,
            reason: RefusalReason::UnknownFamily
        }
    );
}

#[test]
fn revoke_family_removes_only_that_family() {
    let entry = entry_with_family()
        .start_family("fam2", "ichor-ui", "ichor-ui", at(T0 + 70), hours(1))
        .unwrap();
    let revoked = entry.revoke_family("fam1").unwrap();
    assert!(revoked.family("fam1").is_none() && revoked.family("fam2").is_some());
    assert_eq!(revoked.revoke_family("fam1"), None);
}

fn family_strategy() -> impl Strategy<Value = Family> {
    (
        1u64..1_000_000,
        prop_oneof![Just("ichor-cli"), Just("ichor-ui")],
        prop_oneof![Just("ichor-kube"), Just("ichor-ui")],
        0i64..4_000_000_000,
        0i64..3_000_000,
        proptest::option::of(0i64..3_000_000),
    )
        .prop_map(|(generation, client, aud, iat, life, rotated)| Family {
            generation,
            client: client.to_owned(),
            aud: aud.to_owned(),
            iat: at(iat),
            exp: at(iat + life),
            rotated_at: rotated.map(|r| at(iat + r)),
            amr: Vec::new(),
        })
}

fn entry_strategy() -> impl Strategy<Value = CredentialsEntry> {
    (
        "[A-Za-z0-9+/]{22}\\$[A-Za-z0-9+/]{43}",
        (0i64..4_000_000_000, 0i32..1_000_000_000),
        any::<bool>(),
        proptest::collection::btree_map("[A-Za-z0-9_-]{1,64}", family_strategy(), 0..=MAX_FAMILIES),
    )
        .prop_map(
            |(tail, (second, nanos), must_change, families)| CredentialsEntry {
                v: ENTRY_VERSION,
                hash: format!("$argon2id$v=19$m=65536,t=3,p=4${tail}"),
                not_before: Timestamp::new(second, nanos).unwrap(),
                must_change,
                factors: Factors::default(),
                families,
            },
        )
}

proptest! {
    #[test]
    fn every_valid_entry_round_trips_through_canonical_json(entry in entry_strategy()) {
        let json = entry.to_json("alice").unwrap();
        let back = CredentialsEntry::parse("alice", json.as_bytes()).unwrap();
        prop_assert_eq!(&back, &entry);
        prop_assert_eq!(back.to_json("alice").unwrap(), json);
    }

    #[test]
    fn rotation_never_extends_a_family_or_leaves_more_than_one_write(entry in entry_strategy(), presented in 0u64..1_000_001, now in 0i64..4_100_000_000) {
        let id = entry.families.keys().next().cloned().unwrap_or_else(|| "none".to_owned());
        match entry.rotate_family(&id, presented, at(now)) {
            Rotation::Rotated { entry: next, generation } => {
                let before = &entry.families[&id];
                let after = &next.families[&id];
                prop_assert_eq!(generation, before.generation + 1);
                prop_assert_eq!(after.exp, before.exp);
                prop_assert!(at(now) < after.exp);
                prop_assert!(next.to_json("alice").is_ok());
            }
            Rotation::Grace { generation } => prop_assert_eq!(generation, presented + 1),
            Rotation::Refused { entry: Some(next), .. } => prop_assert!(next.family(&id).is_none()),
            Rotation::Refused { entry: None, reason } => prop_assert_eq!(reason, RefusalReason::UnknownFamily),
        }
    }
}
