//! How `ichor user get` shows a user's second factors: one line for people ("2FA: passkey ×2,
//! totp, recovery codes (8 left)" or "2FA: none") and, in JSON and YAML, the kinds, names and
//! dates the server sent (`secondFactors`). The server never sends a secret; nothing here could
//! print one. Pure.

use ichor_issuer::api::proto::Factors;
use serde::Serialize;

use crate::terminal::escape_controls;

/// The one-line summary of `factors` (kinds and counts, no names).
pub fn summary(factors: &Factors) -> String {
    let mut parts = Vec::new();
    match factors.passkeys.len() {
        0 => {}
        1 => parts.push("passkey".to_owned()),
        n => parts.push(format!("passkey ×{n}")),
    }
    if factors.totp.is_some() {
        parts.push("totp".to_owned());
    }
    if let Some(recovery) = &factors.recovery {
        parts.push(format!("recovery codes ({} left)", recovery.remaining));
    }
    if parts.is_empty() {
        "2FA: none".to_owned()
    } else {
        format!("2FA: {}", parts.join(", "))
    }
}

/// The table's lines under the user: the summary, then each passkey by name and date, every
/// field the server sent with its control characters escaped.
pub fn table_lines(factors: &Factors) -> String {
    let mut text = summary(factors);
    text.push('\n');
    for passkey in &factors.passkeys {
        let last = if passkey.last_used_at.is_empty() {
            "never used".to_owned()
        } else {
            format!("last used {}", passkey.last_used_at)
        };
        let disabled = if passkey.cloned_at.is_empty() {
            String::new()
        } else {
            format!(
                ", DISABLED: a copy was detected {} (remove it)",
                passkey.cloned_at
            )
        };
        let line = format!(
            "  passkey {:?}: added {}, {last}{disabled}",
            passkey.name, passkey.created_at
        );
        text.push_str(&escape_controls(&line));
        text.push('\n');
    }
    text
}

/// The second factors as printed in JSON and YAML.
#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FactorsView<'a> {
    /// Passkeys by name and dates.
    pub passkeys: Vec<PasskeyView<'a>>,
    /// When the authenticator app was added; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub totp_created_at: Option<&'a str>,
    /// Unused recovery codes; absent when none were made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery_codes_left: Option<u32>,
}

/// One passkey as printed in JSON and YAML.
#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PasskeyView<'a> {
    /// The credential id.
    pub id: &'a str,
    /// The name its user gave it.
    pub name: &'a str,
    /// When it was added.
    pub created_at: &'a str,
    /// When it last signed in (empty: never).
    pub last_used_at: &'a str,
    /// When a copy of it was detected (it no longer signs in); absent otherwise.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub cloned_at: &'a str,
}

impl<'a> FactorsView<'a> {
    /// The view of `factors`.
    pub fn new(factors: &'a Factors) -> Self {
        Self {
            passkeys: factors
                .passkeys
                .iter()
                .map(|p| PasskeyView {
                    id: &p.id,
                    name: &p.name,
                    created_at: &p.created_at,
                    last_used_at: &p.last_used_at,
                    cloned_at: &p.cloned_at,
                })
                .collect(),
            totp_created_at: factors.totp.as_ref().map(|t| t.created_at.as_str()),
            recovery_codes_left: factors.recovery.as_ref().map(|r| r.remaining),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ichor_issuer::api::proto::{PasskeyInfo, RecoveryCodesInfo, TotpInfo};

    fn all() -> Factors {
        let passkey = |name: &str, last: &str| PasskeyInfo {
            id: "AQID".into(),
            name: name.into(),
            created_at: "2026-12-01T10:00:00Z".into(),
            last_used_at: last.into(),
            backup_eligible: false,
            cloned_at: String::new(),
        };
        Factors {
            passkeys: vec![
                passkey("YubiKey 5", "2026-12-05T08:00:00Z"),
                passkey("phone\u{1b}[31m", ""),
            ],
            totp: Some(TotpInfo {
                created_at: "2026-12-02T10:00:00Z".into(),
            }),
            recovery: Some(RecoveryCodesInfo {
                remaining: 8,
                created_at: "2026-12-02T10:00:00Z".into(),
            }),
        }
    }

    #[test]
    fn the_summary_names_kinds_and_counts() {
        assert_eq!(summary(&Factors::default()), "2FA: none");
        assert_eq!(summary(&all()), "2FA: passkey ×2, totp, recovery codes (8 left)");
        let mut one = all();
        one.passkeys.truncate(1);
        one.totp = None;
        assert_eq!(summary(&one), "2FA: passkey, recovery codes (8 left)");
    }

    #[test]
    fn the_table_lines_list_passkeys_with_controls_escaped() {
        insta::assert_snapshot!(table_lines(&all()));
    }

    #[test]
    fn the_json_view_has_names_and_dates() {
        insta::assert_json_snapshot!(FactorsView::new(&all()));
    }
}
