//! What the password attacks run against: an in-process issuer and, beside it, the
//! `UserService` sharing its password limits as `ichor-issuer` composes them, on one clock (the
//! harness's); and the memory of a process as the kernel counts it.
#![allow(dead_code)]

use std::{net::SocketAddr, sync::Arc};

use crate::api_common::{Env, FakeVerifier, authorizer, env, token};
use ichor_issuer::{
    api::{
        Clock, LocalAccessReview, UserApi,
        proto::{ChangeOwnPasswordRequest, ChangeOwnPasswordResponse, user_service_server::UserService as _},
    },
    store::local::LocalStore,
};
use ichor_testkit::issuer::harness::{Harness, ISSUER, api_config, password_hash};

/// The issuer, the service beside it, and the local store the service reads.
pub struct Composed {
    pub h: Arc<Harness>,
    pub api: UserApi<LocalStore, LocalAccessReview, FakeVerifier>,
    /// The service's store (users seeded with the harness's password).
    pub env: Env,
}

/// alice (admin), bob and carol (viewers) in the service's store, each with the harness's
/// password; the issuer's own store has alice and carol with it too.
pub async fn composed() -> Composed {
    composed_with(Harness::new()).await
}

/// As [`composed`], over the issuer of `h`.
pub async fn composed_with(h: Harness) -> Composed {
    let h = Arc::new(h);
    let env = env();
    let hash = password_hash();
    env.seed("alice", &["admin"], false, Some(&hash), false).await;
    env.seed("bob", &["viewer"], false, Some(&hash), false).await;
    env.seed("carol", &["viewer"], false, Some(&hash), false).await;
    let mut config = api_config(ISSUER);
    config.passwords = h.issuer.password_limits();
    let api = UserApi::new(
        Arc::clone(&env.store),
        LocalAccessReview::new(authorizer(None)),
        FakeVerifier,
        Arc::clone(&h.clock) as Arc<dyn Clock>,
        config,
    );
    Composed { h, api, env }
}

impl Composed {
    /// `ChangeOwnPassword` of `user` from `peer`, with a token issued now (no code: a user
    /// without a second factor).
    pub async fn change_own_password(
        &self,
        user: &str,
        peer: SocketAddr,
        old: &str,
        new: &str,
    ) -> Result<ChangeOwnPasswordResponse, tonic::Status> {
        self.change_own_password_with_code(user, peer, (old, new), "")
            .await
    }

    /// [`Composed::change_own_password`] with `code`, a code of the user's second factor.
    pub async fn change_own_password_with_code(
        &self,
        user: &str,
        peer: SocketAddr,
        (old, new): (&str, &str),
        code: &str,
    ) -> Result<ChangeOwnPasswordResponse, tonic::Status> {
        let mut request = crate::api_common::req(
            &token(user, self.h.clock.now_ts()),
            ChangeOwnPasswordRequest {
                old_password: old.to_owned(),
                new_password: new.to_owned(),
                code: code.to_owned(),
            },
        );
        request.extensions_mut().insert(axum::extract::ConnectInfo(peer));
        self.api
            .change_own_password(request)
            .await
            .map(tonic::Response::into_inner)
    }
}

/// A client address of its own for each `i`.
pub fn peer(i: usize) -> SocketAddr {
    format!("203.0.{}.{}:40000", 113 + i / 250, i % 250)
        .parse()
        .expect("addr")
}

/// One MiB, in the KiB `/proc` counts in.
pub const MIB: u64 = 1024;

/// A `/proc/<pid>/status` field in KiB (`pid` may be `self`).
pub fn status_kib(pid: &str, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// The resident set now, KiB.
pub fn rss_kib(pid: &str) -> u64 {
    status_kib(pid, "VmRSS")
}

/// The peak resident set since [`reset_peak`] (or the start), KiB.
pub fn peak_rss_kib(pid: &str) -> u64 {
    status_kib(pid, "VmHWM")
}

/// Starts the peak resident set over from the current one (Linux `clear_refs` 5).
pub fn reset_peak(pid: &str) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("clear_refs");
}
