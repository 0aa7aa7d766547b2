//! A real external OpenID provider for tests: panva's OpenID-certified `oidc-provider` (npm),
//! run by `hack/conformance/oidc-provider/server.mjs` on HTTPS 127.0.0.1 under a CA of its own,
//! with static accounts that sign in without a password.
//!
//! It stands for a site's IdP next to Ichor's issuer: a second `jwt[]` issuer of a
//! kube-apiserver, and the provider a browser signs in against. Tokens come from the provider's
//! own authorization-code flow with PKCE (the script's `token` subcommand follows the redirects
//! and exchanges the code), and refreshes from its own refresh-token grant, which rotates: a
//! refresh token works once.
//!
//! `hack/conformance/oidc-provider/install.sh` (run by `hack/install-test-deps.sh`) installs it.
//! A test that uses it is `#[ignore = "needs oidc-provider: hack/install-test-deps.sh"]` and
//! first asks [`available`], which follows [`consumers::require_path`]: a missing install fails
//! the test (unless `ICHOR_REQUIRE_CONSUMERS=0`).
//!
//! ```no_run
//! use ichor_testkit::external_idp::{self, Account, Client, ExternalIdp, ExternalIdpOptions};
//! # fn main() -> anyhow::Result<()> {
//! if !external_idp::available() {
//!     return Ok(());
//! }
//! let idp = ExternalIdp::start(ExternalIdpOptions {
//!     accounts: [("alice".into(), Account::new("alice@example.org", &["dev"]))].into(),
//!     clients: vec![Client::public("kubernetes")],
//!     ..Default::default()
//! })?;
//! let tokens = idp.id_token("alice", "kubernetes")?; // aud: kubernetes
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde::Serialize;

use crate::consumers;
pub use crate::jwt::try_claims as jwt_claims;
use crate::pki::TestCa;

/// The redirect URI a [`Client::public`] registers: the token flow only reads the code from the
/// redirect, so nothing needs to listen there.
pub const DEFAULT_REDIRECT_URI: &str = "http://127.0.0.1/callback";

/// The scope [`ExternalIdp::id_token`] asks for: every claim, and a refresh token.
pub const DEFAULT_SCOPE: &str = "openid email profile groups offline_access";

/// The folder holding `server.mjs`, its lock and (once installed) `node_modules`.
pub fn install_dir() -> PathBuf {
    consumers::repo_root().join("hack/conformance/oidc-provider")
}

/// The file whose presence means the install is done.
fn installed_marker() -> PathBuf {
    install_dir().join("node_modules/oidc-provider/package.json")
}

/// `node` on `PATH`, if any.
fn find_node() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("node"))
        .find(|candidate| candidate.is_file())
}

/// Whether node and the installed provider are there, by the rule of
/// [`consumers::require_path`]: panics when either is missing, saying what installs it (under
/// `ICHOR_REQUIRE_CONSUMERS=0` only, prints why the calling test returns early and returns
/// `false`).
pub fn available() -> bool {
    let node = find_node().unwrap_or_else(|| PathBuf::from("node (on PATH)"));
    consumers::require_path(node, "the machine's Node.js 20 or newer").is_some()
        && consumers::require_path(installed_marker(), "hack/conformance/oidc-provider/install.sh").is_some()
}

/// One static account. Its key in [`ExternalIdpOptions::accounts`] is its `sub` and, unless
/// [`Account::claims`] says otherwise, its `name` and `preferred_username`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Account {
    /// The `email` claim (`email_verified` is `true` unless set in `claims`).
    pub email: String,
    /// The `groups` claim.
    pub groups: Vec<String>,
    /// Any other claim, passed as it is (`name`, or `email_verified: false`, ...). `sub` cannot
    /// be changed here.
    #[serde(flatten)]
    pub claims: serde_json::Map<String, serde_json::Value>,
}

