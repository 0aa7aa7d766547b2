//! `ichor dev` as a process for the end-to-end tests: started on a free pair of ports with its
//! banner read (URL, CA file, manifests directory, the first admin's password), the real OIDC
//! sign-in over HTTPS (authorize as JSON, login, token with PKCE), and the generated
//! `UserService` client.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, missing_docs)]

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ichor_issuer::api::proto::{
    ChangeOwnPasswordRequest, CreateUserRequest, create_user_request, user_service_client::UserServiceClient,
};
use sha2::Digest as _;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

pub const VERIFIER: &str = "e2e-verifier-0123456789-abcdefghijklmnopqrstuvwxyz";
pub const CLI_REDIRECT: &str = "http://127.0.0.1:38123/callback";

/// The running process, killed when dropped.
pub struct Dev {
    pub child: Child,
    pub port: u16,
    pub url: String,
    pub ca_file: PathBuf,
    pub manifests: PathBuf,
    pub password: String,
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port whose successor is free too.
pub fn free_port_pair() -> u16 {
    for _ in 0..100 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        if port < 65535 && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return port;
        }
    }
    panic!("no free pair of ports");
}

/// `ichor dev --port <free> --state-dir <state> <extra>`, once its banner is printed.
pub fn start(state: &Path, extra: &[&str]) -> Dev {
    start_on(free_port_pair(), state, extra)
}

/// As [`start`], on a given port (the internal listener takes the next one).
pub fn start_on(port: u16, state: &Path, extra: &[&str]) -> Dev {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ichor"))
        .args(["dev", "--port", &port.to_string(), "--state-dir"])
        .arg(state)
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let done = line.starts_with("Press Ctrl-C");
            lines.push(line);
            if done {
                let _ = tx.send(lines.clone());
            }
        }
    });
    let lines = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("ichor dev printed its banner");
    let field = |label: &str| {
        lines
            .iter()
            .find_map(|l| l.trim().strip_prefix(label))
            .map(|v| v.trim().split("   ").next().unwrap_or_default().to_owned())
    };
    let url = field("Issuer URL:").unwrap_or_else(|| panic!("no Issuer URL in {lines:#?}"));
    assert_eq!(url, format!("https://127.0.0.1:{port}"));
    Dev {
        url,
        port,
        ca_file: field("CA file:")
            .unwrap_or_else(|| panic!("no CA file in {lines:#?}"))
            .into(),
        manifests: field("Manifests:")
            .unwrap_or_else(|| panic!("no Manifests in {lines:#?}"))
            .into(),
        // Printed on the first run only.
        password: field("Password:").unwrap_or_default(),
        child,
    }
}

