//! The pure rules of the protocol: the two fixed clients and their redirect URIs, audiences,
//! scopes, PKCE, and the parsing of `application/x-www-form-urlencoded` parameters with
//! repeated parameters refused (RFC 6749 section 3.1).
//!
//! Nothing here does I/O; the handlers call these and map the errors to responses.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The command-line client (`ichor auth`).
pub use ichor_renderers::contract::CLI_CLIENT_ID as CLIENT_CLI;
/// The audience of tokens the kube-apiserver accepts.
pub use ichor_renderers::contract::KUBE_AUDIENCE as AUD_KUBE;
/// The audience of tokens for Ichor's own API.
pub use ichor_renderers::contract::UI_AUDIENCE as AUD_UI;
/// The browser client (the SPA).
pub use ichor_renderers::contract::UI_CLIENT_ID as CLIENT_UI;
/// The longest `state` or `nonce`, in bytes.
pub const MAX_OPAQUE_LEN: usize = 512;
/// The longest parameter value of any request, in bytes.
pub const MAX_PARAM_LEN: usize = 8 * 1024;
/// The most parameters a request may carry.
pub const MAX_PARAMS: usize = 32;

/// One of the two fixed public clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// `ichor-ui`: redirect exactly `<externalURL>/auth/callback`, audience `ichor-ui` only.
    Ui,
    /// `ichor-cli`: redirect `http://127.0.0.1:<port>/callback` (RFC 8252 7.3, 8.3).
    Cli,
}

impl Client {
    /// The client for a `client_id`, if it is one of the two.
    pub fn from_id(id: &str) -> Option<Client> {
        match id {
            CLIENT_UI => Some(Client::Ui),
            CLIENT_CLI => Some(Client::Cli),
            _ => None,
        }
    }

    /// The `client_id`.
    pub fn id(self) -> &'static str {
        match self {
            Client::Ui => CLIENT_UI,
            Client::Cli => CLIENT_CLI,
        }
    }
}

/// Whether `uri` is an allowed redirect URI of `client`. `ui_redirect` is
/// `<externalURL>/auth/callback`. The comparison is exact (no normalisation): `localhost` is not
/// `127.0.0.1`, `https` is not `http`, and nothing may follow the path. The CLI's
/// `http://127.0.0.1:<port>/callback` takes any port, or none.
pub fn redirect_uri_allowed(client: Client, uri: &str, ui_redirect: &str) -> bool {
    match client {
        Client::Ui => uri == ui_redirect,
        Client::Cli => {
            // A loopback redirect without a port is one of "any port" too (RFC 8252 7.3).
            if uri == "http://127.0.0.1/callback" {
                return true;
            }
            let Some(rest) = uri.strip_prefix("http://127.0.0.1:") else {
                return false;
            };
            let Some(port) = rest.strip_suffix("/callback") else {
                return false;
            };
            !port.is_empty()
                && port.len() <= 5
                && port.bytes().all(|b| b.is_ascii_digit())
                && !port.starts_with('0')
                && port.parse::<u16>().is_ok()
        }
    }
}

/// Why an `audience` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AudienceError {
    /// Not `ichor-ui` or `ichor-kube`.
    #[error("audience: must be ichor-ui or ichor-kube")]
    Unknown,
    /// The browser client asked for the Kubernetes audience.
    #[error("audience: the ichor-ui client may only ask for ichor-ui")]
    NotForClient,
}

/// The audience of the ID tokens: the requested one if allowed, else the client's default
/// (`ichor-ui` for the browser, `ichor-kube` for the CLI).
///
/// # Errors
/// An unknown audience, or `ichor-kube` for the browser client.
pub fn resolve_audience(client: Client, requested: Option<&str>) -> Result<&'static str, AudienceError> {
    match (client, requested) {
        (Client::Ui, None) => Ok(AUD_UI),
        (Client::Cli, None) => Ok(AUD_KUBE),
        (_, Some(AUD_UI)) => Ok(AUD_UI),
        (Client::Cli, Some(AUD_KUBE)) => Ok(AUD_KUBE),
        (Client::Ui, Some(AUD_KUBE)) => Err(AudienceError::NotForClient),
        (_, Some(_)) => Err(AudienceError::Unknown),
    }
}

/// Why a `scope` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// `openid` is missing.
    #[error("scope: must contain openid")]
    NoOpenid,
    /// A scope token has characters RFC 6749 section 3.3 does not allow.
    #[error("scope: holds a character outside %x21 / %x23-5B / %x5D-7E")]
    Syntax,
}

/// Parses `scope`: `openid` is required, `offline_access` asks for a refresh token, other
/// scopes are ignored (OIDC Core 3.1.2.1). Returns whether `offline_access` was asked for.
///
/// # Errors
/// No `openid`, or a malformed token.
pub fn parse_scope(scope: &str) -> Result<bool, ScopeError> {
    let tokens: Vec<&str> = scope.split(' ').filter(|t| !t.is_empty()).collect();
    let ok = |b: u8| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b);
    if tokens.iter().any(|t| !t.bytes().all(ok)) {
        return Err(ScopeError::Syntax);
    }
    if !tokens.contains(&"openid") {
        return Err(ScopeError::NoOpenid);
    }
    Ok(tokens.contains(&"offline_access"))
}

