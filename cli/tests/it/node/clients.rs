//! The clients the walkthrough's people use: the browser's part of a sign-in over HTTPS (for
//! the API's token), the API's bearer, and the commands an operator runs as `ichor init` printed
//! them.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use ichor_testkit::issuer::sign_in::{self, Authorize, SlowDown};

use super::cluster::Admin;
use crate::support::ichor_command;

/// The PKCE verifier of every sign-in.
pub const VERIFIER: &str = "walkthrough-verifier-0123456789-0123456789-0123";

/// Signs `user` in at the issuer `base` for `client` (`ichor-ui`: the UI's own redirect; `ichor-cli`:
/// the CLI's loopback one, with `audience`); the ID token.
pub async fn sign_in_as(
    http: &reqwest::Client,
    base: &str,
    client: &str,
    audience: Option<&str>,
    user: &str,
    password: &str,
) -> anyhow::Result<String> {
    let tokens = sign_in::sign_in_for(http, base, client, audience, VERIFIER, user, password)
        .await
        .map_err(|refusal| anyhow::anyhow!("signing {user} in for {client}: {refusal}"))?;
    tokens["id_token"]
        .as_str()
        .map(str::to_owned)
        .context("no id_token in the token response")
}

/// Signs `user` in at `base` as the CLI does (`ichor-cli`, `openid offline_access`): its
/// refresh token.
pub async fn cli_refresh_token(
    http: &reqwest::Client,
    base: &str,
    user: &str,
    password: &str,
) -> anyhow::Result<String> {
    let request = Authorize::cli(VERIFIER);
    let tokens = sign_in::sign_in(http, base, &request, user, password, SlowDown::Wait)
        .await
        .map_err(|refusal| anyhow::anyhow!("{user}'s CLI sign-in: {refusal}"))?;
    tokens["refresh_token"]
        .as_str()
        .map(str::to_owned)
        .context("no refresh token for the CLI's sign-in")
}

pub fn authed<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Ok(value) = format!("Bearer {token}").parse() {
        request.metadata_mut().insert("authorization", value);
    }
    request
}

/// Runs the command line `line` (`ichor …`, as init printed it) as the admin, bounded; what it
/// printed, stdout then stderr.
pub fn run_printed(
    home: &std::path::Path,
    admin: &Admin,
    line: &str,
    timeout: Duration,
) -> anyhow::Result<String> {
    let args: Vec<&str> = line.split_whitespace().skip(1).collect();
    let mut cmd = ichor_command(home, &args);
    cmd.env("KUBECONFIG", &admin.kubeconfig)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn()?;
    let deadline = Instant::now() + timeout;
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output()?;
            bail!(
                "`{line}` did not end within {timeout:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = child.wait_with_output()?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    ensure!(out.status.success(), "`{line}` failed: {stderr}");
    Ok(format!("{}{stderr}", String::from_utf8_lossy(&out.stdout)))
}

/// The password of the message `ichor init` prints once: the indented line after it.
pub fn printed_password(stderr: &str) -> anyhow::Result<String> {
    let mut lines = stderr.lines().skip_while(|l| !l.contains("shown only this once"));
    ensure!(lines.next().is_some(), "no password message in: {stderr}");
    let line = lines.find(|l| !l.trim().is_empty()).context("no password line")?;
    Ok(line.trim().to_owned())
}
