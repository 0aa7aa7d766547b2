//! The informational texts of a user — `displayName` and `email` — as every writer checks them:
//! the `UserService` API, the `IchorUser` admission webhook and the CRD's own CEL rules. They
//! are printed by terminals (`ichor user list`) and browsers, so a control character (an
//! `ESC` that starts a terminal escape sequence, a C1 `CSI`, a newline that forges a table row)
//! is refused wherever a user is written.
//!
//! "Control character" is Unicode's general category `Cc` (U+0000–U+001F, U+007F–U+009F):
//! Rust's [`char::is_control`] and RE2's `\p{Cc}`, which the apiserver's CEL `matches` uses,
//! so the API, the webhook and the CRD refuse the same strings.

/// The longest display name, in UTF-8 bytes.
pub const MAX_DISPLAY_NAME_BYTES: usize = 256;
/// The longest e-mail address, in UTF-8 bytes (RFC 5321's path limit).
pub const MAX_EMAIL_BYTES: usize = 254;

/// The CRD's CEL rule of a text field: no control character (RE2 `\p{Cc}`, the same set as
/// [`char::is_control`]).
pub const NO_CONTROL_CHARACTERS_CEL: &str = r"!self.matches('\\p{Cc}')";
/// The CRD's CEL rule of `email`: no control character and no space (RE2 `\p{Z}` with `\p{Cc}`
/// is Unicode's `White_Space`, [`char::is_whitespace`]'s set, plus the control characters).
pub const NO_CONTROL_CHARACTERS_OR_SPACES_CEL: &str = r"!self.matches('[\\p{Cc}\\p{Z}]')";

/// Why an informational text is refused. The message follows the field's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// Longer than its bound.
    #[error("is {len} bytes, at most {max} are allowed")]
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// Holds a control character.
    #[error("must not contain control characters")]
    ControlCharacter,
    /// An e-mail address with a space.
    #[error("must not contain spaces")]
    Space,
}

/// An informational text: at most `max` UTF-8 bytes, no control character.
///
/// # Errors
/// [`TextError::TooLong`] or [`TextError::ControlCharacter`].
pub fn check_text(value: &str, max: usize) -> Result<(), TextError> {
    if value.len() > max {
        return Err(TextError::TooLong {
            len: value.len(),
            max,
        });
    }
    if value.chars().any(char::is_control) {
        return Err(TextError::ControlCharacter);
    }
    Ok(())
}

/// A display name: at most [`MAX_DISPLAY_NAME_BYTES`], no control character.
///
/// # Errors
/// As [`check_text`].
pub fn check_display_name(value: &str) -> Result<(), TextError> {
    check_text(value, MAX_DISPLAY_NAME_BYTES)
}

/// An e-mail address: at most [`MAX_EMAIL_BYTES`], no control character, no space.
///
/// # Errors
/// As [`check_text`], or [`TextError::Space`].
pub fn check_email(value: &str) -> Result<(), TextError> {
    check_text(value, MAX_EMAIL_BYTES)?;
    if value.chars().any(char::is_whitespace) {
        return Err(TextError::Space);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_every_c0_and_c1_control_and_del_and_takes_other_text() {
        for c in (0u32..0x20).chain(0x7f..0xa0) {
            let c = char::from_u32(c).unwrap_or_default();
            let text = format!("Ann{c}B");
            assert_eq!(
                check_display_name(&text),
                Err(TextError::ControlCharacter),
                "{c:?}"
            );
            assert_eq!(check_email(&text), Err(TextError::ControlCharacter), "{c:?}");
        }
        assert_eq!(check_display_name("Ann Bø 安"), Ok(()));
        assert_eq!(check_email("ann@example.com"), Ok(()));
        assert_eq!(check_email("ann b@example.com"), Err(TextError::Space));
        assert_eq!(check_email("ann\u{3000}b@example.com"), Err(TextError::Space));
    }

    #[test]
    fn bounds_bytes_not_characters() {
        assert_eq!(check_display_name(&"x".repeat(256)), Ok(()));
        assert_eq!(
            check_display_name(&"é".repeat(129)),
            Err(TextError::TooLong { len: 258, max: 256 })
        );
        assert_eq!(
            TextError::TooLong { len: 255, max: 254 }.to_string(),
            "is 255 bytes, at most 254 are allowed"
        );
    }
}