pub fn query_param(url: &str, name: &str) -> Option<String> {
    url::Url::parse(url)
        .ok()?
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// An HTTPS client trusting only `dev`'s CA.
pub fn http_client(dev: &Dev) -> reqwest::Client {
    let ca = std::fs::read_to_string(&dev.ca_file).unwrap();
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
        .build()
        .unwrap()
}

/// Plays the browser for an authorization URL the issuer printed or redirected to: the
/// authorize step as JSON, the password, and the redirect's target (a CLI's loopback callback is
/// fetched so the waiting CLI gets its code). The redirect URI with the code, or the refusal.
pub async fn approve(
    http: &reqwest::Client,
    authorize_url: &str,
    user: &str,
    password: &str,
) -> Result<String, String> {
    let step = |what: &str, status: reqwest::StatusCode, body: String| format!("{what}: {status} {body}");
    let r = http
        .get(authorize_url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let (status, body) = (r.status(), r.text().await.unwrap_or_default());
    if !status.is_success() {
        return Err(step("authorize", status, body));
    }
    let ticket = serde_json::from_str::<serde_json::Value>(&body).unwrap()["ticket"]
        .as_str()
        .unwrap()
        .to_owned();
    let base = authorize_url.split("/oidc/authorize").next().unwrap();
    // One address signs everybody in here, so the per-source limit of sign-ins answers
    // `slow_down` with Retry-After: wait as a browser's user would, within a bound.
    let mut waited = Duration::ZERO;
    let (status, body) = loop {
        let r = http
            .post(format!("{base}/oidc/login"))
            .header("accept", "application/json")
            .json(&serde_json::json!({"ticket": ticket, "username": user, "password": password}))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let retry_after = r
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        let (status, body) = (r.status(), r.text().await.unwrap_or_default());
        match retry_after {
            Some(secs)
                if status == reqwest::StatusCode::TOO_MANY_REQUESTS && waited < Duration::from_secs(120) =>
            {
                let wait = Duration::from_secs(secs.max(1));
                waited += wait;
                tokio::time::sleep(wait).await;
            }
            _ => break (status, body),
        }
    };
    if !status.is_success() {
        return Err(step("login", status, body));
    }
    Ok(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["redirect_uri"]
            .as_str()
            .unwrap()
            .to_owned(),
    )
}

/// Signs in through `/oidc/authorize` (JSON), `/oidc/login` and `/oidc/token` with PKCE: the ID
/// token, or the status and body of the step that refused.
pub async fn sign_in(
    http: &reqwest::Client,
    dev: &Dev,
    client: &str,
    audience: Option<&str>,
    user: &str,
    password: &str,
) -> Result<String, String> {
    let redirect = if client == "ichor-ui" {
        format!("{}/auth/callback", dev.url)
    } else {
        CLI_REDIRECT.to_owned()
    };
    let challenge = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(VERIFIER.as_bytes()));
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    q.append_pair("response_type", "code")
        .append_pair("client_id", client)
        .append_pair("redirect_uri", &redirect)
        .append_pair("state", "st-1")
        .append_pair("nonce", "no-1")
        .append_pair("scope", "openid")
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256");
    if let Some(a) = audience {
        q.append_pair("audience", a);
    }
    let to = approve(
        http,
        &format!("{}/oidc/authorize?{}", dev.url, q.finish()),
        user,
        password,
    )
    .await?;
    let code = query_param(&to, "code").ok_or_else(|| format!("no code in {to}"))?;
    let r = http
        .post(format!("{}/oidc/token", dev.url))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("client_id", client),
            ("redirect_uri", redirect.as_str()),
            ("code_verifier", VERIFIER),
        ])
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let (status, body) = (r.status(), r.text().await.unwrap_or_default());
    if !status.is_success() {
        return Err(format!("token: {status} {body}"));
    }
    Ok(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["id_token"]
            .as_str()
            .unwrap()
            .to_owned(),
    )
}

pub fn claims(token: &str) -> serde_json::Value {
    let payload = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

pub fn authed<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    r.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    r
}

pub async fn channel(dev: &Dev) -> Channel {
    let ca = std::fs::read_to_string(&dev.ca_file).unwrap();
    Endpoint::from_shared(dev.url.clone())
        .unwrap()
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// The first admin's password changed to `new_password`; an `ichor-ui` token of the admin.
pub async fn settle_admin(dev: &Dev, new_password: &str) -> String {
    let http = http_client(dev);
    let token = sign_in(&http, dev, "ichor-ui", None, "admin", &dev.password)
        .await
        .unwrap();
    UserServiceClient::new(channel(dev).await)
        .change_own_password(authed(
            ChangeOwnPasswordRequest {
                old_password: dev.password.clone(),
                new_password: new_password.to_owned(),
            },
            &token,
        ))
        .await
        .unwrap();
    sign_in(&http, dev, "ichor-ui", None, "admin", new_password)
        .await
        .unwrap()
}

/// Creates `name` with `roles` as the admin (`admin_token`), then signs in as that user once to
/// replace the first password with `password`, as a new user does.
pub async fn provision_user(dev: &Dev, admin_token: &str, name: &str, roles: &[&str], password: &str) {
    let first = format!("{name}'s first password");
    let mut api = UserServiceClient::new(channel(dev).await);
    api.create_user(authed(
        CreateUserRequest {
            name: name.into(),
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            initial_password: Some(create_user_request::InitialPassword::Password(first.clone())),
            ..Default::default()
        },
        admin_token,
    ))
    .await
    .unwrap();
    let http = http_client(dev);
    let token = sign_in(&http, dev, "ichor-ui", None, name, &first).await.unwrap();
    api.change_own_password(authed(
        ChangeOwnPasswordRequest {
            old_password: first,
            new_password: password.to_owned(),
        },
        &token,
    ))
    .await
    .unwrap();
}
