//! `ichor dev` as a process for the end-to-end tests: started on a free pair of ports with its
//! banner read (URL, CA file, manifests directory, the first admin's password), the real OIDC
//! sign-in over HTTPS (authorize as JSON, login, token with PKCE), and the generated
//! `UserService` client.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, missing_docs)]

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ichor_issuer::api::proto::{
    ChangeOwnPasswordRequest, CreateUserRequest, create_user_request, user_service_client::UserServiceClient,
};
use ichor_testkit::issuer::sign_in::{self, SlowDown};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

pub const VERIFIER: &str = "e2e-verifier-0123456789-abcdefghijklmnopqrstuvwxyz";

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

/// A port whose successor is free too, outside the ephemeral range (see
/// [`ichor_testkit::ports`]): the issuer restarts on the same pair.
pub fn free_port_pair() -> u16 {
    ichor_testkit::ports::free_port_pair().unwrap()
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

pub use ichor_testkit::jwt::claims;

/// An HTTPS client trusting only `dev`'s CA.
pub fn http_client(dev: &Dev) -> reqwest::Client {
    let ca = std::fs::read_to_string(&dev.ca_file).unwrap();
    ichor_testkit::issuer::https::client_builder(&ca).build().unwrap()
}

/// Plays the browser for an authorization URL the issuer printed or redirected to: the
/// authorize step as JSON, the password (one address signs everybody in here, so the per-source
/// limit of sign-ins answers `slow_down`: it waits as a browser's user would, within a bound),
/// and the redirect URI with the code, or the refusal.
pub async fn approve(
    http: &reqwest::Client,
    authorize_url: &str,
    user: &str,
    password: &str,
) -> Result<String, String> {
    sign_in::approve(http, authorize_url, user, password, SlowDown::Wait)
        .await
        .map_err(|refusal| refusal.to_string())
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
    let tokens = sign_in::sign_in_for(http, &dev.url, client, audience, VERIFIER, user, password)
        .await
        .map_err(|refusal| refusal.to_string())?;
    Ok(tokens["id_token"].as_str().unwrap().to_owned())
}

/// `message` with `authorization: Bearer <token>`.
pub fn authed<T>(message: T, token: &str) -> tonic::Request<T> {
    ichor_testkit::issuer::grpc::bearer_request(token, message)
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
                code: String::new(),
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
            code: String::new(),
        },
        &token,
    ))
    .await
    .unwrap();
}
