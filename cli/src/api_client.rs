//! The client of Ichor's `UserService` (gRPC, `ichor_issuer::api::proto`), used by `ichor user …`
//! and `ichor auth kubeconfig`.
//!
//! # Guarantees
//! - The service is called at `--issuer` (ichor-ui's external URL is also the API's) over https,
//!   trusting the system roots plus `--ca-file`; plain http is refused except to the loopback
//!   (the rule of [`IssuerUrl::parse`]).
//! - Every call carries `authorization: Bearer <ID token>` for audience [`UI_AUDIENCE`] from the
//!   login cache. A token with less than 30 s left is refreshed with the cached refresh token
//!   first (under the login's lock, through [`flow::refresh`]); with none cached the error names
//!   the `ichor auth login … --audience ichor-ui` command to run.
//! - gRPC refusals become one sentence each ([`describe_status`]); a `PermissionDenied`
//!   message is shown as the server wrote it. No token is ever printed.

use std::{path::Path, time::Duration};

use ichor_issuer::api::proto::{
    CreateUserRequest, CreateUserResponse, DeleteUserRequest, Factors, GetMyKubeconfigRequest,
    GetUserFactorsRequest, GetUserRequest, ListUsersRequest, RevokeSessionsRequest, SetPasswordRequest,
    SetPasswordResponse, UpdateUserRequest, User, WhoAmIRequest, WhoAmIResponse,
    user_service_client::UserServiceClient,
};
use jiff::Timestamp;
use tonic::{
    Code, Request, Status,
    metadata::MetadataValue,
    transport::{Certificate, Channel, ClientTlsConfig, Endpoint},
};

use crate::commands::auth::{
    AuthError,
    cache::{CacheDir, Loaded},
    flow::{self, DEFAULT_CLIENT_ID, DEFAULT_LOGIN_TIMEOUT, LoginOptions, Target},
    issuer_url::IssuerUrl,
    oidc::OidcClient,
    secret::Secret,
};

