//! The two ways to get tokens, shared by `ichor auth token` and `ichor auth login`: the
//! loopback login (authorization code + PKCE S256, `state`, `nonce`) and the refresh grant.
//! Both end in a [`CacheEntry`] ready to store.

use std::time::Duration;

use jiff::Timestamp;

use super::{
    cache::{CACHE_VERSION, CacheEntry, CacheKey, Endpoints},
    callback::CallbackServer,
    claims::{self, Expected},
    error::AuthError,
    issuer_url::{IssuerUrl, check_url},
    oidc::{OidcClient, TokenResponse},
    pkce::{Pkce, random_token},
    secret::Secret,
};

/// The client id the kubeconfigs name.
pub use ichor_renderers::contract::CLI_CLIENT_ID as DEFAULT_CLIENT_ID;
/// The audience the kube-apiserver accepts.
pub use ichor_renderers::contract::KUBE_AUDIENCE as DEFAULT_AUDIENCE;
/// The scope a login asks for by default (Ichor's issuer puts the groups in every ID token).
pub const DEFAULT_SCOPE: &str = "openid offline_access";
/// The scope for a site's own provider (the one the kubeconfigs of its users name).
pub use ichor_issuer::api::kubeconfig::EXTERNAL_SCOPE;
/// How long a login waits for the browser by default.
pub const DEFAULT_LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// Which login a command works on: a checked issuer, a client and an audience.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The issuer.
    pub issuer: IssuerUrl,
    /// The OAuth client id.
    pub client_id: String,
    /// The audience.
    pub audience: String,
    /// The scope asked for at the authorization endpoint ([`DEFAULT_SCOPE`] for Ichor).
    pub scope: String,
    /// The `prompt` parameter, if any (`consent`: a provider that grants `offline_access` only
    /// then, as OpenID Connect Core section 11 says, gives a refresh token).
    pub prompt: Option<String>,
}

impl Target {
    /// A login at `issuer` for `client_id` and `audience` with the default scope and no prompt.
    pub fn new(issuer: IssuerUrl, client_id: &str, audience: &str) -> Self {
        Target {
            issuer,
            client_id: client_id.to_owned(),
            audience: audience.to_owned(),
            scope: DEFAULT_SCOPE.to_owned(),
            prompt: None,
        }
    }

    /// The cache key of this login.
    pub fn key(&self) -> CacheKey {
        CacheKey {
            issuer: self.issuer.as_str().to_owned(),
            client_id: self.client_id.clone(),
            audience: self.audience.clone(),
        }
    }

    /// The `ichor auth login …` command that creates this login, with only the flags that
    /// differ from the defaults.
    pub fn login_command(&self) -> String {
        let mut cmd = format!("ichor auth login --issuer {}", self.issuer);
        if self.client_id != DEFAULT_CLIENT_ID {
            cmd.push_str(&format!(" --client-id {}", self.client_id));
        }
        if self.audience != DEFAULT_AUDIENCE {
            cmd.push_str(&format!(" --audience {}", self.audience));
        }
        if self.scope != DEFAULT_SCOPE {
            cmd.push_str(&format!(" --scope '{}'", self.scope));
        }
        if let Some(prompt) = &self.prompt {
            cmd.push_str(&format!(" --prompt {prompt}"));
        }
        cmd
    }
}

/// How a login behaves.
#[derive(Debug, Clone, Copy)]
pub struct LoginOptions {
    /// Try to open the system browser (the URL is printed either way).
    pub open_browser: bool,
    /// How long to wait for the browser to come back.
    pub timeout: Duration,
}

/// The authorization request URL. Pure.
///
/// # Errors
/// [`AuthError::BadUrl`] when the authorization endpoint does not parse.
pub fn authorize_url(
    endpoint: &str,
    target: &Target,
    redirect_uri: &str,
    state: &str,
    nonce: &str,
    challenge: &str,
) -> Result<String, AuthError> {
    let mut url = check_url("authorization_endpoint", endpoint)?;
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &target.client_id)
        .append_pair("redirect_uri", redirect_uri)
        .append_pair("scope", &target.scope)
        .append_pair("state", state)
        .append_pair("nonce", nonce)
        .append_pair("code_challenge", challenge)
        .append_pair("code_challenge_method", "S256")
        .append_pair("audience", &target.audience);
    if let Some(prompt) = &target.prompt {
        url.query_pairs_mut().append_pair("prompt", prompt);
    }
    Ok(url.into())
}

