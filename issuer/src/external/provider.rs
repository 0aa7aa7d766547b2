//! [`ExternalProvider`]: the external OpenID Connect provider as configured, checked whole at
//! start-up. Every refusal is a [`ProviderError`] naming the flag (the chart's `ichorUI.oidc.*`
//! values become these flags one to one).

use crate::https_url::plain_https_url;
use ichor_renderers::{authn::prefix, crd::ExternalIssuerSpec};

/// The largest CA file read (a CA bundle is a few KiB).
pub const MAX_CA_BYTES: usize = 256 * 1024;
/// The longest client id, claim name or prefix accepted.
pub const MAX_NAME_LEN: usize = 256;
/// The most groups the API may impersonate for external users.
pub const MAX_IMPERSONABLE_GROUPS: usize = 64;

/// The prefix the kube-apiserver reserves; no external name may start with it.
pub use ichor_renderers::authn::prefix::SYSTEM_PREFIX;

/// The external provider, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalProvider {
    /// The issuer URL exactly as the provider writes it into `iss` (https).
    pub issuer: String,
    /// The OAuth client the UI and the API use with it: the `aud` its ID tokens must carry.
    pub client_id: String,
    /// The client (and audience) the kube-apiserver trusts for this provider: what a
    /// kubeconfig's `ichor auth token` signs in as. Never [`Self::client_id`]: a token a browser
    /// signed in to the UI with must not be a kube-apiserver credential.
    pub kube_client_id: String,
    /// PEM CA certificates trusted for TLS to the provider (besides the system's roots).
    pub ca_pem: Option<String>,
    /// The claim naming the user.
    pub username_claim: String,
    /// The claim listing the groups.
    pub groups_claim: String,
    /// The prefix of user names (e.g. `oidc:`).
    pub username_prefix: String,
    /// The prefix of group names.
    pub groups_prefix: String,
    /// The provider's groups (unprefixed) the API keeps on an external caller's identity: the
    /// issuer may impersonate only these (the chart grants exactly them, prefixed). Others are
    /// left out of the API's identity; `kubectl` still sees them all.
    pub impersonable_groups: Vec<String>,
}

#[cfg(test)]
impl ExternalProvider {
    /// A provider at `https://idp.example.com` as unit tests use it: client `ichor-ui`, the
    /// kube-apiserver's client `kubernetes`, `email` and `groups` claims, `oidc:` prefixes.
    pub(crate) fn example() -> Self {
        ExternalProvider {
            issuer: "https://idp.example.com".into(),
            client_id: "ichor-ui".into(),
            kube_client_id: "kubernetes".into(),
            ca_pem: None,
            username_claim: "email".into(),
            groups_claim: "groups".into(),
            username_prefix: "oidc:".into(),
            groups_prefix: "oidc:".into(),
            impersonable_groups: Vec::new(),
        }
    }
}

/// What the flags gave, before validation (`None`: not given).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderInput {
    /// `--external-issuer-url`.
    pub issuer_url: Option<String>,
    /// `--external-client-id`.
    pub client_id: Option<String>,
    /// `--external-kube-client-id`.
    pub kube_client_id: Option<String>,
    /// `--external-ca-file`, already read: (path as shown, contents or the read error).
    pub ca: Option<(String, Result<Vec<u8>, String>)>,
    /// `--external-username-claim`.
    pub username_claim: Option<String>,
    /// `--external-groups-claim`.
    pub groups_claim: Option<String>,
    /// `--external-username-prefix`.
    pub username_prefix: Option<String>,
    /// `--external-groups-prefix`.
    pub groups_prefix: Option<String>,
    /// `--external-impersonable-group` (repeatable).
    pub impersonable_groups: Vec<String>,
}

