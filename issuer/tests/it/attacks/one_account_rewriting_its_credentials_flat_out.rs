//! One signed-in account rewrites its own credentials as fast as its password checks allow:
//! `ChangeOwnPassword` to the same password again and again, and sign-ins whose second step
//! answers right every time. Each write puts the user's credentials into the store (on
//! Kubernetes its Secret into etcd), and the password gate alone let one account write about as
//! often as argon2id runs. Both paths spend one budget per user and replica
//! (`BucketPolicy::ACCOUNT_WRITES`): the account is held to it, others are not, and a wrong
//! answer, from someone holding only the password, spends nothing of the owner's.

use super::composed::{composed, peer};
use axum::http::{StatusCode, header};
use ichor_issuer::oidc::limits::BucketPolicy;
use ichor_renderers::auth::totp;
use ichor_testkit::issuer::harness::{
    PASSWORD, TOTP_SECRET, UI_REDIRECT, factor_entry_with_hash, password_hash,
};
use jiff::SignedDuration;
use tonic::Code;

/// The changes of the budget's burst.
const BURST: usize = BucketPolicy::ACCOUNT_WRITES.burst as usize;
/// The seconds one change takes to come back.
const REFILL_SECONDS: i64 = (1.0 / BucketPolicy::ACCOUNT_WRITES.per_second) as i64;

#[tokio::test]
async fn one_account_changing_its_password_flat_out_is_held_to_its_budget_and_no_one_else_is() {
    let c = composed().await;
    let mut written = 0;
    let refused = loop {
        match c.change_own_password("bob", peer(1), PASSWORD, PASSWORD).await {
            Ok(_) => written += 1,
            Err(status) => break status,
        }
        assert!(
            written <= BURST,
            "bob changed his password {written} times at once"
        );
    };
    assert_eq!(written, BURST, "the burst is a person's whole day of changes");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("too often") && refused.message().contains(&format!("{REFILL_SECONDS} s")),
        "{refused:?}"
    );
    // Held before the password check: a wrong old password gets the same answer, not "does not
    // match" (no argon2id ran, and nothing is counted against bob).
    let wrong = c
        .change_own_password("bob", peer(1), "not bob's password", PASSWORD)
        .await
        .expect_err("held");
    assert_eq!(wrong.code(), Code::ResourceExhausted, "{wrong:?}");

    // carol, on the same address, has a budget of her own.
    c.change_own_password("carol", peer(1), PASSWORD, PASSWORD)
        .await
        .expect("carol is not held back by bob");

    // One change comes back per period.
    c.h.clock.advance(SignedDuration::from_secs(REFILL_SECONDS));
    c.change_own_password("bob", peer(1), PASSWORD, PASSWORD)
        .await
        .expect("one change a period");
    c.change_own_password("bob", peer(1), PASSWORD, PASSWORD)
        .await
        .expect_err("and only one");
}

/// dave: the same user in the service's store and in the issuer's, with an authenticator app.
/// Returns dave's recovery codes.
async fn with_dave(c: &super::composed::Composed) -> Vec<String> {
    let hash = password_hash();
    c.env.seed("dave", &["viewer"], false, Some(&hash), false).await;
    let (entry, codes) = factor_entry_with_hash(&hash);
    c.h.store.add_user("dave", &["viewer"], Some(entry));
    codes
}

/// dave's password step: its second-factor ticket.
async fn password_step(c: &super::composed::Composed) -> String {
    let ticket = c.h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let reply = c.h.login_from(peer(7), &ticket, "dave", PASSWORD, None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    reply.json()["factor_ticket"]
        .as_str()
        .expect("a second step")
        .to_owned()
}

fn app_code(c: &super::composed::Composed) -> String {
    totp::code_at(TOTP_SECRET, c.h.clock.now_ts()).expect("code")
}

#[tokio::test]
async fn the_second_step_and_the_service_spend_one_budget_and_a_held_answer_keeps_its_ticket() {
    let c = composed().await;
    let codes = with_dave(&c).await;
    let available = || {
        c.h.issuer
            .account_writes()
            .available("dave", c.h.clock.now_ts())
            .expect("a budget")
    };
    // Someone with dave's password alone answers wrong: each wrong answer is written (the
    // factor's failures), so each is one change.
    let thief = password_step(&c).await;
    for _ in 0..3 {
        let reply = c.h.factor(&thief, "000000").await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text());
    }
    assert_eq!(available(), (BURST - 3) as f64);
    // dave's right answer is one change.
    let ticket = password_step(&c).await;
    let reply = c.h.factor(&ticket, &app_code(&c)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(available(), (BURST - 4) as f64);

    // The rest of the budget through the service.
    for i in 4..BURST {
        c.change_own_password("dave", peer(1), PASSWORD, PASSWORD)
            .await
            .unwrap_or_else(|e| panic!("change {i}: {e:?}"));
    }
    c.change_own_password("dave", peer(1), PASSWORD, PASSWORD)
        .await
        .expect_err("the budget is spent");

    // Every answer is now held alike, right or wrong, unwritten: 429 with the wait, so a held
    // answer tells nothing of the code, and the ticket and the code stay good.
    let ticket = password_step(&c).await;
    let before = c.h.store.entry("dave").expect("entry");
    let wrong = c.h.factor(&ticket, "000000").await;
    let right = c.h.factor(&ticket, &codes[0]).await;
    for held in [&wrong, &right] {
        assert_eq!(held.status, StatusCode::TOO_MANY_REQUESTS, "{}", held.text());
        assert_eq!(held.error(), "slow_down", "{}", held.text());
        assert_eq!(
            held.headers
                .get(header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok()),
            Some(REFILL_SECONDS.to_string().as_str()),
            "{:?}",
            held.headers
        );
    }
    assert_eq!(wrong.body, right.body, "a held answer tells the code's worth");
    assert!(
        c.h.store.entry("dave").expect("entry") == before,
        "a held answer was written"
    );
    c.h.clock.advance(SignedDuration::from_secs(REFILL_SECONDS));
    let reply = c.h.factor(&ticket, &codes[0]).await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "the held ticket, once a change came back: {}",
        reply.text()
    );
    let entry = c.h.store.entry("dave").expect("entry");
    assert_eq!(
        entry.factors.recovery.as_ref().expect("codes").digests.len(),
        9,
        "the accepted answer was written"
    );
}