/// Turns a token response into a cache entry after checking the ID token against the login
/// (issuer, audience, `nonce` when one was sent, not expired at `now`). Without a new refresh
/// token (an issuer that does not rotate) the previous one is kept. Pure.
///
/// # Errors
/// [`AuthError::IdToken`] naming the claim.
pub fn entry_from(
    target: &Target,
    endpoints: Endpoints,
    tokens: TokenResponse,
    previous_refresh: Option<Secret>,
    nonce: Option<&str>,
    now: Timestamp,
) -> Result<CacheEntry, AuthError> {
    let bad = |reason: String| AuthError::IdToken {
        issuer: target.issuer.to_string(),
        reason,
    };
    let c = claims::decode_unverified(tokens.id_token.expose()).map_err(|e| bad(e.to_string()))?;
    claims::check(
        &c,
        Expected {
            issuer: target.issuer.as_str(),
            audience: &target.audience,
            nonce,
        },
        now,
    )
    .map_err(|e| bad(e.to_string()))?;
    Ok(CacheEntry {
        v: CACHE_VERSION,
        issuer: target.issuer.as_str().to_owned(),
        client_id: target.client_id.clone(),
        audience: target.audience.clone(),
        endpoints: Some(endpoints),
        subject: c.sub,
        groups: c.groups,
        id_token: tokens.id_token,
        id_token_exp: c.exp,
        refresh_token: tokens.refresh_token.or(previous_refresh),
    })
}

/// Runs a loopback login: discovery, listener, browser, code exchange.
///
/// # Errors
/// Any step's [`AuthError`]; [`AuthError::LoginTimeout`] when the browser never returns.
pub async fn login(
    client: &OidcClient,
    target: &Target,
    options: LoginOptions,
    now: Timestamp,
) -> Result<CacheEntry, AuthError> {
    let endpoints = client.discover(&target.issuer).await?;
    let server = CallbackServer::bind().await?;
    let redirect_uri = server.redirect_uri();
    let pkce = Pkce::generate()?;
    let state = random_token()?;
    let nonce = random_token()?;
    let url = authorize_url(
        &endpoints.authorization,
        target,
        &redirect_uri,
        &state,
        &nonce,
        &pkce.challenge,
    )?;
    eprintln!(
        "Sign in to {} in your browser as client {}, answering at {redirect_uri} (Ichor's sign-in \
         page names the same port). If no browser opens, open this URL:\n\n    {url}\n",
        target.issuer, target.client_id
    );
    if options.open_browser {
        open_browser(&url);
    }
    let code = tokio::time::timeout(options.timeout, server.wait(&state))
        .await
        .map_err(|_| AuthError::LoginTimeout {
            seconds: options.timeout.as_secs(),
        })??;
    let tokens = client
        .exchange_code(
            &endpoints.token,
            &target.client_id,
            &code,
            &redirect_uri,
            &pkce.verifier,
        )
        .await?;
    entry_from(target, endpoints, tokens, None, Some(&nonce), now)
}

/// Refreshes a cached login with its refresh token; discovery only when the cache has no
/// endpoints. The answer's refresh token (rotation) replaces the old one.
///
/// # Errors
/// Any step's [`AuthError`]; a dead refresh token is [`AuthError::is_invalid_grant`].
pub async fn refresh(
    client: &OidcClient,
    target: &Target,
    cached: &CacheEntry,
    now: Timestamp,
) -> Result<CacheEntry, AuthError> {
    let Some(refresh_token) = &cached.refresh_token else {
        return Err(AuthError::LoginRequired {
            issuer: target.issuer.to_string(),
            audience: target.audience.clone(),
            login_command: target.login_command(),
        });
    };
    let endpoints = match &cached.endpoints {
        Some(e) => e.clone(),
        None => client.discover(&target.issuer).await?,
    };
    let tokens = client
        .refresh(
            &endpoints.token,
            &target.client_id,
            &target.audience,
            refresh_token,
        )
        .await?;
    entry_from(target, endpoints, tokens, Some(refresh_token.clone()), None, now)
}

/// Opens `url` in the system browser, best effort: the URL is printed anyway.
pub fn open_browser(url: &str) {
    let program = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let spawned = std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if spawned.is_err() {
        eprintln!("(could not start {program}; open the URL above yourself)");
    }
}