impl Account {
    /// An account with this email and these groups.
    pub fn new(email: &str, groups: &[&str]) -> Self {
        Self {
            email: email.to_owned(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            claims: serde_json::Map::new(),
        }
    }
}

/// One registered client. Its id is the `aud` of the ID tokens it gets.
#[derive(Clone, Debug, Serialize)]
pub struct Client {
    /// The client id.
    pub client_id: String,
    /// Where the provider may send the code; the first is the one the token flow uses.
    pub redirect_uris: Vec<String>,
    /// A secret makes it a confidential client (`client_secret_basic`); without one it is public
    /// (no client authentication). PKCE is required either way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// `native` for a command-line client: a loopback redirect URI then matches on any port
    /// (RFC 8252 section 7.3). Absent: `web`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub application_type: Option<String>,
}

impl Client {
    /// A public client with PKCE and [`DEFAULT_REDIRECT_URI`].
    pub fn public(client_id: &str) -> Self {
        Self {
            client_id: client_id.to_owned(),
            redirect_uris: vec![DEFAULT_REDIRECT_URI.to_owned()],
            client_secret: None,
            application_type: None,
        }
    }

    /// A public native client (a CLI such as `ichor auth login`): [`DEFAULT_REDIRECT_URI`] on
    /// any loopback port.
    pub fn native(client_id: &str) -> Self {
        Self {
            application_type: Some("native".to_owned()),
            ..Self::public(client_id)
        }
    }

    /// A public client for a browser application at these redirect URIs.
    pub fn with_redirect_uris(client_id: &str, redirect_uris: &[&str]) -> Self {
        Self {
            redirect_uris: redirect_uris.iter().map(|u| (*u).to_owned()).collect(),
            ..Self::public(client_id)
        }
    }
}

/// What [`ExternalIdp::start`] runs.
#[derive(Clone, Debug)]
pub struct ExternalIdpOptions {
    /// The accounts by `sub`.
    pub accounts: BTreeMap<String, Account>,
    /// The clients.
    pub clients: Vec<Client>,
    /// How long node may take to print its ready line.
    pub start_timeout: Duration,
}

impl Default for ExternalIdpOptions {
    fn default() -> Self {
        Self {
            accounts: BTreeMap::new(),
            clients: Vec::new(),
            start_timeout: Duration::from_secs(20),
        }
    }
}

/// The tokens of one token-endpoint response.
#[derive(Clone, Debug)]
pub struct Tokens {
    /// The ID token (a JWT signed RS256 by the provider).
    pub id_token: String,
    /// The refresh token, when `offline_access` was granted.
    pub refresh_token: Option<String>,
    /// The access token (opaque).
    pub access_token: String,
    /// The whole response.
    pub response: serde_json::Value,
}

impl Tokens {
    fn parse(stdout: &[u8]) -> anyhow::Result<Self> {
        let response: serde_json::Value =
            serde_json::from_slice(stdout).context("the token endpoint's response is not JSON")?;
        let text = |name: &str| response.get(name).and_then(|v| v.as_str()).map(str::to_owned);
        Ok(Self {
            id_token: text("id_token").with_context(|| format!("no id_token in {response}"))?,
            refresh_token: text("refresh_token"),
            access_token: text("access_token").unwrap_or_default(),
            response,
        })
    }

