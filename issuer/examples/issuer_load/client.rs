//! The HTTP client the loads drive the issuers with, the forwarded source addresses that keep the
//! per-source rate limits out of the measurement, and the full sign-in (authorize, password,
//! code exchange) every load starts from.

use anyhow::{Context as _, Result, bail};
use ichor_issuer::oidc::devices::COOKIE;
use std::time::Duration;

pub(crate) const PASSWORD: &str = "bench password 0123456789";
const REDIRECT: &str = "http://127.0.0.1:38123/callback";
const VERIFIER: &str = "bench-verifier-0123456789-abcdefghijklmnopqrstuvwxyz";
/// Requests per forwarded address before the next one (below the failure bucket's burst of 60,
/// so a load's failures are never all charged to one source).
pub(crate) const PER_ADDRESS: usize = 50;

pub(crate) fn client(ca: &[u8]) -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca)?)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(60))
        .build()?)
}

/// A distinct documentation-range-free private address for the `n`-th source.
pub(crate) fn source(n: usize) -> String {
    format!("10.{}.{}.{}", (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff)
}

async fn json_ok(r: reqwest::RequestBuilder) -> Result<serde_json::Value> {
    let response = r.send().await?;
    let status = response.status();
    let body = response.text().await?;
    if !status.is_success() {
        bail!("HTTP {status}: {body}");
    }
    Ok(serde_json::from_str(&body)?)
}

/// Signs `user` in for `ichor-cli` with `offline_access`: the refresh token.
pub(crate) async fn sign_in(http: &reqwest::Client, issuer: &str, user: &str, from: &str) -> Result<String> {
    let tokens = sign_in_tokens(
        http,
        issuer,
        user,
        PASSWORD,
        ichor_renderers::contract::KUBE_AUDIENCE,
        from,
    )
    .await?;
    Ok(tokens["refresh_token"]
        .as_str()
        .context("no refresh_token")?
        .to_owned())
}

/// Signs `user` in for `ichor-cli` with `offline_access` and ID tokens for `audience`: the
/// token response.
pub(crate) async fn sign_in_tokens(
    http: &reqwest::Client,
    issuer: &str,
    user: &str,
    password: &str,
    audience: &str,
    from: &str,
) -> Result<serde_json::Value> {
    Ok(sign_in_device(http, issuer, user, password, audience, from, None)
        .await?
        .0)
}

/// As [`sign_in_tokens`], sending the device cookie `device` (as a browser that signed in
/// before does): the token response and the device cookie the sign-in set.
pub(crate) async fn sign_in_device(
    http: &reqwest::Client,
    issuer: &str,
    user: &str,
    password: &str,
    audience: &str,
    from: &str,
    device: Option<&str>,
) -> Result<(serde_json::Value, Option<String>)> {
    let ticket = ticket(http, issuer, audience, from).await?;
    let mut login = http
        .post(format!("{issuer}/oidc/login"))
        .header("x-forwarded-for", from)
        .json(&serde_json::json!({"ticket": ticket, "username": user, "password": password}));
    if let Some(value) = device {
        login = login.header("cookie", format!("{COOKIE}={value}"));
    }
    let response = login.send().await?;
    let cookie = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok()?.strip_prefix(&format!("{COOKIE}=")))
        .find_map(|v| v.split(';').next())
        .map(str::to_owned);
    let status = response.status();
    let body = response.text().await?;
    if !status.is_success() {
        bail!("HTTP {status}: {body}");
    }
    let login: serde_json::Value = serde_json::from_str(&body)?;
    Ok((exchange(http, issuer, &login, from).await?, cookie))
}

/// A full sign-in of `user` (the password [`PASSWORD`]) for `ichor-cli` with `offline_access`
/// and ID tokens for `ichor-kube`, answering the second step with the authenticator code of
/// `totp_secret` when the issuer asks for one: the token response.
pub(crate) async fn sign_in_with_factor(
    http: &reqwest::Client,
    issuer: &str,
    user: &str,
    totp_secret: Option<&str>,
    from: &str,
) -> Result<serde_json::Value> {
    let ticket = ticket(http, issuer, ichor_renderers::contract::KUBE_AUDIENCE, from).await?;
    let mut answer = json_ok(
        http.post(format!("{issuer}/oidc/login"))
            .header("x-forwarded-for", from)
            .json(&serde_json::json!({"ticket": ticket, "username": user, "password": PASSWORD})),
    )
    .await?;
    if let Some(factor_ticket) = answer["factor_ticket"].as_str() {
        let secret = totp_secret.context("the issuer asked for a second factor this user has no code for")?;
        let code = ichor_renderers::auth::totp::code_at(secret, jiff::Timestamp::now())?;
        answer = json_ok(
            http.post(format!("{issuer}/oidc/login/factor"))
                .header("x-forwarded-for", from)
                .json(&serde_json::json!({"factor_ticket": factor_ticket, "code": code})),
        )
        .await?;
    } else if totp_secret.is_some() {
        bail!("the issuer asked no second factor of a user who has one");
    }
    exchange(http, issuer, &answer, from).await
}

/// The code of a sign-in's answer (`redirect_uri`) exchanged at the token endpoint.
async fn exchange(
    http: &reqwest::Client,
    issuer: &str,
    login: &serde_json::Value,
    from: &str,
) -> Result<serde_json::Value> {
    let redirect = url::Url::parse(login["redirect_uri"].as_str().context("no redirect_uri")?)?;
    let code = redirect
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .context("no code")?;
    json_ok(
        http.post(format!("{issuer}/oidc/token"))
            .header("x-forwarded-for", from)
            .form(&[
                ("grant_type", "authorization_code"),
                ("code", code.as_str()),
                ("client_id", ichor_renderers::contract::CLI_CLIENT_ID),
                ("redirect_uri", REDIRECT),
                ("code_verifier", VERIFIER),
            ]),
    )
    .await
}

/// A sign-in ticket of the JSON authorize flow for `ichor-cli` with `offline_access` and ID
/// tokens for `audience`.
pub(crate) async fn ticket(
    http: &reqwest::Client,
    issuer: &str,
    audience: &str,
    from: &str,
) -> Result<String> {
    let challenge = ichor_issuer::oidc::request::s256_challenge(VERIFIER);
    let ticket = json_ok(
        http.get(format!("{issuer}/oidc/authorize"))
            .query(&[
                ("response_type", "code"),
                ("client_id", ichor_renderers::contract::CLI_CLIENT_ID),
                ("redirect_uri", REDIRECT),
                ("state", "bench-state"),
                ("nonce", "bench-nonce"),
                ("scope", "openid offline_access"),
                ("code_challenge", challenge.as_str()),
                ("code_challenge_method", "S256"),
                ("audience", audience),
            ])
            .header("accept", "application/json")
            .header("x-forwarded-for", from),
    )
    .await?;
    Ok(ticket["ticket"].as_str().context("no ticket")?.to_owned())
}
