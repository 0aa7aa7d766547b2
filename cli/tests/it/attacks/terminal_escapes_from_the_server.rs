//! A server (hostile, or serving a user written before the rule) answers `ichor user list` and
//! `ichor user get` with a name, display name, e-mail and role holding terminal escape
//! sequences: an OSC that retitles the window and rings the bell, a CSI that clears the screen,
//! the single-character C1 CSI, a carriage return that overwrites the row (and a passkey named
//! so among the user's second factors), and refuses another call with such a message. No control character may reach the terminal, in any output format;
//! each is shown escaped.

use ichor_issuer::api::proto::{Factors, PasskeyInfo, User};

use super::{HostileApi, HostileSite};
use crate::user_support::text;

const OSC_TITLE: &str = "\u{1b}]0;pwned\u{7}";
const CLEAR: &str = "\u{1b}[2J\u{1b}[H";
const C1_CSI: &str = "\u{9b}31m";

fn hostile() -> HostileSite {
    HostileSite::start(|_| HostileApi {
        users: vec![User {
            name: format!("alice{CLEAR}"),
            display_name: format!("Alice{OSC_TITLE}\rroot"),
            email: format!("alice@example.com{C1_CSI}"),
            roles: vec![format!("viewer{CLEAR}")],
            password_set: true,
            ..User::default()
        }],
        factors: Factors {
            passkeys: vec![PasskeyInfo {
                id: "AQID".into(),
                name: format!("key{OSC_TITLE}\r{CLEAR}"),
                created_at: format!("2026{C1_CSI}"),
                ..PasskeyInfo::default()
            }],
            ..Factors::default()
        },
        denial: format!("no{CLEAR}{OSC_TITLE}"),
        ..HostileApi::default()
    })
}

/// No C0 control but the newline, no DEL, no C1 control.
#[track_caller]
fn assert_no_control_characters(what: &str, bytes: &[u8]) {
    let out = text(bytes);
    let found: Vec<char> = out.chars().filter(|c| c.is_control() && *c != '\n').collect();
    assert!(found.is_empty(), "{what} holds {found:?}: {out:?}");
}

#[test]
fn user_list_and_get_print_every_server_field_with_its_control_characters_escaped() {
    let site = hostile();
    for args in [
        &["user", "list"][..],
        &["user", "get", "alice"],
        &["user", "list", "-o", "json"],
        &["user", "get", "alice", "-o", "yaml"],
    ] {
        let out = site.ichor(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out.stderr));
        assert_no_control_characters(&format!("stdout of {args:?}"), &out.stdout);
        assert_no_control_characters(&format!("stderr of {args:?}"), &out.stderr);
    }
    // The table shows what the server sent, escaped, on one row per user.
    let table = text(&site.ichor(&["user", "list"]).stdout);
    assert!(table.contains(r"Alice\u{1b}]0;pwned\u{7}\rroot"), "{table}");
    assert!(table.contains(r"alice\u{1b}[2J\u{1b}[H"), "{table}");
    assert!(table.contains(r"alice@example.com\u{9b}31m"), "{table}");
    assert_eq!(table.lines().count(), 2, "{table}");
    // JSON still carries the exact value for scripts.
    let json: serde_json::Value =
        serde_json::from_slice(&site.ichor(&["user", "list", "-o", "json"]).stdout).unwrap();
    assert_eq!(json["users"][0]["email"], format!("alice@example.com{C1_CSI}"));
    // The passkey's name and date under the user, escaped too.
    let shown = text(&site.ichor(&["user", "get", "alice"]).stdout);
    assert!(shown.contains("2FA: passkey\n"), "{shown}");
    assert!(shown.contains(r"key\u{1b}]0;pwned\u{7}\r\u{1b}[2J"), "{shown}");
}

#[test]
fn a_refusal_quoting_escape_sequences_is_printed_escaped() {
    let site = hostile();
    let out = site.ichor(&["user", "delete", "alice", "--yes"]);
    assert_ne!(out.status.code(), Some(0));
    assert_no_control_characters("the error", &out.stderr);
    assert!(text(&out.stderr).contains(r"\u{1b}[2J"), "{}", text(&out.stderr));
}
