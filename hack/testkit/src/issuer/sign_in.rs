//! The sign-in driver: the authorization request as the clients make it (PKCE S256), and the
//! browser's part of the flow over HTTPS against a running issuer (authorize as JSON → ticket →
//! login → redirect with the code → token), as the issuer's and the CLI's tests drive it.

use std::time::Duration;

use ichor_issuer::oidc::request::s256_challenge;

/// The loopback redirect URI of `ichor-cli` the tests use.
pub const CLI_REDIRECT: &str = "http://127.0.0.1:38123/callback";

/// The longest a patient login waits out `slow_down` answers in all.
const PATIENCE: Duration = Duration::from_secs(120);

/// One authorization request.
#[derive(Clone, Debug)]
pub struct Authorize<'a> {
    /// `client_id`.
    pub client_id: &'a str,
    /// `redirect_uri`.
    pub redirect_uri: &'a str,
    /// `scope`.
    pub scope: &'a str,
    /// `state`.
    pub state: &'a str,
    /// `nonce`.
    pub nonce: &'a str,
    /// The PKCE verifier (the request carries its S256 challenge).
    pub verifier: &'a str,
    /// `audience`, when asked for.
    pub audience: Option<&'a str>,
}

impl<'a> Authorize<'a> {
    /// `ichor-cli` on [`CLI_REDIRECT`] with `openid offline_access`, state `st-1`, nonce `no-1`.
    pub fn cli(verifier: &'a str) -> Self {
        Authorize {
            client_id: "ichor-cli",
            redirect_uri: CLI_REDIRECT,
            scope: "openid offline_access",
            state: "st-1",
            nonce: "no-1",
            verifier,
            audience: None,
        }
    }

    /// The query string (without `?`), parameters in the order the clients send them.
    pub fn query(&self) -> String {
        let challenge = s256_challenge(self.verifier);
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        q.append_pair("response_type", "code")
            .append_pair("client_id", self.client_id)
            .append_pair("redirect_uri", self.redirect_uri)
            .append_pair("state", self.state)
            .append_pair("nonce", self.nonce)
            .append_pair("scope", self.scope)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256");
        if let Some(a) = self.audience {
            q.append_pair("audience", a);
        }
        q.finish()
    }

    /// `<base>/oidc/authorize?<query>`.
    pub fn url(&self, base: &str) -> String {
        format!("{base}/oidc/authorize?{}", self.query())
    }

    /// The form of the code exchange for `code`.
    pub fn exchange<'c>(&'c self, code: &'c str) -> [(&'c str, &'c str); 5] {
        [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("client_id", self.client_id),
            ("redirect_uri", self.redirect_uri),
            ("code_verifier", self.verifier),
        ]
    }
}

/// A step of the flow that did not answer 2xx with JSON.
#[derive(Clone, Debug)]
pub struct Refusal {
    /// `authorize`, `login`, `code` (the redirect carried none) or `token`.
    pub step: &'static str,
    /// The answer's status; `None` when no answer came.
    pub status: Option<reqwest::StatusCode>,
    /// The answer's body, or what went wrong.
    pub body: String,
    /// The answer's `Retry-After`, seconds.
    pub retry_after: Option<u64>,
}

impl Refusal {
    /// The status code, 0 when no answer came.
    pub fn code(&self) -> u16 {
        self.status.map_or(0, |s| s.as_u16())
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            Some(status) => write!(f, "{}: {status} {}", self.step, self.body),
            None => write!(f, "{}: {}", self.step, self.body),
        }
    }
}

/// Whether a login waits out the per-source limit of sign-ins (`429` with `Retry-After`), as a
/// browser's user would, up to two minutes in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlowDown {
    /// Wait and try again.
    Wait,
    /// Return the `429` as a refusal.
    Refuse,
}

