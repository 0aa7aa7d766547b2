//! Request validation: every refusal is [`ApiError::InvalidArgument`] naming the request field.
//! All of a request is checked before anything is written.

use ichor_renderers::auth::{
    Password, UserName,
    policy::check_password,
    roles::validate_roles,
    text::{self as user_text, TextError},
};

use super::error::ApiError;

/// The longest display name, in UTF-8 bytes (the CRD's bound).
pub const MAX_DISPLAY_NAME_BYTES: usize = user_text::MAX_DISPLAY_NAME_BYTES;
/// The longest e-mail address, in UTF-8 bytes (the CRD's bound, RFC 5321's path limit).
pub const MAX_EMAIL_BYTES: usize = user_text::MAX_EMAIL_BYTES;
/// The longest `ca_file` path, in bytes.
pub const MAX_CA_FILE_BYTES: usize = 4096;

/// A user name (`field` is the request field, `name` for most calls).
pub fn user_name(field: &'static str, name: &str) -> Result<UserName, ApiError> {
    if name.is_empty() {
        return Err(ApiError::invalid(field, "is required"));
    }
    UserName::parse(name).map_err(|e| {
        let message = e.to_string();
        let reason = message.strip_prefix("metadata.name: ").unwrap_or(&message);
        ApiError::invalid(field, reason)
    })
}

/// A role list: at most 16, each `^[a-z][a-z0-9-]{0,30}$`, no repeats.
pub fn roles(roles: &[String]) -> Result<(), ApiError> {
    validate_roles(roles).map_err(|e| {
        // "spec.roles[1]: why" → field "roles[1]", reason "why".
        let message = e.to_string();
        let message = message.strip_prefix("spec.").unwrap_or(&message);
        match message.split_once(": ") {
            Some((field, reason)) => ApiError::invalid(field, reason),
            None => ApiError::invalid("roles", message),
        }
    })
}

/// A refused informational text as the refusal naming `field`.
fn refused(field: &'static str) -> impl Fn(TextError) -> ApiError {
    move |e| ApiError::invalid(field, e.to_string())
}

/// A display name (at most 256 bytes, no control characters: the rule the webhook and the CRD
/// share, `ichor_renderers::auth::text`).
pub fn display_name(value: &str) -> Result<(), ApiError> {
    user_text::check_display_name(value).map_err(refused("display_name"))
}

/// An e-mail address (at most 254 bytes, no control characters, no spaces).
pub fn email(value: &str) -> Result<(), ApiError> {
    user_text::check_email(value).map_err(refused("email"))
}

/// A new password (12 to 128 UTF-8 bytes).
pub fn new_password(field: &'static str, password: &Password) -> Result<(), ApiError> {
    check_password(password).map_err(|e| {
        let message = e.to_string();
        let reason = message.strip_prefix("password: ").unwrap_or(&message);
        ApiError::invalid(field, reason)
    })
}

/// The `ca_file` of `GetMyKubeconfig`: a path of at most 4096 bytes without control characters.
pub fn ca_file(value: &str) -> Result<(), ApiError> {
    user_text::check_text(value, MAX_CA_FILE_BYTES).map_err(refused("ca_file"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn message(e: ApiError) -> String {
        e.to_string()
    }

    #[test]
    fn names_the_field_of_a_bad_user_name() {
        assert_eq!(message(user_name("name", "").unwrap_err()), "name: is required");
        let m = message(user_name("name", "Alice").unwrap_err());
        assert!(
            m.starts_with("name: user name \"Alice\" is not a lower-case DNS label"),
            "{m}"
        );
        let m = message(user_name("name", &"a".repeat(64)).unwrap_err());
        assert!(m.starts_with("name: ") && m.contains("at most 63"), "{m}");
        assert_eq!(user_name("name", &"a".repeat(63)).unwrap().as_str().len(), 63);
    }

    #[test]
    fn names_the_position_of_a_bad_role() {
        let m = message(roles(&["viewer".into(), "Admin".into()]).unwrap_err());
        assert!(
            m.starts_with("roles[1]: \"Admin\" is not a valid role name"),
            "{m}"
        );
        let m = message(roles(&vec!["a".to_owned(); 17]).unwrap_err());
        assert_eq!(m, "roles: 17 roles, at most 16 are allowed");
    }

    #[test]
    fn bounds_display_name_and_email() {
        assert!(display_name(&"x".repeat(256)).is_ok());
        assert_eq!(
            message(display_name(&"x".repeat(257)).unwrap_err()),
            "display_name: is 257 bytes, at most 256 are allowed"
        );
        assert!(email(&"x".repeat(254)).is_ok());
        assert_eq!(
            message(email(&"x".repeat(255)).unwrap_err()),
            "email: is 255 bytes, at most 254 are allowed"
        );
        assert!(message(display_name("a\nb").unwrap_err()).starts_with("display_name: "));
    }

    #[test]
    fn refuses_passwords_of_eleven_and_129_bytes_naming_the_field() {
        assert_eq!(
            message(new_password("new_password", &Password::new("a".repeat(11))).unwrap_err()),
            "new_password: must be at least 12 bytes (got 11)"
        );
        assert_eq!(
            message(new_password("password", &Password::new("a".repeat(129))).unwrap_err()),
            "password: must be at most 128 bytes (got 129)"
        );
        assert!(new_password("password", &Password::new("a".repeat(12))).is_ok());
    }
}
