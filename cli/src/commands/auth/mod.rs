//! `ichor auth …`: sign in to an Ichor issuer and hand its ID tokens to `kubectl`.
//!
//! - `token`: the client-go exec plugin the kubeconfigs name (fast path: one file read);
//! - `login`: the loopback browser login (authorization code + PKCE S256);
//! - `logout`: revoke and forget cached logins;
//! - `status`: what each cached login holds, never a token.
//!
//! Logins are cached per (issuer, client, audience) in `~/.ichor/auth/` (see [`cache`]).

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::{Args, Subcommand};

use crate::OutputFormat;

pub mod cache;
pub mod callback;
pub mod claims;
pub mod error;
pub mod exec_credential;
pub mod flow;
pub mod issuer_url;
pub mod kubeconfig;
pub mod kubeconfig_check;
pub mod login;
pub mod logout;
pub mod oidc;
pub mod pkce;
pub mod retry;
pub mod secret;
pub mod status;
pub mod token;

pub use error::AuthError;

/// Subcommands of `ichor auth`.
#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Print an ExecCredential with a valid ID token (the kubectl exec plugin).
    #[command(after_help = "\
Prints a client.authentication.k8s.io/v1 ExecCredential on stdout and nothing else. A cached ID
token with at least 30 s left (and at most 20 min: Ichor issues none for longer) is printed at once
(no network); otherwise the cached refresh token is used; otherwise, when kubectl allows
interaction and stdin is a terminal, a browser login runs. An issuer asking to slow down (429 with
Retry-After) is waited out, each wait said on stderr, up to 30 s in all; a longer wait fails at
once, keeping the login. Concurrent runs share one refresh: a run waiting for another's browser
login says so and gives up after 6 min. A cache file or directory
ichor did not make (a link, a FIFO, another owner, group or other access, a hard link, a mount
point), or a ~/.ichor of another user, is refused with an error naming it; a cache file a newer
ichor wrote is kept. Diagnostics go to stderr.

Examples:
  ichor auth token --issuer https://ichor.example.com
  ichor auth token --issuer https://ichor.example.com --audience ichor-ui
  ichor auth token --issuer https://ichor.example.com --ca-file ./ichor-ca.pem

In a kubeconfig (users[].user.exec):
  apiVersion: client.authentication.k8s.io/v1
  command: ichor
  args: [auth, token, --issuer, https://ichor.example.com, --client-id, ichor-cli, --audience, ichor-kube]
  interactiveMode: IfAvailable")]
    Token(TokenArgs),
    /// Sign in with the browser and cache the tokens.
    #[command(after_help = "\
Listens on http://127.0.0.1:<random port>/callback, opens the issuer's sign-in page in the browser
and always prints its URL to stderr, for when no browser can be opened here. Your password is
typed only into the issuer's page, never into this command.

Examples:
  ichor auth login --issuer https://ichor.example.com
  ichor auth login --issuer https://ichor.example.com --no-browser
  # Your site's own identity provider, with the client the kube-apiserver trusts for it
  ichor auth login --issuer https://idp.example.com/realms/corp --client-id kubernetes \
    --audience kubernetes --scope 'openid offline_access email profile groups' --prompt consent
  ICHOR_CA_FILE=./ichor-ca.pem ichor auth login --issuer https://ichor.example.com")]
    Login(LoginArgs),
    /// Revoke and delete cached logins.
    #[command(after_help = "\
Sends each matching refresh token to the issuer's revocation endpoint (best effort, 10 s in
total; a failure only warns), then deletes the cached login. Without --issuer every cached login
is removed; without --audience every audience of the issuer.

Examples:
  ichor auth logout
  ichor auth logout --issuer https://ichor.example.com
  ichor auth logout --issuer https://ichor.example.com --audience ichor-ui")]
    Logout(LogoutArgs),
    /// Show the cached logins (user, groups, audience, expiry); never a token.
    #[command(after_help = "\
Examples:
  ichor auth status
  ichor auth status -o json")]
    Status,
    /// Get your kubeconfig from Ichor (no secret inside; kubectl runs `ichor auth token`).
    #[command(after_help = "\
Signs in for audience ichor-ui when needed (the cached login, its refresh token, or the browser on
a terminal) and asks ichor-ui at --issuer for your kubeconfig. Without --out it is printed; with
--out it is written with mode 0600, and an existing file with other content is kept unless --force.

Examples:
  ichor auth kubeconfig --issuer https://ichor.example.com --out ~/.kube/ichor.yaml
  ichor auth kubeconfig --issuer https://ichor.example.com --ca-file ./ichor-ca.pem > kubeconfig
  ichor auth kubeconfig --out ~/.kube/config --force")]
    Kubeconfig(KubeconfigArgs),
}

