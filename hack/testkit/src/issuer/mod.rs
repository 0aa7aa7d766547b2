//! What the tests of the issuer and of its clients share about the issuer itself (with the
//! `issuer` feature): signing-key fixtures, the in-memory store, the manual clock, the issuer
//! in process ([`harness`]), the sign-in driver over HTTPS ([`sign_in`]), HTTPS on loopback, and a test's log lines ([`logs`]).
//!
//! Use it from integration tests (`tests/`) only: there the issuer crate the kit links is the
//! one the test links; a unit test inside the issuer's own `src/` would see a second copy.

pub mod authenticator;
pub mod clock;
pub mod grpc;
pub mod harness;
pub mod https;
pub mod keys;
pub mod kube;
pub mod logs;
pub mod passkey;
pub mod sign_in;
pub mod store;
