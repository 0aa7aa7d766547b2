//! Text that came from a server (a user's display name, an e-mail, a role, an error message),
//! made safe to print on a terminal: every control character — Unicode category `Cc`, the C0
//! set with `ESC`, `DEL` and the C1 set with its single-character `CSI` — is written as its
//! escape (`\u{1b}`), so no server can move the cursor, retitle the window, clear the screen,
//! forge a line of a table or answer a terminal query in the user's name.
//!
//! The issuer already refuses such characters in every field it stores; this is the client's own
//! guard against a server that does not.

use std::borrow::Cow;

/// `text` with every control character escaped (`ESC` → `\u{1b}`, a newline → `\n`).
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    escape_where(text, char::is_control)
}

/// `text` with every control character but the newline escaped: for messages of several lines.
pub fn escape_controls_but_newlines(text: &str) -> Cow<'_, str> {
    escape_where(text, |c| c.is_control() && c != '\n')
}

/// JSON text with `DEL` and the C1 controls written as `\u00XX` (JSON encoders escape only the
/// C0 set). Still the same JSON value: these characters occur only inside strings.
pub fn escape_json_controls(json: &str) -> Cow<'_, str> {
    if !json.chars().any(|c| ('\u{7f}'..='\u{9f}').contains(&c)) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if ('\u{7f}'..='\u{9f}').contains(&c) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn escape_where(text: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn escapes_c0_del_and_c1_and_keeps_other_text_borrowed() {
        assert_eq!(
            escape_controls("a\u{1b}]0;x\u{7}b\u{9b}2J\u{7f}\n"),
            "a\\u{1b}]0;x\\u{7}b\\u{9b}2J\\u{7f}\\n"
        );
        assert!(matches!(escape_controls("Ann Bø 安"), Cow::Borrowed(_)));
        assert_eq!(escape_controls_but_newlines("a\nb\u{1b}"), "a\nb\\u{1b}");
    }

    #[test]
    fn json_keeps_its_value_without_raw_c1_characters() {
        let json = serde_json::to_string(&serde_json::json!({"n": "a\u{9b}b\u{7f}\u{1b}"})).unwrap();
        let escaped = escape_json_controls(&json);
        assert!(!escaped.chars().any(char::is_control), "{escaped}");
        let back: serde_json::Value = serde_json::from_str(&escaped).unwrap();
        assert_eq!(back["n"], "a\u{9b}b\u{7f}\u{1b}");
    }
}
