//! Which URLs the CLI talks to: https anywhere, plain http only to the loopback.
//!
//! The same rule holds for `--issuer` and for every endpoint the discovery document names, so a
//! document cannot send a refresh token over plain http to another host.

use url::{Host, Url};

use super::error::AuthError;

/// A checked issuer URL, as given but without a trailing `/` (the `iss` of the tokens).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerUrl(String);

impl IssuerUrl {
    /// Checks `--issuer`: an absolute https URL (or http to the loopback), no user info, query
    /// or fragment.
    ///
    /// # Errors
    /// [`AuthError::BadUrl`] or [`AuthError::InsecureUrl`] naming `--issuer`.
    pub fn parse(raw: &str) -> Result<Self, AuthError> {
        let trimmed = raw.trim_end_matches('/');
        let url = check_url("--issuer", trimmed)?;
        let bad = |reason: &str| AuthError::BadUrl {
            field: "--issuer",
            url: raw.to_owned(),
            reason: reason.to_owned(),
        };
        if url.query().is_some() || url.fragment().is_some() {
            return Err(bad("an issuer URL has no query or fragment"));
        }
        Ok(Self(trimmed.to_owned()))
    }

    /// The URL as the tokens' `iss` carries it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The OpenID Connect discovery document's URL.
    pub fn discovery_url(&self) -> String {
        format!("{}/.well-known/openid-configuration", self.0)
    }
}

impl std::fmt::Display for IssuerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks one URL against the transport rule: absolute, `https`, or `http` to the loopback only;
/// no user info.
///
/// # Errors
/// [`AuthError::BadUrl`] or [`AuthError::InsecureUrl`] naming `field`.
pub fn check_url(field: &'static str, raw: &str) -> Result<Url, AuthError> {
    let bad = |reason: String| AuthError::BadUrl {
        field,
        url: raw.to_owned(),
        reason,
    };
    let url = Url::parse(raw).map_err(|e| bad(e.to_string()))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("a URL with user info is refused".into()));
    }
    let host = url.host().ok_or_else(|| bad("the URL has no host".into()))?;
    match url.scheme() {
        "https" => Ok(url),
        "http" if is_loopback(&host) => Ok(url),
        "http" => Err(AuthError::InsecureUrl {
            field,
            url: raw.to_owned(),
        }),
        other => Err(bad(format!("scheme {other:?} is not https"))),
    }
}

/// Whether a host is the loopback: `localhost`, 127.0.0.0/8 or `::1`.
pub fn is_loopback(host: &Host<&str>) -> bool {
    match host {
        Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        Host::Ipv4(ip) => ip.is_loopback(),
        Host::Ipv6(ip) => ip.is_loopback(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn accepts_https_and_drops_a_trailing_slash() {
        let u = IssuerUrl::parse("https://ichor.example.com/").unwrap();
        assert_eq!(u.as_str(), "https://ichor.example.com");
        assert_eq!(
            u.discovery_url(),
            "https://ichor.example.com/.well-known/openid-configuration"
        );
    }

    #[test]
    fn accepts_plain_http_to_every_loopback_form() {
        for u in [
            "http://127.0.0.1:8080",
            "http://127.3.4.5",
            "http://[::1]:9000",
            "http://localhost:1234",
            "http://LOCALHOST",
        ] {
            assert!(IssuerUrl::parse(u).is_ok(), "{u}");
        }
    }

    #[test]
    fn refuses_plain_http_to_any_other_host() {
        for u in [
            "http://ichor.example.com",
            "http://10.0.0.1",
            "http://[::2]",
            "http://localhost.evil.com",
            "http://128.0.0.1",
        ] {
            let e = IssuerUrl::parse(u).unwrap_err();
            assert!(matches!(e, AuthError::InsecureUrl { .. }), "{u}: {e}");
            assert!(e.to_string().contains("--issuer"), "{e}");
        }
    }

    #[test]
    fn refuses_other_schemes_user_info_query_and_fragment() {
        for u in [
            "ftp://x.example",
            "https://user:pw@x.example",
            "https://x.example/?a=b",
            "https://x.example/#f",
            "not a url",
        ] {
            assert!(
                matches!(IssuerUrl::parse(u), Err(AuthError::BadUrl { .. })),
                "{u}"
            );
        }
    }
}
