//! Go's `net/url.Parse`, emulated for the checks the kube-apiserver makes on issuer and
//! discovery URLs: the lower-cased scheme, whether user info is present (even an empty `@`),
//! the raw query, the fragment, and the parse errors with Go's exact text.
//!
//! Emulated exactly (from the Go source): control characters, `missing protocol scheme`,
//! `first path segment in URL cannot contain colon`, `missing ']' in host`,
//! `invalid port ":x" after host`, `invalid character " " in host name`,
//! `net/url: invalid userinfo`, `invalid URL escape "%zz"` (host, zone, user info, path and
//! fragment), opaque URLs (`https:foo`) and the single trailing `?` (`ForceQuery`).
//!
//! # Approximation
//! Newer Go releases may further validate an IP literal inside `[...]`; this emulation checks
//! only the brackets, the port and the escapes, as Go did up to 1.24.

use super::goquote::quote;

/// What the validator needs to know about a parsed URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoUrl {
    /// The scheme, lower-cased (empty when there is none).
    pub scheme: String,
    /// Whether an `@` introduced user info in the authority.
    pub has_user: bool,
    /// The raw query (empty for none and for a lone trailing `?`).
    pub raw_query: String,
    /// The unescaped fragment.
    pub fragment: String,
}

/// Go's `*url.Error` from `url.Parse`, with Go's exact text: `parse "<url>": <reason>` (the
/// kube-apiserver's message for an issuer or discovery URL it refuses).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("parse {}: {reason}", quote(.url))]
pub struct GoUrlError {
    /// The URL parsed (without its fragment when the fragment was not the problem).
    pub url: String,
    /// Go's reason, e.g. `missing protocol scheme`.
    pub reason: String,
}

/// `url.Parse(raw)`.
///
/// # Errors
/// Go's `*url.Error`: the URL does not parse.
pub fn parse(raw: &str) -> Result<GoUrl, GoUrlError> {
    let (u, frag) = match raw.split_once('#') {
        Some((u, f)) => (u, Some(f)),
        None => (raw, None),
    };
    let mut url = parse_inner(u).map_err(|reason| GoUrlError {
        url: u.to_owned(),
        reason,
    })?;
    if let Some(frag) = frag.filter(|f| !f.is_empty()) {
        url.fragment = unescape(frag, Mode::Fragment).map_err(|reason| GoUrlError {
            url: raw.to_owned(),
            reason,
        })?;
    }
    Ok(url)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    Zone,
    UserPassword,
    Fragment,
}

fn parse_inner(raw: &str) -> Result<GoUrl, String> {
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    let mut url = GoUrl {
        scheme: String::new(),
        has_user: false,
        raw_query: String::new(),
        fragment: String::new(),
    };
    if raw == "*" {
        return Ok(url);
    }
    let (scheme, rest) = get_scheme(raw)?;
    url.scheme = scheme.to_ascii_lowercase();
    let mut rest = rest;
    if rest.ends_with('?') && rest.matches('?').count() == 1 {
        rest = &rest[..rest.len() - 1];
    } else if let Some((r, q)) = rest.split_once('?') {
        rest = r;
        url.raw_query = q.to_string();
    }
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            // A rootless path is opaque: nothing more is parsed.
            return Ok(url);
        }
        let segment = rest.split('/').next().unwrap_or("");
        if segment.contains(':') {
            return Err("first path segment in URL cannot contain colon".into());
        }
    }
    if (!url.scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//") {
        let after = &rest[2..];
        let (authority, path) = match after.find('/') {
            Some(i) => (&after[..i], &after[i..]),
            None => (after, ""),
        };
        url.has_user = parse_authority(authority)?;
        rest = path;
    }
    unescape(rest, Mode::Path)?;
    Ok(url)
}

fn get_scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' => {
                if i == 0 {
                    return Ok(("", raw));
                }
            }
            b':' => {
                if i == 0 {
                    return Err("missing protocol scheme".into());
                }
                return Ok((&raw[..i], &raw[i + 1..]));
            }
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// Returns whether user info is present.
fn parse_authority(authority: &str) -> Result<bool, String> {
    let at = authority.rfind('@');
    let host = match at {
        Some(i) => &authority[i + 1..],
        None => authority,
    };
    parse_host(host)?;
    let Some(i) = at else { return Ok(false) };
    let userinfo = &authority[..i];
    if !userinfo.bytes().all(valid_userinfo_byte) {
        return Err("net/url: invalid userinfo".into());
    }
    match userinfo.split_once(':') {
        None => {
            unescape(userinfo, Mode::UserPassword)?;
        }
        Some((user, pass)) => {
            unescape(user, Mode::UserPassword)?;
            unescape(pass, Mode::UserPassword)?;
        }
    }
    Ok(true)
}

fn valid_userinfo_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.' | b'_' | b':' | b'~' | b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*'
        )
        || matches!(b, b'+' | b',' | b';' | b'=' | b'%' | b'@')
}

fn parse_host(host: &str) -> Result<(), String> {
    if host.starts_with('[') {
        let Some(i) = host.rfind(']') else {
            return Err("missing ']' in host".into());
        };
        let colon_port = &host[i + 1..];
        if !valid_optional_port(colon_port) {
            return Err(format!("invalid port {} after host", quote(colon_port)));
        }
        if let Some(zone) = host[..i].find("%25") {
            unescape(&host[..zone], Mode::Host)?;
            unescape(&host[zone..i], Mode::Zone)?;
            unescape(&host[i..], Mode::Host)?;
            return Ok(());
        }
    } else if let Some(i) = host.rfind(':') {
        let colon_port = &host[i..];
        if !valid_optional_port(colon_port) {
            return Err(format!("invalid port {} after host", quote(colon_port)));
        }
    }
    unescape(host, Mode::Host)?;
    Ok(())
}