/// A single-threaded runtime for the network path; the fast path never builds one.
///
/// # Errors
/// [`AuthError::Runtime`].
pub fn runtime() -> Result<tokio::runtime::Runtime, AuthError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(AuthError::Runtime)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};

    use super::*;

    fn target() -> Target {
        Target::new(
            IssuerUrl::parse("https://ichor.example.com").unwrap(),
            DEFAULT_CLIENT_ID,
            DEFAULT_AUDIENCE,
        )
    }

    #[test]
    fn a_login_at_a_sites_provider_asks_for_its_scope_and_prompt_and_names_them_in_its_command() {
        let target = Target {
            scope: EXTERNAL_SCOPE.to_owned(),
            prompt: Some("consent".to_owned()),
            ..Target::new(
                IssuerUrl::parse("https://idp.example.com/realms/corp").unwrap(),
                "kubernetes",
                "kubernetes",
            )
        };
        let url = authorize_url(
            "https://idp.example.com/auth",
            &target,
            "http://127.0.0.1:5000/callback",
            "st",
            "no",
            "ch",
        )
        .unwrap();
        let query: Vec<(String, String)> = url::Url::parse(&url)
            .unwrap()
            .query_pairs()
            .into_owned()
            .collect();
        assert!(query.contains(&("scope".into(), EXTERNAL_SCOPE.into())), "{url}");
        assert!(query.contains(&("prompt".into(), "consent".into())), "{url}");
        assert_eq!(
            target.login_command(),
            "ichor auth login --issuer https://idp.example.com/realms/corp --client-id kubernetes --audience \
             kubernetes --scope 'openid offline_access email profile groups' --prompt consent"
        );
    }

    fn endpoints() -> Endpoints {
        Endpoints {
            authorization: "https://ichor.example.com/oidc/authorize".into(),
            token: "https://ichor.example.com/oidc/token".into(),
            revocation: None,
        }
    }

    fn token(exp: i64) -> Secret {
        let payload = serde_json::json!({"iss": "https://ichor.example.com", "sub": "alice",
            "aud": "ichor-kube", "exp": exp, "groups": ["viewer"], "nonce": "n"});
        Secret::new(format!(
            "e30.{}.c2ln",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&payload).unwrap())
        ))
    }

    #[test]
    fn the_authorize_url_carries_every_parameter_of_the_flow() {
        let url = authorize_url(
            "https://ichor.example.com/oidc/authorize",
            &target(),
            "http://127.0.0.1:5000/callback",
            "st",
            "no",
            "ch",
        )
        .unwrap();
        assert_eq!(
            url,
            "https://ichor.example.com/oidc/authorize?response_type=code&client_id=ichor-cli\
             &redirect_uri=http%3A%2F%2F127.0.0.1%3A5000%2Fcallback&scope=openid+offline_access&state=st\
             &nonce=no&code_challenge=ch&code_challenge_method=S256&audience=ichor-kube"
        );
    }

    #[test]
    fn a_refresh_without_a_new_refresh_token_keeps_the_old_one_and_rotation_replaces_it() {
        let now = Timestamp::from_second(1000).unwrap();
        let kept = entry_from(
            &target(),
            endpoints(),
            TokenResponse {
                id_token: token(2000),
                refresh_token: None,
            },
            Some(Secret::new("old".into())),
            None,
            now,
        )
        .unwrap();
        assert_eq!(kept.refresh_token.unwrap().expose(), "old");
        assert_eq!((kept.subject.as_str(), kept.id_token_exp), ("alice", 2000));
        let rotated = entry_from(
            &target(),
            endpoints(),
            TokenResponse {
                id_token: token(2000),
                refresh_token: Some(Secret::new("new".into())),
            },
            Some(Secret::new("old".into())),
            None,
            now,
        )
        .unwrap();
        assert_eq!(rotated.refresh_token.unwrap().expose(), "new");
    }

    #[test]
    fn a_login_answer_with_another_nonce_is_refused() {
        let e = entry_from(
            &target(),
            endpoints(),
            TokenResponse {
                id_token: token(2000),
                refresh_token: None,
            },
            None,
            Some("other"),
            Timestamp::from_second(1000).unwrap(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("nonce"), "{e}");
    }

    #[test]
    fn the_login_hint_names_only_flags_that_differ_from_the_defaults() {
        assert_eq!(
            target().login_command(),
            "ichor auth login --issuer https://ichor.example.com"
        );
        let mut t = target();
        t.audience = "ichor-ui".into();
        assert_eq!(
            t.login_command(),
            "ichor auth login --issuer https://ichor.example.com --audience ichor-ui"
        );
    }
}