/// The audience `UserService` accepts.
pub use ichor_renderers::contract::UI_AUDIENCE;
/// The largest `--ca-file` read.
const MAX_CA_FILE_BYTES: u64 = 1024 * 1024;
/// Connect timeout of the API connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Whole-call timeout of every API call.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest response accepted (a user list of a few thousand users fits).
const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// Why an API call could not be made or was refused.
#[derive(Debug, thiserror::Error)]
pub enum ApiClientError {
    /// The login step (cache, refresh, sign-in) failed.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The `--ca-file` could not be used for the API connection.
    #[error("--ca-file {path}: {reason}")]
    CaFile {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The connection could not be set up.
    #[error("cannot set up the connection to {url}: {reason}")]
    Transport {
        /// The issuer URL.
        url: String,
        /// The transport's explanation.
        reason: String,
    },
    /// The server refused the call or the call failed; the message says what to do.
    #[error("{0}")]
    Refused(String),
}

/// The `ichor-ui`-audience login for `issuer` (client `ichor-cli`).
pub fn ui_target(issuer: &IssuerUrl) -> Target {
    Target::new(issuer.clone(), DEFAULT_CLIENT_ID, UI_AUDIENCE)
}

/// The bearer token for `target`: a cached ID token with 30 s left, else a refreshed one (under
/// the login's lock, stored), else — only when `interactive` — a browser login (stored). New
/// tokens that cannot be stored are still used, with a warning (see [`CacheLock::store_fresh`]).
///
/// [`CacheLock::store_fresh`]: crate::commands::auth::cache::CacheLock::store_fresh
///
/// # Errors
/// [`AuthError::LoginRequired`] naming the command to run when no login can be used or made;
/// [`AuthError::SessionEnded`] when the refresh token was refused (the cache entry is removed);
/// the network's errors otherwise.
pub async fn bearer(
    dir: &CacheDir,
    target: &Target,
    ca_file: Option<&Path>,
    interactive: bool,
) -> Result<Secret, AuthError> {
    let key = target.key();
    if let Loaded::Usable(entry) = dir.load(&key)
        && entry.is_fresh(Timestamp::now())
    {
        return Ok(entry.id_token.clone());
    }
    let login_required = || AuthError::LoginRequired {
        issuer: target.issuer.to_string(),
        audience: target.audience.clone(),
        login_command: target.login_command(),
    };
    let lock = dir.lock(&key)?;
    let cached = match lock.load() {
        Loaded::Usable(entry) => Some(*entry),
        Loaded::Unusable(reason) => {
            eprintln!("{}", lock.settle(reason, &target.login_command())?);
            None
        }
        Loaded::Absent => None,
    };
    let now = Timestamp::now();
    if let Some(entry) = &cached
        && entry.is_fresh(now)
    {
        return Ok(entry.id_token.clone());
    }
    let client = OidcClient::new(ca_file)?;
    let refreshable = cached.filter(|e| e.refresh_token.is_some());
    if let Some(entry) = &refreshable {
        match flow::refresh(&client, target, entry, now).await {
            Ok(fresh) => {
                // The issuer may already have retired the cached refresh token: the new ID token
                // is used even when it cannot be stored.
                if let Err(warning) = lock.store_fresh(&fresh, &target.login_command()) {
                    eprintln!("{warning}");
                }
                return Ok(fresh.id_token);
            }
            Err(e) if e.is_invalid_grant() => {
                lock.remove()?;
                if !interactive {
                    let description = match &e {
                        AuthError::OAuth {
                            description: Some(d), ..
                        } => d.clone(),
                        _ => "the refresh token was refused".to_owned(),
                    };
                    return Err(AuthError::SessionEnded {
                        issuer: target.issuer.to_string(),
                        description,
                        login_command: target.login_command(),
                    });
                }
            }
            Err(e) => return Err(e),
        }
    }
    if !interactive {
        return Err(login_required());
    }
    let options = LoginOptions {
        open_browser: true,
        timeout: DEFAULT_LOGIN_TIMEOUT,
    };
    let entry = flow::login(&client, target, options, now).await?;
    if let Err(warning) = lock.store_fresh(&entry, &target.login_command()) {
        eprintln!("{warning}");
    }
    Ok(entry.id_token)
}

/// Reads `--ca-file` for the API connection: PEM certificates only.
fn read_ca_file(path: &Path) -> Result<Certificate, ApiClientError> {
    let bad = |reason: String| ApiClientError::CaFile {
        path: path.display().to_string(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    if meta.len() > MAX_CA_FILE_BYTES {
        return Err(bad(format!("larger than {MAX_CA_FILE_BYTES} bytes")));
    }
    let pem = std::fs::read(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
        return Err(bad("holds no PEM certificate".to_owned()));
    }
    Ok(Certificate::from_pem(pem))
}

/// A lazily connecting channel to the API at `issuer`: https with the system roots plus
/// `ca_file`, or plain http to the loopback (already checked by [`IssuerUrl::parse`]).
///
/// # Errors
/// [`ApiClientError::CaFile`] or [`ApiClientError::Transport`].
pub fn channel(issuer: &IssuerUrl, ca_file: Option<&Path>) -> Result<Channel, ApiClientError> {
    let url = issuer.as_str();
    let transport = |reason: String| ApiClientError::Transport {
        url: url.to_owned(),
        reason,
    };
    let mut endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|e| transport(e.to_string()))?
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(CALL_TIMEOUT)
        .user_agent(concat!("ichor/", env!("CARGO_PKG_VERSION")))
        .map_err(|e| transport(e.to_string()))?;
    if url.starts_with("https://") {
        let mut tls = ClientTlsConfig::new().with_native_roots();
        if let Some(path) = ca_file {
            tls = tls.ca_certificate(read_ca_file(path)?);
        }
        endpoint = endpoint.tls_config(tls).map_err(|e| transport(error_chain(&e)))?;
    }
    Ok(endpoint.connect_lazy())
}

/// An error with its causes (tonic's own message leaves them out: "transport error").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

/// One sentence for a refused or failed call `call` at `issuer`. A `PermissionDenied` message
/// is kept exactly as the server wrote it. Pure.
pub fn describe_status(status: &Status, call: &str, target: &Target) -> String {
    let message = status.message();
    let url = target.issuer.as_str();
    match status.code() {
        Code::PermissionDenied => format!("permission denied: {message}"),
        Code::Unauthenticated => format!(
            "{url} did not accept your sign-in ({message}); run `{}`",
            target.login_command()
        ),
        Code::NotFound | Code::AlreadyExists | Code::FailedPrecondition => message.to_owned(),
        Code::InvalidArgument => format!("invalid request: {message}"),
        Code::Aborted => format!("{message}; another change came in between, run the command again"),
        Code::Unimplemented => format!(
            "{url} does not serve Ichor's UserService ({call} is unknown there): is --issuer ichor-ui's \
             external URL?"
        ),
        Code::DeadlineExceeded => format!("{call} at {url} took longer than {} s", CALL_TIMEOUT.as_secs()),
        Code::Unavailable => {
            let detail = match std::error::Error::source(status) {
                Some(source) => error_chain(source),
                None => message.to_owned(),
            };
            format!("{url} is unreachable or unavailable: {detail}")
        }
        code => format!("{call} at {url} failed ({code:?}): {message}"),
    }
}

/// A `UserService` client that sends one login's bearer token.
#[derive(Debug, Clone)]
pub struct UserApiClient {
    client: UserServiceClient<Channel>,
    bearer: MetadataValue<tonic::metadata::Ascii>,
    target: Target,
}

impl UserApiClient {
    /// A client for the API at `target.issuer` that sends `token`.
    ///
    /// # Errors
    /// [`ApiClientError::CaFile`] or [`ApiClientError::Transport`]; a token that cannot be a
    /// header value is [`ApiClientError::Refused`].
    pub fn new(target: Target, token: &Secret, ca_file: Option<&Path>) -> Result<Self, ApiClientError> {
        let channel = channel(&target.issuer, ca_file)?;
        let bearer = format!("Bearer {}", token.expose()).parse().map_err(|_| {
            ApiClientError::Refused(format!(
                "the cached ID token for {} is not usable as a header; run `{}`",
                target.issuer,
                target.login_command()
            ))
        })?;
        let client = UserServiceClient::new(channel).max_decoding_message_size(MAX_RESPONSE_BYTES);
        Ok(Self {
            client,
            bearer,
            target,
        })
    }

    /// Signs in (cache, refresh, or — when `interactive` — the browser) and builds the client.
    ///
    /// # Errors
    /// See [`bearer`] and [`UserApiClient::new`].
    pub async fn connect(
        issuer: &IssuerUrl,
        ca_file: Option<&Path>,
        interactive: bool,
    ) -> Result<Self, ApiClientError> {
        let target = ui_target(issuer);
        let dir = CacheDir::from_env()?;
        let token = bearer(&dir, &target, ca_file, interactive).await?;
        Self::new(target, &token, ca_file)
    }

    fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        request
            .metadata_mut()
            .insert("authorization", self.bearer.clone());
        request
    }

    fn refused(&self, call: &str) -> impl Fn(Status) -> ApiClientError + '_ {
        let call = call.to_owned();
        move |status| ApiClientError::Refused(describe_status(&status, &call, &self.target))
    }

