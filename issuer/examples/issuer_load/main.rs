//! Load generator for `hack/bench/issuer.sh` (loopback only).
//!
//! - `setup --dir D --users N`: writes a test CA and leaf (`D/ca.crt`, `D/tls/`), `D/keys.json`
//!   (the controller's key timeline with a committed RSA-3072 test key), N `IchorUser` files
//!   (`bench-0` … ) and `D/state/credentials.json` with one argon2id hash for all of them (and
//!   `--families F` refresh families per user).
//! - `refresh`: signs in `--clients` users (one refresh family each), then every client rotates
//!   its own family as fast as it can for `--seconds`; prints throughput and latency. With
//!   `--seeded D` every client rotates its share of the families `setup --families` seeded in D
//!   instead of signing in.
//! - `busy-user`: one user with `--sessions` sessions beside as many users with one session
//!   each, in turn, flat out with immediate retries on a 503 (`hack/bench/user-queue.sh`; see
//!   [`busy_user`]).
//! - `logins`: `--count` full sign-ins (authorize + password) started at once; prints timings.
//! - `sign-ins`: full sign-ins of distinct users started at a steady `--rate` for `--seconds`,
//!   with `--factor` answering the second step with the code of the users' authenticator app
//!   (`setup --factors`); prints p50/p99 (`hack/bench/second-factor.sh`).
//! - `mixed --issuer A --issuer B --pid PA --pid PB`: a paced mixed workload (discovery, JWKS,
//!   refresh grants, sign-ins and `UserService/WhoAmI` over gRPC-web), each request alternating
//!   between the issuers, for `--seconds`; then the same again with a login flood added
//!   (`--flood` tasks signing in as fast as they can, a third with wrong passwords). Known
//!   devices (users who signed in once before and send the device cookie they got) sign in at a
//!   steady pace in both phases. Prints a markdown report: throughput and p50/p99/p999 per
//!   endpoint and phase, each issuer's VmHWM after each phase, and the known devices' sign-ins
//!   beside the flood's shed count.
//! - `nat --issuer A`: `--users` users signed in from one forwarded address, each family
//!   refreshing once per `--period` seconds for `--seconds`, then garbage refresh tokens and
//!   wrong passwords from the same address; prints a markdown report (`hack/bench/nat.sh`).
//! - `sign --threads T --seconds S`: the issuer's RS256 signer flat out on T threads: the
//!   signing limit refresh grants are set against (see [`sign`]).
//! - `control-plane --dir D`: a real kube-apiserver and etcd on loopback with Ichor's chart
//!   installed and the users of `setup` in it, for issuers run with `--store kube`
//!   (`hack/bench/kube-store.sh`; see [`cluster`]).
//! - `serve-memory --dir D --port P`: the same OIDC router as the binary, over the same TLS
//!   serving code, but on an in-memory store with one version per user (no file, no fsync, no
//!   cross-user conflicts): the issuer's own ceiling, with the store taken out.
//!
//! Every request carries an `X-Forwarded-For` address (the issuer is started with
//! `--trusted-proxy 127.0.0.0/8`). The per-source buckets count only failures, so valid traffic
//! passes them whatever its address; the loads still spread theirs over many addresses so that
//! the wrong passwords of the flood are not all charged to one source (`nat` keeps to one).

//!
//! The pieces: `args` (the flags), `setup`, `client` (the HTTP client and the sign-in it
//! drives), one module per load (`refresh`, `logins`, `sign_ins`, `mixed`, `nat`, `sign`), `stats` (percentiles),
//! and the two servers it can stand up: `memory` (`serve-memory`) and [`cluster`]
//! (`control-plane`).

use anyhow::Result;
use args::{Cli, Command};
use clap::Parser as _;
use std::time::Duration;

mod args;
mod busy_user;
mod client;
mod cluster;
mod logins;
mod memory;
mod mixed;
mod nat;
mod refresh;
mod setup;
mod sign;
mod sign_ins;
mod stats;

#[tokio::main]
async fn main() -> Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    match Cli::parse().command {
        Command::Setup {
            dir,
            users,
            families,
            factors,
        } => setup::setup(&dir, users, families, factors),
        Command::Refresh {
            issuer,
            ca,
            clients,
            seconds,
            seeded,
        } => {
            refresh::refresh(
                &issuer,
                &ca,
                clients,
                Duration::from_secs(seconds),
                seeded.as_deref(),
            )
            .await
        }
        Command::BusyUser {
            issuer,
            ca,
            sessions,
            first_user,
            seconds,
        } => busy_user::run(&issuer, &ca, sessions, first_user, Duration::from_secs(seconds)).await,
        Command::Logins { issuer, ca, count } => logins::logins(&issuer, &ca, count).await,
        Command::SignIns {
            issuer,
            ca,
            first_user,
            rate,
            seconds,
            factor,
        } => {
            let pace = sign_ins::Pace {
                first_user,
                rate,
                duration: Duration::from_secs(seconds),
            };
            sign_ins::run(&issuer, &ca, pace, factor).await
        }
        Command::Mixed {
            issuer,
            ca,
            pid,
            seconds,
            flood,
        } => mixed::run(&issuer, &ca, &pid, Duration::from_secs(seconds), flood).await,
        Command::Nat {
            issuer,
            ca,
            users,
            period,
            seconds,
            garbage,
            wrong_passwords,
        } => {
            let nat = nat::Nat {
                users,
                period: Duration::from_secs(period),
                duration: Duration::from_secs(seconds),
                garbage,
                wrong_passwords,
            };
            nat::run(&issuer, &ca, nat).await
        }
        Command::ServeMemory { dir, port } => memory::run(&dir, port).await,
        Command::Sign { threads, seconds } => sign::run(threads, seconds),
        Command::ControlPlane { dir, layout } => cluster::run(&dir, layout).await,
    }
}