/// Arguments of `ichor auth kubeconfig`.
#[derive(Debug, Args)]
pub struct KubeconfigArgs {
    /// Ichor's external URL (default: the one issuer with a cached login).
    #[arg(long, value_name = "URL")]
    pub issuer: Option<String>,
    /// Write the kubeconfig to this file (0600) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Replace an existing --out file with other content.
    #[arg(long)]
    pub force: bool,
    /// A PEM CA file trusted for the issuer; the kubeconfig's exec plugin is given it too.
    #[arg(long, value_name = "FILE", env = "ICHOR_CA_FILE")]
    pub ca_file: Option<PathBuf>,
}

/// The values `--prompt` takes.
pub const PROMPTS: [&str; 3] = ["consent", "login", "select_account"];

/// The login a command works on.
#[derive(Debug, Args)]
pub struct TargetArgs {
    /// The issuer: Ichor's external https URL (plain http only to 127.0.0.1, ::1 or localhost).
    #[arg(long, value_name = "URL")]
    pub issuer: String,
    /// The OAuth client id.
    #[arg(long, value_name = "ID", default_value = flow::DEFAULT_CLIENT_ID)]
    pub client_id: String,
    /// The audience of the ID token: `ichor-kube` for kubectl, `ichor-ui` for Ichor's API.
    #[arg(long, value_name = "AUDIENCE", default_value = flow::DEFAULT_AUDIENCE)]
    pub audience: String,
    /// A PEM file of CA certificates trusted for the issuer, on top of the system's roots.
    #[arg(long, value_name = "FILE", env = "ICHOR_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// The scope to ask for; a site's own provider usually needs
    /// "openid offline_access email profile groups" for the claims the kube-apiserver maps.
    #[arg(long, value_name = "SCOPE", default_value = flow::DEFAULT_SCOPE)]
    pub scope: String,
    /// The `prompt` parameter of the sign-in, e.g. `consent` for a provider that gives a refresh
    /// token (offline_access) only with it.
    #[arg(long, value_name = "PROMPT", value_parser = PROMPTS)]
    pub prompt: Option<String>,
}

impl TargetArgs {
    /// The checked login: `--scope` includes `openid`, `--issuer` is an acceptable URL.
    ///
    /// # Errors
    /// [`AuthError::Scope`], [`AuthError::BadUrl`] or [`AuthError::InsecureUrl`].
    pub fn target(&self) -> Result<flow::Target, AuthError> {
        let scope = self.scope.split_whitespace().collect::<Vec<_>>().join(" ");
        if scope.len() > 512 || !scope.split(' ').any(|s| s == "openid") {
            return Err(AuthError::Scope(self.scope.chars().take(512).collect()));
        }
        Ok(flow::Target {
            scope,
            prompt: self.prompt.clone(),
            ..flow::Target::new(
                issuer_url::IssuerUrl::parse(&self.issuer)?,
                &self.client_id,
                &self.audience,
            )
        })
    }
}

/// Arguments of `ichor auth token`.
#[derive(Debug, Args)]
pub struct TokenArgs {
    /// The login.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Arguments of `ichor auth login`.
#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The login.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Do not try to open a browser; only print the URL.
    #[arg(long)]
    pub no_browser: bool,
    /// Seconds to wait for the browser to come back.
    #[arg(long, value_name = "SECONDS", default_value_t = flow::DEFAULT_LOGIN_TIMEOUT.as_secs())]
    pub timeout: u64,
}

/// Arguments of `ichor auth logout`.
#[derive(Debug, Args)]
pub struct LogoutArgs {
    /// Only the logins at this issuer (default: all).
    #[arg(long, value_name = "URL")]
    pub issuer: Option<String>,
    /// Only the logins for this audience (default: all).
    #[arg(long, value_name = "AUDIENCE")]
    pub audience: Option<String>,
    /// A PEM file of CA certificates trusted for the issuer, on top of the system's roots.
    #[arg(long, value_name = "FILE", env = "ICHOR_CA_FILE")]
    pub ca_file: Option<PathBuf>,
}

/// Runs an `ichor auth` subcommand.
///
/// # Errors
/// The subcommand's [`AuthError`], as a message for the user.
pub fn run(cmd: AuthCommand, output: OutputFormat) -> anyhow::Result<ExitCode> {
    match cmd {
        AuthCommand::Token(args) => Ok(token::run(args.target.target()?, args.target.ca_file)?),
        AuthCommand::Login(args) => Ok(login::run(
            args.target.target()?,
            args.target.ca_file,
            !args.no_browser,
            Duration::from_secs(args.timeout),
        )?),
        AuthCommand::Logout(args) => {
            let selection = logout::Selection {
                issuer: args
                    .issuer
                    .as_deref()
                    .map(issuer_url::IssuerUrl::parse)
                    .transpose()?,
                audience: args.audience,
            };
            Ok(logout::run(selection, args.ca_file)?)
        }
        AuthCommand::Status => status::run(output),
        AuthCommand::Kubeconfig(args) => kubeconfig::run(
            args.issuer.as_deref(),
            args.out.as_deref(),
            args.ca_file.as_deref(),
            args.force,
        ),
    }
}