    /// `ListUsers`: every user, sorted by name.
    ///
    /// # Errors
    /// The refusal as a sentence.
    pub async fn list_users(&mut self) -> Result<Vec<User>, ApiClientError> {
        let request = self.request(ListUsersRequest {});
        let response = self.client.clone().list_users(request).await;
        Ok(response.map_err(self.refused("ListUsers"))?.into_inner().users)
    }

    /// `GetUser`.
    ///
    /// # Errors
    /// The refusal as a sentence.
    pub async fn get_user(&mut self, name: &str) -> Result<User, ApiClientError> {
        let request = self.request(GetUserRequest {
            name: name.to_owned(),
        });
        let response = self.client.clone().get_user(request).await;
        response
            .map_err(self.refused("GetUser"))?
            .into_inner()
            .user
            .ok_or_else(|| ApiClientError::Refused(format!("GetUser answered without the user {name:?}")))
    }

    /// `CreateUser`.
    ///
    /// # Errors
    /// The refusal as a sentence.
    pub async fn create_user(
        &mut self,
        request: CreateUserRequest,
    ) -> Result<CreateUserResponse, ApiClientError> {
        let request = self.request(request);
        let response = self.client.clone().create_user(request).await;
        Ok(response.map_err(self.refused("CreateUser"))?.into_inner())
    }

    /// `UpdateUser`; returns the user as stored.
    ///
    /// # Errors
    /// The refusal as a sentence.
    pub async fn update_user(&mut self, request: UpdateUserRequest) -> Result<Option<User>, ApiClientError> {
        let request = self.request(request);
        let response = self.client.clone().update_user(request).await;
        Ok(response.map_err(self.refused("UpdateUser"))?.into_inner().user)
    }