/// The JSON body of a 2xx answer to `request`, or the refusal of `step`.
pub async fn answer(
    step: &'static str,
    request: reqwest::RequestBuilder,
) -> Result<serde_json::Value, Refusal> {
    let response = request.send().await.map_err(|e| Refusal {
        step,
        status: None,
        body: e.to_string(),
        retry_after: None,
    })?;
    let status = response.status();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let refusal = |body: String| Refusal {
        step,
        status: Some(status),
        body,
        retry_after,
    };
    let body = response.text().await.map_err(|e| refusal(e.to_string()))?;
    if !status.is_success() {
        return Err(refusal(body));
    }
    serde_json::from_str(&body).map_err(|e| refusal(format!("{e}: {body}")))
}

/// Plays the browser for an authorization URL (one a test built, or one the issuer printed or
/// redirected to): the authorize step as JSON, the password, and the redirect URI with the code.
pub async fn approve(
    http: &reqwest::Client,
    authorize_url: &str,
    user: &str,
    password: &str,
    slow_down: SlowDown,
) -> Result<String, Refusal> {
    let ticket = answer(
        "authorize",
        http.get(authorize_url).header("accept", "application/json"),
    )
    .await?;
    let base = authorize_url.split("/oidc/authorize").next().unwrap_or_default();
    let body = serde_json::json!({"ticket": ticket["ticket"], "username": user, "password": password});
    let mut waited = Duration::ZERO;
    let login = loop {
        let request = http
            .post(format!("{base}/oidc/login"))
            .header("accept", "application/json")
            .json(&body);
        match answer("login", request).await {
            Err(refusal)
                if slow_down == SlowDown::Wait
                    && refusal.status == Some(reqwest::StatusCode::TOO_MANY_REQUESTS)
                    && refusal.retry_after.is_some()
                    && waited < PATIENCE =>
            {
                let wait = Duration::from_secs(refusal.retry_after.unwrap_or(1).max(1));
                waited += wait;
                tokio::time::sleep(wait).await;
            }
            other => break other?,
        }
    };
    login["redirect_uri"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| Refusal {
            step: "login",
            status: None,
            body: format!("no redirect_uri in {login}"),
            retry_after: None,
        })
}

/// The value of the query parameter `name` of `url`.
pub fn query_param(url: &str, name: &str) -> Option<String> {
    url::Url::parse(url)
        .ok()?
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// Signs `user` in with `password` at the issuer `base` through the real endpoints: the token
/// response, or the refusal of the step that refused.
pub async fn sign_in(
    http: &reqwest::Client,
    base: &str,
    request: &Authorize<'_>,
    user: &str,
    password: &str,
    slow_down: SlowDown,
) -> Result<serde_json::Value, Refusal> {
    let to = approve(http, &request.url(base), user, password, slow_down).await?;
    let code = query_param(&to, "code").ok_or_else(|| Refusal {
        step: "code",
        status: None,
        body: format!("no code in {to}"),
        retry_after: None,
    })?;
    answer(
        "token",
        http.post(format!("{base}/oidc/token"))
            .form(&request.exchange(&code)),
    )
    .await
}

/// The redirect URI `client` signs in with at the issuer `base`: the UI's own callback for
/// `ichor-ui`, [`CLI_REDIRECT`] for any other client.
pub fn redirect_uri(client: &str, base: &str) -> String {
    if client == "ichor-ui" {
        format!("{base}/auth/callback")
    } else {
        CLI_REDIRECT.to_owned()
    }
}

/// Signs `user` in at `base` for `client` with scope `openid` (and `audience`, when asked for)
/// on its [`redirect_uri`], PKCE verifier `verifier`, waiting out `slow_down` answers: the token
/// response, or the refusal of the step that refused.
pub async fn sign_in_for(
    http: &reqwest::Client,
    base: &str,
    client: &str,
    audience: Option<&str>,
    verifier: &str,
    user: &str,
    password: &str,
) -> Result<serde_json::Value, Refusal> {
    let redirect = redirect_uri(client, base);
    let request = Authorize {
        client_id: client,
        redirect_uri: &redirect,
        scope: "openid",
        audience,
        ..Authorize::cli(verifier)
    };
    sign_in(http, base, &request, user, password, SlowDown::Wait).await
}