/// An external-provider flag was refused. Each message names the flag and what to give.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// Another external flag was given without the issuer URL.
    #[error(
        "{0} needs --external-issuer-url: give the provider's issuer URL, or leave out every --external-* flag"
    )]
    WithoutIssuer(&'static str),
    /// The issuer URL is not an https URL an issuer may have.
    #[error("--external-issuer-url {given:?} {problem}")]
    IssuerUrl {
        /// What was given (cut).
        given: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// The issuer is Ichor's own.
    #[error("--external-issuer-url {0:?} is Ichor's own issuer (--external-url); give the site's provider")]
    IssuerIsIchor(String),
    /// No client id.
    #[error(
        "--external-issuer-url needs --external-client-id: the OAuth client registered at the provider for Ichor (the `aud` of its ID tokens)"
    )]
    MissingClientId,
    /// A value is empty, too long or has characters it may not have.
    #[error("{flag} {given:?} {problem}")]
    Value {
        /// The flag.
        flag: &'static str,
        /// What was given (cut).
        given: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// A prefix would let the provider's users pass for someone else.
    #[error("{flag} {given:?} is not allowed: {reason}")]
    Prefix {
        /// The flag.
        flag: &'static str,
        /// What was given.
        given: String,
        /// Why.
        reason: &'static str,
    },
    /// No client for the kube-apiserver, or the UI's.
    #[error(
        "--external-issuer-url needs --external-kube-client-id, another client than --external-client-id {0:?}: the client the kube-apiserver trusts for the provider (kubeconfigs sign in as it); the UI's client may not be it, or a token a browser signed in with would be a kubectl credential too"
    )]
    KubeClientId(String),
    /// The CA file cannot be used.
    #[error("--external-ca-file {path}: {problem}")]
    CaFile {
        /// The file.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// Too many impersonable groups.
    #[error("--external-impersonable-group is given {0} times; at most 64 groups")]
    TooManyGroups(usize),
}

fn cut(s: &str) -> String {
    s.chars().take(MAX_NAME_LEN).collect()
}

/// Checks a client id, claim name or group: 1 to [`MAX_NAME_LEN`] visible ASCII characters.
fn name(flag: &'static str, given: &str) -> Result<String, ProviderError> {
    let ok = !given.is_empty() && given.len() <= MAX_NAME_LEN && given.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(given.to_owned())
    } else {
        Err(ProviderError::Value {
            flag,
            given: cut(given),
            problem: "must be 1 to 256 visible ASCII characters (no spaces)",
        })
    }
}

/// Checks a prefix: the admission webhook's rule (not empty, and no name made of it can start
/// with `ichor:` or `system:`), and a valid name.
fn prefix_value(flag: &'static str, given: &str) -> Result<String, ProviderError> {
    if let Some(reason) = prefix::refusal(given) {
        return Err(ProviderError::Prefix {
            flag,
            given: cut(given),
            reason,
        });
    }
    name(flag, given)
}

fn issuer_url(given: &str, ichor_issuer: &str) -> Result<String, ProviderError> {
    let refuse = |problem| ProviderError::IssuerUrl {
        given: cut(given),
        problem,
    };
    if given.len() > 2048 {
        return Err(refuse("is longer than 2048 characters"));
    }
    plain_https_url(given).map_err(|e| {
        refuse(e.problem(
            "is not an absolute URL like https://idp.example.com",
            "must use https (ID tokens are verified against keys fetched from it)",
        ))
    })?;
    if given.trim_end_matches('/') == ichor_issuer.trim_end_matches('/') {
        return Err(ProviderError::IssuerIsIchor(cut(given)));
    }
    // Kept exactly as given: `iss` is compared as a string.
    Ok(given.to_owned())
}

