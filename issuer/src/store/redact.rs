//! Turning a failure to read a stored credentials entry into a [`StoreError::Corrupt`] whose
//! reason names the field and the problem but never repeats the entry's content (a hash, a family
//! id), because the reason ends up in logs and error responses.

use ichor_renderers::auth::credentials::{CredentialsError, MAX_ENTRY_BYTES};

use super::StoreError;

/// The [`StoreError::Corrupt`] for `user`'s unreadable entry.
pub(crate) fn corrupt(user: &str, error: &CredentialsError) -> StoreError {
    let reason = match error {
        CredentialsError::TooLarge { got, .. } => {
            format!("the entry is {got} bytes, at most {MAX_ENTRY_BYTES} are allowed")
        }
        CredentialsError::NotJson { message, .. } => format!("not a JSON object: {}", redact_quoted(message)),
        CredentialsError::MissingVersion { .. } => "field \"v\" is missing".to_owned(),
        CredentialsError::UnsupportedVersion { got, .. } => {
            format!("field \"v\": unsupported version {}", redact_quoted(got))
        }
        CredentialsError::Shape { message, .. } => redact_quoted(message),
        CredentialsError::Invalid { field, problem, .. } => format!("{field}: {problem}"),
    };
    StoreError::Corrupt {
        user: user.to_owned(),
        reason,
    }
}

/// `message` with the content of every double-quoted run replaced by `…`, honouring backslash
/// escapes inside the run. Parser messages quote offending *values* in double quotes
/// (`invalid type: string "…"`) and field *names* in back-quotes, so names survive and values
/// do not. Capped at 300 characters.
pub(crate) fn redact_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(300));
    let mut in_quotes = false;
    let mut escaped = false;
    for c in message.chars() {
        if in_quotes {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_quotes = false;
                out.push_str("…\"");
            }
        } else {
            out.push(c);
            if c == '"' {
                in_quotes = true;
            }
        }
        if out.chars().count() >= 300 {
            out.push('…');
            break;
        }
    }
    if in_quotes {
        out.push_str("…\"");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_value_is_replaced_and_a_backquoted_field_name_kept() {
        let got =
            redact_quoted(r#"invalid type: string "$argon2id$se\"cret", expected `mustChange` at line 1"#);
        assert_eq!(got, "invalid type: string \"…\", expected `mustChange` at line 1");
    }

    #[test]
    fn an_unterminated_quote_still_hides_the_rest() {
        assert_eq!(redact_quoted("value \"abc"), "value \"…\"");
    }

    #[test]
    fn a_shape_error_from_a_real_entry_does_not_carry_the_hash() {
        let json = concat!(
            r#"{"v":1,"hash":"$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2g","#,
            r#""notBefore":"2026-01-01T00:00:00Z","mustChange":"$argon2id$LEAK"}"#
        )
        .as_bytes();
        let err = match ichor_renderers::auth::credentials::CredentialsEntry::parse("alice", json) {
            Err(e) => e,
            Ok(_) => panic!("the entry must be refused"),
        };
        let shown = corrupt("alice", &err).to_string();
        assert!(!shown.contains("LEAK"), "{shown}");
        assert!(!shown.contains("c2FsdHNhbHQ"), "{shown}");
        assert!(shown.contains("alice"), "{shown}");
    }
}
