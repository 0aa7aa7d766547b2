//! The client-go exec plugin protocol: reading `KUBERNETES_EXEC_INFO` and writing the
//! `ExecCredential` reply (see `shared/spec/client-go-exec-credential.md`).

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// `client.authentication.k8s.io/v1`, what Ichor's kubeconfigs ask for.
pub const API_V1: &str = "client.authentication.k8s.io/v1";
/// `client.authentication.k8s.io/v1beta1`, also accepted by client-go.
pub const API_V1BETA1: &str = "client.authentication.k8s.io/v1beta1";

/// What the caller told the plugin in `KUBERNETES_EXEC_INFO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecInfo {
    /// The `apiVersion` the reply must use.
    pub api_version: &'static str,
    /// `spec.interactive`; `None` when the variable is unset (a person ran the command).
    pub interactive: Option<bool>,
}

#[derive(Deserialize)]
struct RawInfo {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    spec: RawSpec,
}

#[derive(Deserialize, Default)]
struct RawSpec {
    #[serde(default)]
    interactive: bool,
}

/// Reads `KUBERNETES_EXEC_INFO`. Unset or empty: not run by client-go. Set but unreadable:
/// answered in v1 and treated as not interactive (the safe side).
pub fn parse_exec_info(raw: Option<&str>) -> ExecInfo {
    let Some(raw) = raw.filter(|r| !r.trim().is_empty()) else {
        return ExecInfo {
            api_version: API_V1,
            interactive: None,
        };
    };
    match serde_json::from_str::<RawInfo>(raw) {
        Ok(info) => ExecInfo {
            api_version: if info.api_version == API_V1BETA1 {
                API_V1BETA1
            } else {
                API_V1
            },
            interactive: Some(info.spec.interactive),
        },
        Err(_) => ExecInfo {
            api_version: API_V1,
            interactive: Some(false),
        },
    }
}

/// Whether this run may open a browser and wait: client-go said so (or did not run us) and
/// standard input is a terminal.
pub fn interactive_allowed(info: &ExecInfo, stdin_is_terminal: bool) -> bool {
    info.interactive.unwrap_or(true) && stdin_is_terminal
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExecCredential<'a> {
    api_version: &'a str,
    kind: &'static str,
    status: Status<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Status<'a> {
    token: &'a str,
    expiration_timestamp: String,
}

/// Why the ExecCredential could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The cached ID token's `exp` is outside the representable time range (log in again).
    #[error("the ID token's exp {exp} is not a time: {reason}")]
    Expiry {
        /// The `exp` claim.
        exp: i64,
        /// Why it is not a time.
        reason: jiff::Error,
    },
    /// The reply could not be serialised.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
}

/// The reply: `{"apiVersion","kind":"ExecCredential","status":{"token","expirationTimestamp"}}`
/// with the token's `exp` as UTC whole seconds (`…Z`), and a trailing newline.
///
/// # Errors
/// [`RenderError::Expiry`] when `exp` is outside the representable time range.
pub fn render(api_version: &str, token: &str, exp: i64) -> Result<String, RenderError> {
    let expiry = Timestamp::from_second(exp).map_err(|reason| RenderError::Expiry { exp, reason })?;
    let credential = ExecCredential {
        api_version,
        kind: "ExecCredential",
        status: Status {
            token,
            expiration_timestamp: expiry.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        },
    };
    let mut text = serde_json::to_string(&credential)?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn renders_the_v1_exec_credential_with_a_utc_whole_second_expiry() {
        let out = render(API_V1, "eyJ.payload.sig", 1_795_975_500).unwrap();
        insta::assert_snapshot!(out, @r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"eyJ.payload.sig","expirationTimestamp":"2026-11-29T18:05:00Z"}}"#);
    }

    #[test]
    fn reads_interactive_and_the_version_from_kubernetes_exec_info() {
        let info = parse_exec_info(Some(
            r#"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":true}}"#,
        ));
        assert_eq!(
            info,
            ExecInfo {
                api_version: API_V1,
                interactive: Some(true)
            }
        );
        let info = parse_exec_info(Some(
            r#"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1","spec":{"interactive":false}}"#,
        ));
        assert_eq!(
            info,
            ExecInfo {
                api_version: API_V1BETA1,
                interactive: Some(false)
            }
        );
    }

    #[test]
    fn interactive_needs_both_the_callers_consent_and_a_terminal() {
        let unset = parse_exec_info(None);
        assert!(interactive_allowed(&unset, true));
        assert!(!interactive_allowed(&unset, false));
        let no = parse_exec_info(Some(
            r#"{"apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":false}}"#,
        ));
        assert!(!interactive_allowed(&no, true));
        let garbage = parse_exec_info(Some("{{{"));
        assert!(!interactive_allowed(&garbage, true));
        assert_eq!(garbage.api_version, API_V1);
    }
}
