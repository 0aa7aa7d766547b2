//! `ichor auth status`: what each cached login holds, never a token.

use std::process::ExitCode;

use jiff::Timestamp;
use serde::Serialize;

use super::cache::{CacheDir, CacheEntry};
use crate::OutputFormat;

/// One cached login as `ichor auth status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusRow {
    /// The issuer URL.
    pub issuer: String,
    /// The OAuth client id.
    pub client_id: String,
    /// The audience.
    pub audience: String,
    /// The user (`sub`).
    pub user: String,
    /// The user's groups.
    pub groups: Vec<String>,
    /// The ID token's expiry, RFC 3339 UTC.
    pub id_token_expires_at: String,
    /// Whether the ID token is still valid at `now`: not expired, and its `exp` no further ahead
    /// than any token Ichor issues (`ichor auth token` refreshes such a token rather than use it).
    pub id_token_valid: bool,
    /// Whether a refresh token is held (the token itself is never shown).
    pub has_refresh_token: bool,
}

/// The rows for `entries` at `now`, sorted by issuer, audience and user. Pure.
pub fn rows(entries: &[CacheEntry], now: Timestamp) -> Vec<StatusRow> {
    let mut rows: Vec<StatusRow> = entries
        .iter()
        .map(|e| StatusRow {
            issuer: e.issuer.clone(),
            client_id: e.client_id.clone(),
            audience: e.audience.clone(),
            user: e.subject.clone(),
            groups: e.groups.clone(),
            id_token_expires_at: Timestamp::from_second(e.id_token_exp)
                .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
                .unwrap_or_else(|_| format!("invalid ({})", e.id_token_exp)),
            id_token_valid: e.id_token_exp > now.as_second() && !e.exp_too_far_ahead(now),
            has_refresh_token: e.refresh_token.is_some(),
        })
        .collect();
    rows.sort_by(|a, b| (&a.issuer, &a.audience, &a.user).cmp(&(&b.issuer, &b.audience, &b.user)));
    rows
}