    /// The ID token's claims, decoded without verification (verifying is the test's business).
    pub fn id_token_claims(&self) -> anyhow::Result<serde_json::Value> {
        jwt_claims(&self.id_token)
    }
}

/// A running provider; stopped (SIGTERM, then SIGKILL) on drop.
pub struct ExternalIdp {
    child: Option<Child>,
    node: PathBuf,
    issuer: String,
    ca_pem: String,
    clients: Vec<Client>,
    dir: tempfile::TempDir,
    started_in: Duration,
}

/// How many ports to try when the one picked was taken before node bound it.
const PORT_ATTEMPTS: usize = 3;

impl ExternalIdp {
    /// Makes a CA and a serving certificate for 127.0.0.1, picks a free port and starts the
    /// provider there, waiting for its ready line. Fails, with the provider's log, when it is
    /// not installed, exits, or is not ready within [`ExternalIdpOptions::start_timeout`].
    pub fn start(options: ExternalIdpOptions) -> anyhow::Result<Self> {
        let node = find_node()
            .context("node is not on PATH (the external OpenID provider needs Node.js 20 or newer)")?;
        if !installed_marker().is_file() {
            bail!(
                "the external OpenID provider is not installed ({} is missing): run hack/conformance/oidc-provider/install.sh",
                installed_marker().display()
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("ichor-external-idp-")
            .tempdir()
            .context("creating the provider's temporary directory")?;
        let ca = TestCa::new("ichor-test-external-idp-ca")?;
        let serving = ca.serving("ichor-test-external-idp")?;
        fs::write(dir.path().join("ca.pem"), &ca.pem)?;
        fs::write(dir.path().join("cert.pem"), &serving.cert_pem)?;
        fs::write(dir.path().join("key.pem"), &serving.key_pem)?;
        fs::write(
            dir.path().join("accounts.json"),
            serde_json::to_vec(&options.accounts)?,
        )?;
        fs::write(
            dir.path().join("clients.json"),
            serde_json::to_vec(&options.clients)?,
        )?;

        let mut idp = Self {
            child: None,
            node,
            issuer: String::new(),
            ca_pem: ca.pem,
            clients: options.clients,
            dir,
            started_in: Duration::ZERO,
        };
        let started = Instant::now();
        for attempt in 1..=PORT_ATTEMPTS {
            match idp.spawn(options.start_timeout) {
                Ok(()) => {
                    idp.started_in = started.elapsed();
                    return Ok(idp);
                }
                Err(e) if attempt < PORT_ATTEMPTS && idp.log().contains("EADDRINUSE") => {
                    eprintln!("external OpenID provider: port taken, trying another ({e:#})");
                }
                Err(e) => return Err(e),
            }
        }
        bail!("the external OpenID provider found no free port in {PORT_ATTEMPTS} attempts")
    }

    /// One attempt on a fresh port: spawn node and wait for `ready ISSUER` on its stdout.
    fn spawn(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let port = crate::control_plane::free_port()?;
        self.issuer = format!("https://127.0.0.1:{port}");
        let d = self.dir.path();
        let stdout = fs::File::create(d.join("stdout.log"))?;
        let stderr = fs::File::create(d.join("stderr.log"))?;
        let mut child = Command::new(&self.node)
            .arg(install_dir().join("server.mjs"))
            .arg("serve")
            .args(["--issuer", &self.issuer])
            .arg("--cert")
            .arg(d.join("cert.pem"))
            .arg("--key")
            .arg(d.join("key.pem"))
            .arg("--accounts")
            .arg(format!("@{}", d.join("accounts.json").display()))
            .arg("--clients")
            .arg(format!("@{}", d.join("clients.json").display()))
            .current_dir(install_dir())
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("starting {}", self.node.display()))?;
        let ready = format!("ready {}\n", self.issuer);
        let deadline = Instant::now() + timeout;
        loop {
            if fs::read_to_string(d.join("stdout.log")).is_ok_and(|out| out.contains(&ready)) {
                self.child = Some(child);
                return Ok(());
            }
            if let Some(status) = child.try_wait()? {
                bail!(
                    "the external OpenID provider exited ({status}) before it was ready on {}:\n{}",
                    self.issuer,
                    self.log()
                );
            }
            if Instant::now() >= deadline {
                let _ = terminate(&mut child);
                bail!(
                    "the external OpenID provider was not ready on {} within {timeout:?}:\n{}",
                    self.issuer,
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The issuer URL (`https://127.0.0.1:PORT`, no trailing slash): the tokens' `iss`.
    pub fn issuer_url(&self) -> &str {
        &self.issuer
    }

    /// The CA that signed the provider's serving certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// That CA as a file, for verifiers that take a path.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// How long the start took, from spawning node to its ready line.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The provider's stdout and stderr so far.
    pub fn log(&self) -> String {
        let read = |name: &str| fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        format!("{}{}", read("stdout.log"), read("stderr.log"))
    }

    /// Signs `account` in to `client_id` with [`DEFAULT_SCOPE`] through the provider's
    /// authorization-code flow with PKCE: an ID token with `aud` = `client_id` and a refresh
    /// token.
    pub fn id_token(&self, account: &str, client_id: &str) -> anyhow::Result<Tokens> {
        self.tokens_for_scope(account, client_id, DEFAULT_SCOPE)
    }

    /// As [`ExternalIdp::id_token`], asking for `scope` (without `offline_access`, no refresh
    /// token).
    pub fn tokens_for_scope(&self, account: &str, client_id: &str, scope: &str) -> anyhow::Result<Tokens> {
        let client = self.client(client_id)?;
        let redirect = client
            .redirect_uris
            .first()
            .with_context(|| format!("client {client_id} has no redirect URI"))?;
        let mut args = vec![
            "token",
            "--account",
            account,
            "--client-id",
            client_id,
            "--redirect-uri",
            redirect,
            "--scope",
            scope,
        ];
        if let Some(secret) = &client.client_secret {
            args.extend(["--client-secret", secret]);
        }
        let out = self.run_client(&args)?;
        Tokens::parse(&out.stdout).with_context(|| format!("signing {account} in to {client_id}"))
    }

    /// Redeems `refresh_token` at the token endpoint for `client_id`: new tokens, with a new
    /// refresh token (the provider rotates them; the one given is spent).
    pub fn refresh(&self, client_id: &str, refresh_token: &str) -> anyhow::Result<Tokens> {
        let client = self.client(client_id)?;
        // `--name=value`: a token may begin with '-', which node's parseArgs would take for an
        // option.
        let token = format!("--refresh-token={refresh_token}");
        let mut args = vec!["refresh", "--client-id", client_id, token.as_str()];
        if let Some(secret) = &client.client_secret {
            args.extend(["--client-secret", secret]);
        }
        let out = self.run_client(&args)?;
        Tokens::parse(&out.stdout).with_context(|| format!("refreshing for {client_id}"))
    }

    /// Plays the browser for an authorization request another program built (e.g. the URL
    /// `ichor auth login --no-browser` prints): signs `account` in, grants consent, and returns
    /// the redirect that leaves the provider (the client's redirect URI with `code` and
    /// `state`), without following it.
    pub fn approve(&self, authorize_url: &str, account: &str) -> anyhow::Result<String> {
        let url = format!("--url={authorize_url}");
        let out = self.run_client(&["approve", "--account", account, url.as_str()])?;
        Ok(String::from_utf8(out.stdout)
            .context("the redirect is not UTF-8")?
            .trim()
            .to_owned())
    }

    /// Stops the provider with SIGTERM and returns how it exited (0 when it shut down cleanly).
    pub fn stop(mut self) -> anyhow::Result<ExitStatus> {
        let mut child = self.child.take().context("the provider is not running")?;
        terminate(&mut child).context("the provider did not stop")
    }

    fn client(&self, client_id: &str) -> anyhow::Result<&Client> {
        self.clients
            .iter()
            .find(|c| c.client_id == client_id)
            .with_context(|| {
                format!("no client {client_id} was registered with the external OpenID provider")
            })
    }

    /// Runs `server.mjs` as a client of this provider, within 60 s.
    fn run_client(&self, args: &[&str]) -> anyhow::Result<Output> {
        let child = Command::new(&self.node)
            .arg(install_dir().join("server.mjs"))
            .args(args)
            .args(["--issuer", &self.issuer])
            .arg("--ca")
            .arg(self.ca_path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", self.node.display()))?;
        let pid = child.id();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || tx.send(child.wait_with_output()));
        let out = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(out) => out?,
            Err(_) => {
                let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
                bail!("server.mjs {} did not finish within 60 s", args.join(" "));
            }
        };
        if !out.status.success() {
            bail!(
                "server.mjs {} failed ({}): {}\nprovider log:\n{}",
                args.first().copied().unwrap_or_default(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim(),
                self.log()
            );
        }
        Ok(out)
    }
}

impl Drop for ExternalIdp {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = terminate(&mut child);
        }
    }
}

/// SIGTERM by PID (std has no signal but SIGKILL), up to 5 s for a clean exit, then SIGKILL.
fn terminate(child: &mut Child) -> std::io::Result<ExitStatus> {
    if let Some(status) = child.try_wait()? {
        return Ok(status);
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .stderr(Stdio::null())
        .status();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill()?;
    child.wait()
}
