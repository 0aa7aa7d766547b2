//! What the in-process tests share: the issuer in process over a memory store, a manual clock
//! and keys made by the controller's own timeline, with its request helpers, all from the test
//! kit (`ichor_testkit::issuer`), under the names the tests use.

pub use ichor_testkit::issuer::{
    clock::ManualClock,
    harness::*,
    keys::{first_document, realize, timeline_settings},
    store::MemoryStore,
};
pub use ichor_testkit::jwt::{claims, header as jose_header};

use std::sync::Arc;

use axum::http::StatusCode;
use jiff::SignedDuration;

/// Users `name(0)`, `name(1)`, … `name(count - 1)`, viewers, each with one `ichor-cli` refresh
/// family `fam-<i>` started at the harness's start; their refresh tokens, in that order.
pub fn users_with_one_family(h: &Harness, count: usize, name: impl Fn(usize) -> String) -> Vec<String> {
    (0..count)
        .map(|i| {
            let (user, fam) = (name(i), format!("fam-{i}"));
            let entry = cli_family_entry(
                &password_hash(),
                start() - SignedDuration::from_hours(24),
                &fam,
                start(),
            );
            let family = entry.family(&fam).expect("family").clone();
            h.store.add_user(&user, &["viewer"], Some(entry));
            h.mint_refresh(&user, &fam, &family)
        })
        .collect()
}

/// A refresh grant presenting the garbage token `garbage.<n>.token`: the answer's status.
pub async fn garbage_refresh(h: &Harness, n: usize) -> StatusCode {
    h.refresh(&format!("garbage.{n}.token"), "ichor-cli", None)
        .await
        .status
}

/// Refreshes the families `due` at once, `tokens[i]` each, asserting that every grant is
/// answered 200 (`what(i)` names the family in a failure), and keeps each new refresh token in
/// `tokens`. Returns how many were refreshed.
pub async fn refresh_together(
    h: &Arc<Harness>,
    tokens: &mut [String],
    due: Vec<usize>,
    what: impl Fn(usize) -> String,
) -> usize {
    let replies = futures::future::join_all(due.iter().map(|&i| {
        let (h, token) = (Arc::clone(h), tokens[i].clone());
        async move { h.refresh(&token, "ichor-cli", None).await }
    }))
    .await;
    let refreshed = due.len();
    for (i, reply) in due.into_iter().zip(replies) {
        assert_eq!(reply.status, StatusCode::OK, "{}: {}", what(i), reply.text());
        tokens[i] = reply.json()["refresh_token"]
            .as_str()
            .expect("refresh_token")
            .to_owned();
    }
    refreshed
}

/// A second step refused as every wrong answer is: 401 `access_denied`, the same sentence whatever
/// factor was tried.
pub fn refused_as_wrong(reply: &Reply) {
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text());
    assert_eq!(reply.error(), "access_denied");
    assert_eq!(
        reply.json()["error_description"],
        "The code is incorrect or was used already."
    );
}
