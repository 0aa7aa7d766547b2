//! Attacks on the issuer, one file per attack, each written from the attack's steps: the test
//! runs the attack and asserts that it fails.

mod forged_forwarded_for;
mod named_account_lockout;
mod shared_address_garbage;
