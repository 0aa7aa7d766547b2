//! Changing one's own second factors: new recovery codes and removals, each over the password
//! and a current code of a factor (the password alone, phished with a session, changes nothing),
//! a wrong code counted as at the sign-in.

use super::factors::enrol;
use super::*;
use ichor_issuer::api::proto::{FactorKind, RegenerateRecoveryCodesRequest, RemoveFactorRequest};
use ichor_renderers::auth::{
    credentials::{Factors, StoredPasskey},
    recovery, totp,
};

async fn remove(
    e: &Env,
    user: &str,
    (password, code): (&str, &str),
    kind: FactorKind,
    id: &str,
) -> Result<Factors, Status> {
    let t = token(user, e.clock.now_ts());
    e.api
        .remove_factor(req(
            &t,
            RemoveFactorRequest {
                password: password.into(),
                kind: kind as i32,
                passkey_id: id.into(),
                code: code.into(),
            },
        ))
        .await?;
    Ok(e.entry(user).await.unwrap().factors)
}

#[tokio::test]
async fn recovery_codes_are_made_anew_over_the_password_and_a_factor_beside_another_factor() {
    let e = env();
    e.cast().await;
    let regenerate = |password: &'static str, code: String| {
        let t = token("view", e.clock.now_ts());
        let api = e.api.clone();
        async move {
            api.regenerate_recovery_codes(req(
                &t,
                RegenerateRecoveryCodesRequest {
                    password: password.into(),
                    code,
                },
            ))
            .await
            .map(tonic::Response::into_inner)
        }
    };
    assert_status(
        regenerate(PASSWORD, String::new()).await,
        Code::FailedPrecondition,
        "recovery codes stand beside an authenticator app or a passkey",
    );
    let (secret, first) = enrol(&e, "view").await;
    assert_status(
        regenerate("not my password", first[0].clone()).await,
        Code::InvalidArgument,
        "password: does not match",
    );
    // The password alone does not do it (a phished password and session would).
    assert_status(
        regenerate(PASSWORD, String::new()).await,
        Code::InvalidArgument,
        "code: required",
    );
    assert_status(
        regenerate(PASSWORD, "AAAA-BBBB-CCCC-DDDD".to_owned()).await,
        Code::InvalidArgument,
        "code: is incorrect or was used already",
    );
    assert_eq!(
        e.entry("view").await.unwrap().factors.failures,
        1,
        "a wrong code counts as at the sign-in"
    );
    let again = regenerate(PASSWORD, first[0].clone())
        .await
        .unwrap()
        .recovery_codes;
    assert_eq!(again.len(), 10);
    let digests = e.entry("view").await.unwrap().factors.recovery.unwrap().digests;
    for old in &first {
        assert!(
            !digests.contains(&recovery::digest(old).unwrap()),
            "an old code still works"
        );
    }
    for new in &again {
        assert!(digests.contains(&recovery::digest(new).unwrap()));
    }
    // Without them, an authenticator app alone: asked again with the app's code, new ones come.
    e.clock.advance(jiff::SignedDuration::from_secs(30));
    let code = totp::code_at(&secret, e.clock.now_ts()).unwrap();
    remove(&e, "view", (PASSWORD, &code), FactorKind::Recovery, "")
        .await
        .unwrap();
    let entry = e.entry("view").await.unwrap();
    assert!(entry.factors.recovery.is_none() && entry.factors.totp.is_some());
    assert_status(
        regenerate(PASSWORD, code).await,
        Code::InvalidArgument,
        "code: is incorrect or was used already",
    );
    e.clock.advance(jiff::SignedDuration::from_secs(30));
    let code = totp::code_at(&secret, e.clock.now_ts()).unwrap();
    assert_eq!(regenerate(PASSWORD, code).await.unwrap().recovery_codes.len(), 10);
}

#[tokio::test]
async fn removing_the_last_real_factor_removes_the_recovery_codes_too() {
    let e = env();
    e.cast().await;
    let (_, codes) = enrol(&e, "view").await;
    let mut entry = e.entry("view").await.unwrap();
    entry.factors.passkeys.push(StoredPasskey {
        id: "AQIDBA".into(),
        name: "YubiKey 5".into(),
        passkey: serde_json::json!({"cred": "opaque"}),
        created_at: t0(),
        last_used_at: None,
        backup_eligible: false,
        cloned_at: None,
    });
    e.put_entry("view", Some(&entry)).await;

    assert_status(
        remove(&e, "view", (PASSWORD, &codes[0]), FactorKind::Unspecified, "").await,
        Code::InvalidArgument,
        "kind: ",
    );
    assert_status(
        remove(&e, "view", (PASSWORD, &codes[0]), FactorKind::Passkey, "").await,
        Code::InvalidArgument,
        "passkey_id: is required",
    );
    assert_status(
        remove(&e, "view", ("wrong password", &codes[0]), FactorKind::Totp, "").await,
        Code::InvalidArgument,
        "password: does not match",
    );
    assert!(e.entry("view").await.unwrap().factors.totp.is_some());
    assert_status(
        remove(&e, "view", (PASSWORD, ""), FactorKind::Totp, "").await,
        Code::InvalidArgument,
        "code: required",
    );

    let left = remove(&e, "view", (PASSWORD, &codes[0]), FactorKind::Totp, "")
        .await
        .unwrap();
    assert!(
        left.totp.is_none() && left.recovery.is_some(),
        "the passkey remains: {left:?}"
    );
    assert_status(
        remove(&e, "view", (PASSWORD, &codes[1]), FactorKind::Totp, "").await,
        Code::FailedPrecondition,
        "kind: you have no authenticator app to remove",
    );
    assert_status(
        remove(&e, "view", (PASSWORD, &codes[1]), FactorKind::Passkey, "BAUG").await,
        Code::FailedPrecondition,
        "passkey_id: you have no passkey of this id",
    );
    // Enrolling again beside the passkey takes a code of it (the password alone adds no factor
    // to a protected account), keeps the unused codes and shows none.
    let digests = left.recovery.clone().unwrap().digests;
    let t = token("view", e.clock.now_ts());
    assert_status(
        e.api
            .begin_totp(req(
                &t,
                BeginTotpRequest {
                    password: PASSWORD.into(),
                    code: String::new(),
                },
            ))
            .await,
        Code::InvalidArgument,
        "code: required",
    );
    let (_, shown) = super::factors::enrol_with_code(&e, "view", &codes[1]).await;
    assert!(shown.is_empty(), "codes shown again");
    let kept = e.entry("view").await.unwrap().factors.recovery.unwrap().digests;
    assert_eq!(
        kept.len(),
        digests.len() - 1,
        "the code given was used up, the others kept"
    );
    assert!(kept.iter().all(|d| digests.contains(d)));
    remove(&e, "view", (PASSWORD, &codes[2]), FactorKind::Totp, "")
        .await
        .unwrap();

    let left = remove(&e, "view", (PASSWORD, &codes[3]), FactorKind::Passkey, "AQIDBA")
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
    let entry = e.entry("view").await.unwrap();
    assert_eq!(entry.version(), 1, "written as a password-only entry again");
    assert_eq!(entry.not_before, e.clock.now_ts(), "sessions ended");
}