fn ca_pem(path: &str, read: &Result<Vec<u8>, String>) -> Result<String, ProviderError> {
    let refuse = |problem: String| ProviderError::CaFile {
        path: path.to_owned(),
        problem,
    };
    let bytes = read
        .as_ref()
        .map_err(|e| refuse(format!("cannot read it: {e}")))?;
    if bytes.len() > MAX_CA_BYTES {
        return Err(refuse(
            "is larger than 256 KiB; give the provider's CA certificate(s) only".into(),
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| refuse("is not PEM text".into()))?;
    if text.contains("PRIVATE KEY") {
        return Err(refuse("holds a private key; give certificates only".into()));
    }
    let certs = rustls_pemfile::certs(&mut text.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| refuse("a certificate block is not valid PEM".into()))?;
    if certs.is_empty() {
        return Err(refuse(
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    Ok(text.to_owned())
}

impl ProviderInput {
    /// Checks the flags together: `None` when no external flag is given. `ichor_issuer` is
    /// Ichor's own issuer, which the external one may not be.
    ///
    /// # Errors
    /// The first [`ProviderError`], naming its flag.
    pub fn validate(self, ichor_issuer: &str) -> Result<Option<ExternalProvider>, ProviderError> {
        let Some(issuer) = self.issuer_url.filter(|s| !s.trim().is_empty()) else {
            let given = [
                ("--external-client-id", self.client_id.is_some()),
                ("--external-kube-client-id", self.kube_client_id.is_some()),
                ("--external-ca-file", self.ca.is_some()),
                ("--external-username-claim", self.username_claim.is_some()),
                ("--external-groups-claim", self.groups_claim.is_some()),
                ("--external-username-prefix", self.username_prefix.is_some()),
                ("--external-groups-prefix", self.groups_prefix.is_some()),
                (
                    "--external-impersonable-group",
                    !self.impersonable_groups.is_empty(),
                ),
            ];
            return match given.iter().find(|(_, set)| *set) {
                Some((flag, _)) => Err(ProviderError::WithoutIssuer(flag)),
                None => Ok(None),
            };
        };
        let issuer = issuer_url(issuer.trim(), ichor_issuer)?;
        let client_id = name(
            "--external-client-id",
            &self.client_id.ok_or(ProviderError::MissingClientId)?,
        )?;
        let kube_client_id = self
            .kube_client_id
            .as_deref()
            .map(|id| name("--external-kube-client-id", id))
            .transpose()?;
        let ca_pem = self
            .ca
            .as_ref()
            .map(|(path, read)| ca_pem(path, read))
            .transpose()?;
        let or = |v: Option<String>, d: &str| v.unwrap_or_else(|| d.to_owned());
        let username_claim = name(
            "--external-username-claim",
            &or(self.username_claim, ExternalIssuerSpec::DEFAULT_USERNAME_CLAIM),
        )?;
        let groups_claim = name(
            "--external-groups-claim",
            &or(self.groups_claim, ExternalIssuerSpec::DEFAULT_GROUPS_CLAIM),
        )?;
        let username_prefix = prefix_value(
            "--external-username-prefix",
            &or(self.username_prefix, ExternalIssuerSpec::DEFAULT_PREFIX),
        )?;
        let groups_prefix = prefix_value(
            "--external-groups-prefix",
            &or(self.groups_prefix, ExternalIssuerSpec::DEFAULT_PREFIX),
        )?;
        if self.impersonable_groups.len() > MAX_IMPERSONABLE_GROUPS {
            return Err(ProviderError::TooManyGroups(self.impersonable_groups.len()));
        }
        let impersonable_groups = self
            .impersonable_groups
            .iter()
            .map(|g| name("--external-impersonable-group", g))
            .collect::<Result<Vec<_>, _>>()?;
        // Checked last, so that each other flag's refusal is the one shown for it.
        let kube_client_id = kube_client_id
            .filter(|id| *id != client_id)
            .ok_or_else(|| ProviderError::KubeClientId(client_id.clone()))?;
        Ok(Some(ExternalProvider {
            issuer,
            client_id,
            kube_client_id,
            ca_pem,
            username_claim,
            groups_claim,
            username_prefix,
            groups_prefix,
            impersonable_groups,
        }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const ICHOR: &str = "https://ichor.example.com";

    fn input() -> ProviderInput {
        ProviderInput {
            issuer_url: Some("https://idp.example.com/realms/corp".into()),
            client_id: Some("ichor".into()),
            kube_client_id: Some("kubernetes".into()),
            ..ProviderInput::default()
        }
    }

    #[test]
    fn no_external_flag_is_no_provider_and_the_defaults_are_the_apiservers() {
        assert_eq!(ProviderInput::default().validate(ICHOR), Ok(None));
        let p = input().validate(ICHOR).unwrap().unwrap();
        assert_eq!(p.issuer, "https://idp.example.com/realms/corp");
        assert_eq!(
            (p.username_claim.as_str(), p.groups_claim.as_str()),
            ("email", "groups")
        );
        assert_eq!(
            (p.username_prefix.as_str(), p.groups_prefix.as_str()),
            ("oidc:", "oidc:")
        );
        assert_eq!(p.ca_pem, None);
    }

    #[test]
    fn every_refusal_names_its_flag() {
        let cases: Vec<(ProviderInput, &str)> = vec![
            (
                ProviderInput {
                    client_id: Some("x".into()),
                    ..ProviderInput::default()
                },
                "--external-client-id needs --external-issuer-url",
            ),
            (
                ProviderInput {
                    issuer_url: Some("http://idp.example.com".into()),
                    ..input()
                },
                "--external-issuer-url \"http://idp.example.com\" must use https",
            ),
            (
                ProviderInput {
                    issuer_url: Some("https://idp.example.com?x=1".into()),
                    ..input()
                },
                "--external-issuer-url",
            ),
            (
                ProviderInput {
                    issuer_url: Some("https://ichor.example.com/".into()),
                    ..input()
                },
                "is Ichor's own issuer",
            ),
            (
                ProviderInput {
                    client_id: None,
                    ..input()
                },
                "needs --external-client-id",
            ),
            (
                ProviderInput {
                    kube_client_id: None,
                    ..input()
                },
                "--external-issuer-url needs --external-kube-client-id, another client than --external-client-id \"ichor\"",
            ),
            (
                ProviderInput {
                    kube_client_id: Some("ichor".into()),
                    ..input()
                },
                "a token a browser signed in with would be a kubectl credential too",
            ),
            (
                ProviderInput {
                    username_claim: Some("the email".into()),
                    ..input()
                },
                "--external-username-claim \"the email\"",
            ),
            (
                ProviderInput {
                    username_prefix: Some(String::new()),
                    ..input()
                },
                "--external-username-prefix \"\" is not allowed",
            ),
            (
                ProviderInput {
                    groups_prefix: Some("ichor:corp:".into()),
                    ..input()
                },
                "--external-groups-prefix \"ichor:corp:\" is not allowed",
            ),
            (
                ProviderInput {
                    username_prefix: Some("system:".into()),
                    ..input()
                },
                "--external-username-prefix \"system:\" is not allowed",
            ),
            (
                ProviderInput {
                    groups_prefix: Some("ichor".into()),
                    ..input()
                },
                "--external-groups-prefix \"ichor\" is not allowed: the provider's names could complete it",
            ),
            (
                ProviderInput {
                    username_prefix: Some("sys".into()),
                    ..input()
                },
                "--external-username-prefix \"sys\" is not allowed",
            ),
            (
                ProviderInput {
                    ca: Some(("ca.pem".into(), Err("No such file".into()))),
                    ..input()
                },
                "--external-ca-file ca.pem: cannot read it",
            ),
            (
                ProviderInput {
                    ca: Some(("ca.pem".into(), Ok(b"-----BEGIN PRIVATE KEY-----\n".to_vec()))),
                    ..input()
                },
                "--external-ca-file ca.pem: holds a private key",
            ),
            (
                ProviderInput {
                    ca: Some(("ca.pem".into(), Ok(b"hello".to_vec()))),
                    ..input()
                },
                "--external-ca-file ca.pem: holds no PEM certificate",
            ),
            (
                ProviderInput {
                    impersonable_groups: vec!["ops team".into()],
                    ..input()
                },
                "--external-impersonable-group \"ops team\"",
            ),
        ];
        for (given, needle) in cases {
            let message = given.clone().validate(ICHOR).unwrap_err().to_string();
            assert!(message.contains(needle), "{given:?}: {message}");
        }
    }
}
