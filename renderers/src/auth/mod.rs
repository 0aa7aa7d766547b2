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
//! - [`password`]: the in-memory password type with a redacting `Debug`.
//!
//! Nothing here reads a clock, the network, the environment or a random source: the salt of a
//! new hash and the random bytes of a generated password are passed in by the caller.

pub mod credentials;
pub mod hash;
pub mod password;
pub mod policy;
pub mod roles;
pub mod text;
pub mod user_name;

pub use password::Password;
pub use user_name::UserName;