/// "4m 30s" for a span of seconds: the two largest units.
fn span(seconds: i64) -> String {
    let s = seconds.unsigned_abs();
    let (d, h, m, sec) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{sec}s"),
        (0, 0, _) => format!("{m}m {sec}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// The table for people: aligned columns, expiry with a relative time at `now`. Pure.
pub fn render_table(entries: &[CacheEntry], now: Timestamp) -> String {
    let header = [
        "ISSUER",
        "USER",
        "GROUPS",
        "AUDIENCE",
        "ID TOKEN EXPIRES",
        "REFRESH TOKEN",
    ];
    let mut lines: Vec<[String; 6]> = vec![header.map(str::to_owned)];
    let mut sorted = entries.to_vec();
    sorted.sort_by(|a, b| (&a.issuer, &a.audience, &a.subject).cmp(&(&b.issuer, &b.audience, &b.subject)));
    for (row, e) in rows(&sorted, now).into_iter().zip(&sorted) {
        let left = e.id_token_exp.saturating_sub(now.as_second());
        let relative = if e.exp_too_far_ahead(now) {
            format!(
                "in {}, further ahead than any token Ichor issues: not used",
                span(left)
            )
        } else if left > 0 {
            format!("in {}", span(left))
        } else {
            format!("expired {} ago", span(left))
        };
        lines.push(
            [
                row.issuer,
                row.user,
                if row.groups.is_empty() {
                    "-".into()
                } else {
                    row.groups.join(",")
                },
                row.audience,
                format!("{} ({relative})", row.id_token_expires_at),
                if row.has_refresh_token { "held" } else { "none" }.into(),
            ]
            // The user and groups are the issuer's claims: printed with control characters escaped.
            .map(|cell| crate::terminal::escape_controls(&cell).into_owned()),
        );
    }
    let widths: Vec<usize> = (0..6)
        .map(|i| lines.iter().map(|l| l[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for l in &lines {
        let cells: Vec<String> = l.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// Runs `ichor auth status`.
///
/// # Errors
/// The cache directory cannot be listed, or output fails.
pub fn run(output: OutputFormat) -> anyhow::Result<ExitCode> {
    let dir = CacheDir::from_env()?;
    let mut entries = Vec::new();
    for listed in dir.list()? {
        match listed.entry {
            Ok(e) => entries.push(e),
            Err(reason) => eprintln!(
                "warning: {}: unusable login cache, ignored ({reason}); `ichor auth logout` removes it",
                listed.path.display()
            ),
        }
    }
    let now = Timestamp::now();
    match output {
        OutputFormat::Table if entries.is_empty() => {
            eprintln!("No cached logins. Sign in with `ichor auth login --issuer URL`.");
        }
        OutputFormat::Table => print!("{}", render_table(&entries, now)),
        OutputFormat::Json => println!(
            "{}",
            crate::terminal::escape_json_controls(&serde_json::to_string_pretty(&rows(&entries, now))?)
        ),
        OutputFormat::Yaml => print!("{}", serde_yaml::to_string(&rows(&entries, now))?),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::commands::auth::{cache::CACHE_VERSION, secret::Secret};

    fn entry(
        issuer: &str,
        audience: &str,
        user: &str,
        groups: &[&str],
        exp: i64,
        refresh: bool,
    ) -> CacheEntry {
        CacheEntry {
            v: CACHE_VERSION,
            issuer: issuer.into(),
            client_id: "ichor-cli".into(),
            audience: audience.into(),
            endpoints: None,
            subject: user.into(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            id_token: Secret::new("ID-TOKEN-NEVER-SHOWN".into()),
            id_token_exp: exp,
            refresh_token: refresh.then(|| Secret::new("REFRESH-NEVER-SHOWN".into())),
        }
    }

    fn now() -> Timestamp {
        "2026-11-29T18:00:30Z".parse().unwrap()
    }

    /// An `exp` decades ahead (an edited file, a clock far off) is one `ichor auth token` never
    /// uses: status must not call it valid either.
    #[test]
    fn an_exp_further_ahead_than_any_token_ichor_issues_is_shown_as_not_valid() {
        let far = entry(
            "https://i",
            "ichor-kube",
            "alice",
            &[],
            now().as_second() + 30 * 365 * 86_400,
            true,
        );
        let near = entry(
            "https://i",
            "ichor-ui",
            "alice",
            &[],
            now().as_second() + 300,
            true,
        );
        let rows = rows(&[far.clone(), near], now());
        assert!(!rows[0].id_token_valid, "{rows:?}");
        assert!(rows[1].id_token_valid, "{rows:?}");
        let table = render_table(&[far], now());
        assert!(
            table.contains("further ahead than any token Ichor issues: not used"),
            "{table}"
        );
    }

    fn entries() -> Vec<CacheEntry> {
        let t = now().as_second();
        vec![
            entry(
                "https://ichor.example.com",
                "ichor-ui",
                "alice",
                &["admin"],
                t - 7300,
                true,
            ),
            entry(
                "https://ichor.example.com",
                "ichor-kube",
                "alice",
                &["admin", "operator"],
                t + 270,
                true,
            ),
            entry("https://lab.example.net", "ichor-kube", "bob", &[], t + 3, false),
        ]
    }

    #[test]
    fn the_table_shows_each_login_with_relative_expiry_and_no_token() {
        let table = render_table(&entries(), now());
        assert!(!table.contains("NEVER-SHOWN"));
        insta::assert_snapshot!(table);
    }

    #[test]
    fn the_json_lists_each_login_and_only_whether_a_refresh_token_is_held() {
        let json = serde_json::to_string_pretty(&rows(&entries(), now())).unwrap();
        assert!(!json.contains("NEVER-SHOWN"));
        insta::assert_snapshot!(json);
    }

    #[test]
    fn spans_use_the_two_largest_units() {
        assert_eq!(span(5), "5s");
        assert_eq!(span(-270), "4m 30s");
        assert_eq!(span(7300), "2h 1m");
        assert_eq!(span(90_000), "1d 1h");
    }
}