/// `r` from dave's address.
fn with_peer<T>(mut r: tonic::Request<T>) -> tonic::Request<T> {
    r.extensions_mut().insert(axum::extract::ConnectInfo(peer(1)));
    r
}

/// A self-service call of the service (its `password`, `code`) as dave from `peer(1)`: the
/// recovery codes it made (none for a removal).
async fn factor_call(
    c: &super::composed::Composed,
    call: &str,
    password: &str,
    code: &str,
) -> Result<Vec<String>, tonic::Status> {
    use ichor_issuer::api::proto::{
        FactorKind, RegenerateRecoveryCodesRequest, RemoveFactorRequest,
        user_service_server::UserService as _,
    };
    let t = crate::api_common::token("dave", c.h.clock.now_ts());
    match call {
        "regenerate" => c
            .api
            .regenerate_recovery_codes(with_peer(crate::api_common::req(
                &t,
                RegenerateRecoveryCodesRequest {
                    password: password.into(),
                    code: code.into(),
                },
            )))
            .await
            .map(|r| r.into_inner().recovery_codes),
        _ => c
            .api
            .remove_factor(with_peer(crate::api_common::req(
                &t,
                RemoveFactorRequest {
                    password: password.into(),
                    kind: FactorKind::Totp as i32,
                    passkey_id: String::new(),
                    code: code.into(),
                },
            )))
            .await
            .map(|_| Vec::new()),
    }
}

#[tokio::test]
async fn every_self_service_change_spends_the_budget_and_only_a_write_keeps_it_spent() {
    let c = composed().await;
    let codes = with_dave(&c).await;
    let (entry, _) = factor_entry_with_hash(&password_hash());
    c.env.put_entry("dave", Some(&entry)).await;
    let available = || {
        c.h.issuer
            .account_writes()
            .available("dave", c.h.clock.now_ts())
            .expect("a budget")
    };
    // A wrong password writes nothing: the change goes back.
    let wrong = factor_call(&c, "regenerate", "not dave's password", &codes[0])
        .await
        .expect_err("a wrong password");
    assert_eq!(wrong.code(), Code::InvalidArgument, "{wrong:?}");
    assert_eq!(available(), BURST as f64);
    // A wrong code is written (the factor's failures): it stays spent.
    let wrong = factor_call(&c, "regenerate", PASSWORD, "000000")
        .await
        .expect_err("a wrong code");
    assert_eq!(wrong.code(), Code::InvalidArgument, "{wrong:?}");
    assert_eq!(available(), (BURST - 1) as f64);
    // A change is one.
    let fresh = factor_call(&c, "regenerate", PASSWORD, &codes[1])
        .await
        .expect("new recovery codes");
    assert_eq!(available(), (BURST - 2) as f64);
    // So is a password change, each over a code of the factor (the new recovery codes, one each).
    for (i, code) in fresh.iter().enumerate() {
        c.change_own_password_with_code("dave", peer(1), (PASSWORD, PASSWORD), code)
            .await
            .unwrap_or_else(|e| panic!("change {i}: {e:?}"));
        assert_eq!(available(), (BURST - 3 - i) as f64);
    }
    // The rest of the budget, taken as the writes of other changes would take it.
    let now = c.h.clock.now_ts();
    for _ in 2 + fresh.len()..BURST {
        drop(
            c.h.issuer
                .account_writes()
                .reserve("dave", now)
                .expect("within the burst")
                .writing(),
        );
    }
    assert_eq!(available(), 0.0);
    // Spent: each sibling call is held before its password check, the code left unused.
    let code = totp::code_at(TOTP_SECRET, c.h.clock.now_ts()).expect("code");
    for call in ["regenerate", "remove"] {
        let held = factor_call(&c, call, PASSWORD, &code)
            .await
            .expect_err("the budget is spent");
        assert_eq!(held.code(), Code::ResourceExhausted, "{call}: {held:?}");
        assert!(held.message().contains("too often"), "{call}: {held:?}");
    }
    c.h.clock.advance(SignedDuration::from_secs(REFILL_SECONDS));
    let code = totp::code_at(TOTP_SECRET, c.h.clock.now_ts()).expect("code");
    factor_call(&c, "remove", PASSWORD, &code)
        .await
        .expect("one change a period");
    assert!(c.env.entry("dave").await.expect("entry").factors.totp.is_none());
}