/// Why PKCE parameters were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PkceError {
    /// No `code_challenge`.
    #[error("code_challenge: required (PKCE S256)")]
    MissingChallenge,
    /// The method is absent (which means `plain`) or not `S256`.
    #[error("code_challenge_method: must be S256 (plain is refused; an absent method means plain)")]
    Method,
    /// The challenge is not 43 base64url characters (a SHA-256 digest).
    #[error("code_challenge: must be the 43-character base64url SHA-256 of the verifier")]
    Challenge,
    /// The verifier is not 43 to 128 characters of `[A-Za-z0-9-._~]`.
    #[error("code_verifier: must be 43 to 128 characters of A-Z, a-z, 0-9, '-', '.', '_', '~'")]
    Verifier,
    /// The verifier does not match the challenge.
    #[error("code_verifier: does not match the code_challenge")]
    Mismatch,
}

/// Checks the authorization request's PKCE parameters (RFC 7636 4.3; S256 only).
///
/// # Errors
/// See [`PkceError`].
pub fn check_challenge(challenge: Option<&str>, method: Option<&str>) -> Result<String, PkceError> {
    let challenge = challenge.ok_or(PkceError::MissingChallenge)?;
    if method != Some("S256") {
        return Err(PkceError::Method);
    }
    let b64url = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    if challenge.len() != 43 || !challenge.bytes().all(b64url) || URL_SAFE_NO_PAD.decode(challenge).is_err() {
        return Err(PkceError::Challenge);
    }
    Ok(challenge.to_owned())
}

/// Checks a `code_verifier` against the code's challenge: the RFC 7636 4.1 alphabet and length,
/// then `BASE64URL(SHA256(verifier)) == challenge` compared in constant time.
///
/// # Errors
/// [`PkceError::Verifier`] or [`PkceError::Mismatch`].
pub fn check_verifier(verifier: &str, challenge: &str) -> Result<(), PkceError> {
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
    if !(43..=128).contains(&verifier.len()) || !verifier.bytes().all(unreserved) {
        return Err(PkceError::Verifier);
    }
    let computed = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    if bool::from(computed.as_bytes().ct_eq(challenge.as_bytes())) {
        Ok(())
    } else {
        Err(PkceError::Mismatch)
    }
}

/// The S256 challenge of a verifier (for clients and tests).
pub fn s256_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Whether `value` is an acceptable `state` or `nonce`: 1 to 512 visible ASCII characters or
/// spaces (RFC 6749 VSCHAR).
pub fn opaque_ok(value: &str) -> bool {
    (1..=MAX_OPAQUE_LEN).contains(&value.len()) && value.bytes().all(|b| (0x20..=0x7e).contains(&b))
}

/// Whether a request's `Content-Type` is `application/x-www-form-urlencoded` (parameters such as
/// `charset` allowed), the only body the authorization, token and revocation endpoints read.
pub fn is_form(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/x-www-form-urlencoded"))
}

/// Why a parameter list was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamsError {
    /// More than [`MAX_PARAMS`] parameters.
    #[error("the request has more than {MAX_PARAMS} parameters")]
    TooMany,
    /// A value longer than [`MAX_PARAM_LEN`].
    #[error("parameter {0}: longer than {MAX_PARAM_LEN} bytes")]
    TooLong(String),
}

/// Decoded form or query parameters, in order, repeated names kept so they can be refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

