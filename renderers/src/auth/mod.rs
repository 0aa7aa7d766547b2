//! `pkg/ichorauth`: the pure rules of Ichor's own users, shared by the issuer, the `UserService`
//! API, the `IchorUser` admission webhook and the CLI.
//!
//! - [`hash`]: argon2id password hashing and verification, with the dummy path for unknown users;
//! - [`policy`]: the password policy and the password generator;
//! - [`credentials`]: the entry of one user in the Secret `ichor-user-credentials` (format,
//!   strict parser, `notBefore`, refresh-token families and their rotation);
//! - [`roles`]: built-in roles, role-name validation, the grant rule and the last-enabled-admin
//!   rule, with the exact refusal messages;
//! - [`user_name`]: the validated user name;
//! - [`text`]: the informational texts (display name, e-mail): bounded, no control characters;
//! - [`password`]: the in-memory password type with a redacting `Debug`;
//! - [`totp`]: authenticator-app codes (RFC 6238): the secret, the `otpauth://` URI, the check
//!   with its replay rule;
//! - [`recovery`]: recovery codes: making them, their digests, using one once;
//! - [`second_factor_policy`]: who must have a second factor, and whether a sign-in may get a
//!   token for an audience meanwhile;
//! - [`backoff`]: the schedule of the back-off after failed sign-ins and second factors.
//!
//! Nothing here reads a clock, the network, the environment or a random source: the salt of a
//! new hash and the random bytes of a generated password, a TOTP secret or recovery codes are
//! passed in by the caller.

pub mod backoff;
mod base32;
pub mod credentials;
pub mod hash;
pub mod password;
pub mod policy;
pub mod recovery;
pub mod roles;
pub mod second_factor_policy;
pub mod text;
pub mod totp;
pub mod user_name;

pub use password::Password;
pub use user_name::UserName;
