//! [`Password`]: a plain-text password held in memory, kept out of logs.
//!
//! Every function of [`crate::auth`] that takes a password takes this type, so a password cannot
//! reach a `Debug` log line, a `Display` or a serializer by accident: `Debug` prints a fixed
//! placeholder (not even the length), and there is no `Display`, `Serialize` or `Clone`.

use std::fmt;

/// A plain-text password. `Debug` is redacted, and the buffer is overwritten when it is dropped.
///
/// The overwrite on drop is best effort (a plain write kept alive with [`std::hint::black_box`];
/// this crate forbids `unsafe`, so no volatile write): copies made before the value reached this
/// type, for example by a request decoder, are not covered.
pub struct Password(String);

impl Password {
    /// Wraps a password received from a user, a file or a generator.
    pub fn new(password: impl Into<String>) -> Self {
        Self(password.into())
    }

    /// The password itself, for hashing or verifying. Keep the borrow short; never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The password's length in UTF-8 bytes, the unit the password policy counts in.
    pub fn len_bytes(&self) -> usize {
        self.0.len()
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

impl Drop for Password {
    fn drop(&mut self) {
        let mut bytes = std::mem::take(&mut self.0).into_bytes();
        bytes.iter_mut().for_each(|b| *b = 0);
        std::hint::black_box(&bytes);
    }
}

impl From<String> for Password {
    fn from(password: String) -> Self {
        Self(password)
    }
}

impl From<&str> for Password {
    fn from(password: &str) -> Self {
        Self(password.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::Password;

    #[test]
    fn debug_output_never_contains_the_password() {
        let password = Password::new("correct horse battery staple");
        let printed = format!("{password:?} {:#?}", password);
        assert!(!printed.contains("horse"), "{printed}");
        assert!(printed.contains("redacted"), "{printed}");
    }

    #[test]
    fn counts_length_in_utf8_bytes() {
        assert_eq!(Password::new("ééé").len_bytes(), 6);
        assert_eq!(Password::from("abc").expose(), "abc");
    }
}