    /// `DeleteUser`.
    ///
    /// # Errors
    /// The refusal as a sentence.
    pub async fn delete_user(&mut self, name: &str) -> Result<(), ApiClientError> {
        let request = self.request(DeleteUserRequest {
            name: name.to_owned(),
        });
        let response = self.client.clone().delete_user(request).await;
        response.map_err(self.refused("DeleteUser"))?;
        Ok(())
    }

    /// `SetPassword`.
    ///
    /// # Errors
    /// The refusal as a sentence.
    pub async fn set_password(
        &mut self,
        request: SetPasswordRequest,
    ) -> Result<SetPasswordResponse, ApiClientError> {
        let request = self.request(request);
        let response = self.client.clone().set_password(request).await;
        Ok(response.map_err(self.refused("SetPassword"))?.into_inner())
    }

    /// `GetUserFactors`: the user's second factors (kinds, names, dates).
    ///
    /// # Errors
    /// The refusal as a sentence.
    pub async fn get_user_factors(&mut self, name: &str) -> Result<Factors, ApiClientError> {
        let request = self.request(GetUserFactorsRequest {
            name: name.to_owned(),
        });
        let response = self.client.clone().get_user_factors(request).await;
        Ok(response
            .map_err(self.refused("GetUserFactors"))?
            .into_inner()
            .factors
            .unwrap_or_default())
    }

    /// `RevokeSessions`.
    ///
    /// # Errors
    /// The refusal as a sentence.
    pub async fn revoke_sessions(&mut self, name: &str) -> Result<(), ApiClientError> {
        let request = self.request(RevokeSessionsRequest {
            name: name.to_owned(),
        });
        let response = self.client.clone().revoke_sessions(request).await;
        response.map_err(self.refused("RevokeSessions"))?;
        Ok(())
    }

    /// `GetMyKubeconfig`: the caller's kubeconfig YAML; `ca_file` (a path on this machine) is
    /// added to the exec plugin's arguments.
    ///
    /// # Errors
    /// The refusal as a sentence.
    pub async fn get_my_kubeconfig(&mut self, ca_file: Option<&str>) -> Result<String, ApiClientError> {
        let request = self.request(GetMyKubeconfigRequest {
            ca_file: ca_file.unwrap_or_default().to_owned(),
        });
        let response = self.client.clone().get_my_kubeconfig(request).await;
        Ok(response
            .map_err(self.refused("GetMyKubeconfig"))?
            .into_inner()
            .kubeconfig)
    }

    /// `WhoAmI`.
    ///
    /// # Errors
    /// The refusal as a sentence.
    pub async fn who_am_i(&mut self) -> Result<WhoAmIResponse, ApiClientError> {
        let request = self.request(WhoAmIRequest {});
        let response = self.client.clone().who_am_i(request).await;
        Ok(response.map_err(self.refused("WhoAmI"))?.into_inner())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn target() -> Target {
        ui_target(&IssuerUrl::parse("https://ichor.example.com").unwrap())
    }

    #[test]
    fn a_permission_refusal_keeps_the_servers_message_word_for_word() {
        let message = "ichor:bob may not create ichorusers: ask an administrator for a role that allows it";
        let text = describe_status(&Status::permission_denied(message), "CreateUser", &target());
        assert_eq!(text, format!("permission denied: {message}"));
    }

    #[test]
    fn an_unauthenticated_call_names_the_ichor_ui_login_command() {
        let text = describe_status(&Status::unauthenticated("token expired"), "ListUsers", &target());
        assert!(
            text.contains("ichor auth login --issuer https://ichor.example.com --audience ichor-ui"),
            "{text}"
        );
        assert!(text.contains("token expired"), "{text}");
    }

    #[test]
    fn an_unknown_method_says_the_url_may_not_be_ichor_ui() {
        let text = describe_status(&Status::unimplemented(""), "ListUsers", &target());
        assert!(text.contains("is --issuer ichor-ui's external URL"), "{text}");
    }

    #[test]
    fn plain_http_to_another_host_is_refused_before_any_connection() {
        let e = IssuerUrl::parse("http://ichor.example.com").unwrap_err();
        assert!(e.to_string().contains("plain http"), "{e}");
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_refused_naming_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate").unwrap();
        let e = channel(
            &IssuerUrl::parse("https://ichor.example.com").unwrap(),
            Some(&path),
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("--ca-file"), "{e}");
    }
}