fn valid_optional_port(port: &str) -> bool {
    if port.is_empty() {
        return true;
    }
    match port.strip_prefix(':') {
        Some(digits) => digits.bytes().all(|b| b.is_ascii_digit()),
        None => false,
    }
}

fn unhex(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        b'A'..=b'F' => b - b'A' + 10,
        _ => 0,
    }
}

/// `shouldEscape(c, encodeHost)` for ASCII bytes.
fn host_should_escape(c: u8) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    !matches!(
        c,
        b'!' | b'$'
            | b'&'
            | b'\''
            | b'('
            | b')'
            | b'*'
            | b'+'
            | b','
            | b';'
            | b'='
            | b':'
            | b'['
            | b']'
            | b'<'
            | b'>'
            | b'"'
            | b'-'
            | b'_'
            | b'.'
            | b'~'
    )
}

/// Go's `unescape(s, mode)`; returns the unescaped text (lossy for invalid UTF-8, which only
/// matters for the non-emptiness of a fragment).
fn unescape(s: &str, mode: Mode) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                if i + 2 >= b.len() || !b[i + 1].is_ascii_hexdigit() || !b[i + 2].is_ascii_hexdigit() {
                    let end = (i + 3).min(b.len());
                    let bad = String::from_utf8_lossy(&b[i..end]);
                    return Err(format!("invalid URL escape {}", quote(&bad)));
                }
                let seq = &s[i..i + 3];
                if mode == Mode::Host && unhex(b[i + 1]) < 8 && seq != "%25" {
                    return Err(format!("invalid URL escape {}", quote(seq)));
                }
                let v = (unhex(b[i + 1]) << 4) | unhex(b[i + 2]);
                if mode == Mode::Zone && seq != "%25" && v != b' ' && v < 0x80 && host_should_escape(v) {
                    return Err(format!("invalid URL escape {}", quote(seq)));
                }
                out.push(v);
                i += 3;
            }
            c => {
                if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && host_should_escape(c) {
                    return Err(format!(
                        "invalid character {} in host name",
                        quote(&(c as char).to_string())
                    ));
                }
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(raw: &str) -> GoUrl {
        match parse(raw) {
            Ok(u) => u,
            Err(e) => panic!("{raw}: {e}"),
        }
    }

    #[test]
    fn lower_cases_the_scheme() {
        assert_eq!(ok("HTTPS://x").scheme, "https");
        assert_eq!(ok("issuer.example.com").scheme, "");
    }

    #[test]
    fn detects_user_info_even_an_empty_at_sign() {
        assert!(ok("https://user@x").has_user);
        assert!(ok("https://u:p@x").has_user);
        assert!(ok("https://@x").has_user);
        assert!(!ok("https://x/@y").has_user);
        assert!(!ok("https:user@x").has_user, "opaque URLs have no authority");
    }

    #[test]
    fn a_lone_trailing_question_mark_or_hash_is_not_a_query_or_fragment() {
        let u = ok("https://x?");
        assert_eq!((u.raw_query.as_str(), u.fragment.as_str()), ("", ""));
        assert_eq!(ok("https://x#").fragment, "");
        assert_eq!(ok("https://x?a=b").raw_query, "a=b");
        assert_eq!(ok("https://x??").raw_query, "?");
        assert_eq!(ok("https://x#%41").fragment, "A");
    }

    #[test]
    fn reports_go_parse_errors_with_go_text() {
        let cases = [
            (
                "https://issuer-url:invalid-port",
                r#"parse "https://issuer-url:invalid-port": invalid port ":invalid-port" after host"#,
            ),
            ("://x", r#"parse "://x": missing protocol scheme"#),
            (
                "https://exa mple.com",
                r#"parse "https://exa mple.com": invalid character " " in host name"#,
            ),
            (
                "https://x/%zz",
                r#"parse "https://x/%zz": invalid URL escape "%zz""#,
            ),
            (
                "https://x/a#%z",
                r#"parse "https://x/a#%z": invalid URL escape "%z""#,
            ),
            ("https://[::1", r#"parse "https://[::1": missing ']' in host"#),
            (
                "https://a b@x",
                r#"parse "https://a b@x": net/url: invalid userinfo"#,
            ),
            (
                "https://x\n",
                r#"parse "https://x\n": net/url: invalid control character in URL"#,
            ),
            ("a:b/c", "ok"),
            (
                "1a:b",
                r#"parse "1a:b": first path segment in URL cannot contain colon"#,
            ),
            (
                "https://%41.com",
                r#"parse "https://%41.com": invalid URL escape "%41""#,
            ),
        ];
        for (raw, want) in cases {
            match parse(raw) {
                Ok(_) => assert_eq!(want, "ok", "{raw}"),
                Err(e) => assert_eq!(e.to_string(), want, "{raw}"),
            }
        }
    }

    #[test]
    fn accepts_urls_without_a_host() {
        assert_eq!(ok("https://").scheme, "https");
        assert_eq!(ok("https:foo").scheme, "https");
        assert_eq!(ok("https://[fe80::1%25en0]:8443/x").scheme, "https");
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_arbitrary_text(raw in "\\PC{0,64}") {
            let _ = parse(&raw);
        }

        #[test]
        fn never_panics_on_url_shaped_text(raw in "[a-zA-Z]{0,6}:?/{0,3}[a-z@:%\\[\\]0-9 ?#./]{0,40}") {
            let _ = parse(&raw);
        }
    }
}