/// A parameter given more than once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parameter {0}: given more than once")]
pub struct Repeated(pub &'static str);

impl Params {
    /// Decodes `a=b&c=d` (query string or form body).
    ///
    /// # Errors
    /// Too many parameters, or one too long.
    pub fn parse(input: &[u8]) -> Result<Params, ParamsError> {
        let mut pairs = Vec::new();
        for (k, v) in url::form_urlencoded::parse(input) {
            if pairs.len() >= MAX_PARAMS {
                return Err(ParamsError::TooMany);
            }
            if v.len() > MAX_PARAM_LEN || k.len() > 64 {
                return Err(ParamsError::TooLong(k.chars().take(64).collect()));
            }
            pairs.push((k.into_owned(), v.into_owned()));
        }
        Ok(Params { pairs })
    }

    /// The value of `name`; an empty value counts as absent (RFC 6749 section 3.1).
    ///
    /// # Errors
    /// [`Repeated`] when the name appears more than once.
    pub fn get(&self, name: &'static str) -> Result<Option<&str>, Repeated> {
        let mut found = self.pairs.iter().filter(|(k, _)| k == name);
        let first = found.next();
        if found.next().is_some() {
            return Err(Repeated(name));
        }
        Ok(first.map(|(_, v)| v.as_str()).filter(|v| !v.is_empty()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UI: &str = "https://ichor.example.com/auth/callback";

    #[test]
    fn the_cli_redirect_is_the_literal_loopback_address_with_any_port_or_none() {
        assert!(redirect_uri_allowed(
            Client::Cli,
            "http://127.0.0.1:8400/callback",
            UI
        ));
        assert!(redirect_uri_allowed(Client::Cli, "http://127.0.0.1/callback", UI));
        assert!(redirect_uri_allowed(
            Client::Cli,
            "http://127.0.0.1:65535/callback",
            UI
        ));
        for bad in [
            "http://localhost:8400/callback",
            "https://127.0.0.1:8400/callback",
            "http://127.0.0.1:8400/callback/x",
            "http://127.0.0.1:8400/callback?x=1",
            "http://127.0.0.1:8400/callback#f",
            "http://127.0.0.1/callback/",
            "http://127.0.0.1:/callback",
            "http://127.0.0.1:65536/callback",
            "http://127.0.0.1:08400/callback",
            "http://127.0.0.1:+80/callback",
            "http://[::1]:8400/callback",
            "http://127.0.0.1:8400@evil.example/callback",
        ] {
            assert!(!redirect_uri_allowed(Client::Cli, bad, UI), "{bad}");
        }
    }

    #[test]
    fn the_ui_redirect_must_match_exactly() {
        assert!(redirect_uri_allowed(Client::Ui, UI, UI));
        for bad in [
            "https://ichor.example.com/auth/callback/",
            "http://ichor.example.com/auth/callback",
            "https://ICHOR.example.com/auth/callback",
            "https://ichor.example.com/auth/callback?x",
            "http://127.0.0.1:8400/callback",
        ] {
            assert!(!redirect_uri_allowed(Client::Ui, bad, UI), "{bad}");
        }
    }

    #[test]
    fn audiences_follow_the_unit_2_rules() {
        assert_eq!(resolve_audience(Client::Ui, None), Ok(AUD_UI));
        assert_eq!(resolve_audience(Client::Cli, None), Ok(AUD_KUBE));
        assert_eq!(resolve_audience(Client::Cli, Some(AUD_UI)), Ok(AUD_UI));
        assert_eq!(
            resolve_audience(Client::Ui, Some(AUD_KUBE)),
            Err(AudienceError::NotForClient)
        );
        assert_eq!(
            resolve_audience(Client::Cli, Some("kubernetes")),
            Err(AudienceError::Unknown)
        );
    }

    #[test]
    fn scope_needs_openid_and_offline_access_asks_for_a_refresh_token() {
        assert_eq!(parse_scope("openid"), Ok(false));
        assert_eq!(parse_scope("openid offline_access email"), Ok(true));
        assert_eq!(parse_scope("offline_access"), Err(ScopeError::NoOpenid));
        assert_eq!(parse_scope("openid \"x"), Err(ScopeError::Syntax));
    }

    #[test]
    fn pkce_accepts_only_s256_and_checks_the_verifier_alphabet() {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = s256_challenge(verifier);
        assert_eq!(
            challenge, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
            "RFC 7636 appendix B"
        );
        assert_eq!(
            check_challenge(Some(&challenge), Some("S256")),
            Ok(challenge.clone())
        );
        assert_eq!(check_challenge(Some(&challenge), None), Err(PkceError::Method));
        assert_eq!(
            check_challenge(Some(&challenge), Some("plain")),
            Err(PkceError::Method)
        );
        assert_eq!(
            check_challenge(None, Some("S256")),
            Err(PkceError::MissingChallenge)
        );
        assert_eq!(
            check_challenge(Some("short"), Some("S256")),
            Err(PkceError::Challenge)
        );
        assert_eq!(check_verifier(verifier, &challenge), Ok(()));
        assert_eq!(
            check_verifier(&"a".repeat(43), &challenge),
            Err(PkceError::Mismatch)
        );
        assert_eq!(
            check_verifier(&"a".repeat(42), &challenge),
            Err(PkceError::Verifier)
        );
        assert_eq!(
            check_verifier(&"a".repeat(129), &challenge),
            Err(PkceError::Verifier)
        );
        assert_eq!(
            check_verifier(&format!("{}+", "a".repeat(43)), &challenge),
            Err(PkceError::Verifier)
        );
    }

    #[test]
    fn a_repeated_parameter_is_refused_and_an_empty_one_is_absent() {
        let params = Params::parse(b"a=1&a=2&b=&c=x%20y").expect("parse");
        assert_eq!(params.get("a"), Err(Repeated("a")));
        assert_eq!(params.get("b"), Ok(None));
        assert_eq!(params.get("c"), Ok(Some("x y")));
        let many = (0..40).map(|i| format!("p{i}=1")).collect::<Vec<_>>().join("&");
        assert_eq!(Params::parse(many.as_bytes()), Err(ParamsError::TooMany));
    }
}
