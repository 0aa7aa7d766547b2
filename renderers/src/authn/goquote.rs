//! Go's string quoting, so that error texts match the kube-apiserver's byte for byte.
//!
//! - [`quote`] is `strconv.Quote` (what `%q` prints): the field-error value of a plain string.
//! - [`json_string`] is `encoding/json`'s rendering of a string (HTML characters escaped): the
//!   field-error value of a named string type such as `audienceMatchPolicy`.
//!
//! # Approximation
//! Go decides what to escape with `unicode.IsPrint` (letters, marks, numbers, punctuation,
//! symbols and the ASCII space). Rust has no general-category table in `std`, so
//! [`is_go_printable`] escapes control characters, every space/separator other than U+0020,
//! the format characters, private-use code points and noncharacters. Code points that are
//! *unassigned* in Go's Unicode version are printed as-is here where Go would escape them.

use std::fmt::Write as _;

/// `strconv.Quote(s)`: a double-quoted Go string literal with Go's escapes.
pub fn quote(s: &str) -> String {
    quoted(s, |out, c| match c {
        '\u{7}' => out.push_str("\\a"),
        '\u{b}' => out.push_str("\\v"),
        c if is_go_printable(c) => out.push(c),
        c if (c as u32) < 0x20 || c == '\u{7f}' => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if (c as u32) < 0x10000 => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\U{:08x}", c as u32);
        }
    })
}

/// Go's `unicode.IsPrint`, approximated (see the module documentation).
pub fn is_go_printable(c: char) -> bool {
    let u = c as u32;
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    let format = matches!(u,
        0x00AD | 0x0600..=0x0605 | 0x061C | 0x06DD | 0x070F | 0x0890..=0x0891 | 0x08E2 | 0x180E
        | 0x200B..=0x200F | 0x2028..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF
        | 0xFFF9..=0xFFFB | 0x110BD | 0x110CD | 0x13430..=0x1343F | 0x1BCA0..=0x1BCA3
        | 0x1D173..=0x1D17A | 0xE0001 | 0xE0020..=0xE007F);
    let private_use = matches!(u, 0xE000..=0xF8FF | 0xF0000..=0xFFFFD | 0x100000..=0x10FFFD);
    let noncharacter = matches!(u, 0xFDD0..=0xFDEF) || (u & 0xFFFE) == 0xFFFE;
    !(format || private_use || noncharacter)
}

/// Go `encoding/json`'s rendering of a string: JSON escapes plus `<`, `>`, `&`, U+2028 and
/// U+2029 as `\u` escapes (Go's default HTML-safe encoder).
pub fn json_string(s: &str) -> String {
    quoted(s, |out, c| {
        if (c as u32) < 0x20 || is_html_special(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    })
}

/// Applies Go `encoding/json`'s HTML-safe escaping to JSON text produced by `serde_json`
/// (`<`, `>`, `&`, U+2028 and U+2029 can only occur inside strings there).
pub fn go_json_escape(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if is_html_special(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

/// `s` between double quotes, with the escapes `strconv.Quote` and `encoding/json` share
/// (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`); `other` writes every other character.
fn quoted(s: &str, other: impl Fn(&mut String, char)) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => other(&mut out, c),
        }
    }
    out.push('"');
    out
}

/// The characters Go's HTML-safe JSON encoder writes as `\u` escapes: `<`, `>`, `&`, U+2028 and
/// U+2029.
fn is_html_special(c: char) -> bool {
    matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_plain_ascii_like_go() {
        assert_eq!(quote("https://x"), r#""https://x""#);
        assert_eq!(quote(""), r#""""#);
    }

    #[test]
    fn escapes_quotes_backslashes_and_control_characters_like_go() {
        assert_eq!(quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote("\x07\x08\x0c\n\r\t\x0b"), r#""\a\b\f\n\r\t\v""#);
        assert_eq!(quote("\x01\x7f"), r#""\x01\x7f""#);
        assert_eq!(quote("\u{85}"), r#""\u0085""#);
    }

    #[test]
    fn keeps_printable_unicode_and_escapes_invisible_code_points() {
        assert_eq!(quote("héllo 世界 🎉"), "\"héllo 世界 🎉\"");
        assert_eq!(quote("a\u{a0}b"), r#""a\u00a0b""#);
        assert_eq!(quote("\u{200b}"), r#""\u200b""#);
        assert_eq!(quote("\u{feff}"), r#""\ufeff""#);
        assert_eq!(quote("\u{f0000}"), r#""\U000f0000""#);
    }

    #[test]
    fn renders_json_strings_with_go_html_escaping() {
        assert_eq!(json_string("MatchAll"), r#""MatchAll""#);
        assert_eq!(json_string("<a&b>"), r#""\u003ca\u0026b\u003e""#);
        assert_eq!(json_string("é\u{1}"), "\"é\\u0001\"");
    }
}
