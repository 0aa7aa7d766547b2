//! The decisions of the migration between the legacy Secret and the per-user Secrets.

use serde_json::json;

use super::*;
use crate::store::group_commit::{EntryWrite, patch_of};

fn view(phase: Option<&str>, value: Option<&str>) -> LegacyView {
    LegacyView {
        resource_version: "900".into(),
        phase: phase.map(Into::into),
        value: value.map(Into::into),
    }
}

fn user() -> Found {
    Found::User {
        uid: "uid-1".into(),
        resource_version: "12".into(),
    }
}

#[test]
fn a_legacy_write_tests_the_phase() {
    assert_eq!(
        phase_pointer(),
        "/metadata/annotations/ichor.maesh.dev~1credentials-layout"
    );
    let found = match after_legacy(Some(&view(Some("legacy"), Some("QQ==")))) {
        AfterLegacy::Found(found) => found,
        other => panic!("{other:?}"),
    };
    assert_eq!(found, Found::Legacy("QQ==".into()));
    let steps = plan(&found, Some("Qg==".into()));
    assert_eq!(
        steps,
        [Step::LegacyPatch {
            phase: Some(Phase::Legacy),
            read: "QQ==".into(),
            value: Some("Qg==".into())
        }]
    );
    // The patch sent: the phase's test first, once, then the key's test and replace.
    let write = EntryWrite {
        name: "alice".into(),
        phase: Some(Phase::Legacy),
        read: "QQ==".into(),
        value: Some("Qg==".into()),
    };
    assert_eq!(
        patch_of(write.phase.map(phase_test), [&write]),
        json!([
            {"op": "test", "path": "/metadata/annotations/ichor.maesh.dev~1credentials-layout", "value": "legacy"},
            {"op": "test", "path": "/data/alice", "value": "QQ=="},
            {"op": "replace", "path": "/data/alice", "value": "Qg=="},
        ])
    );
    // In `returning` the patch tests `returning`, and no step creates a per-user Secret.
    let found = match after_legacy(Some(&view(Some("returning"), Some("QQ==")))) {
        AfterLegacy::Found(found) => found,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        plan(&found, None),
        [Step::LegacyPatch {
            phase: Some(Phase::Returning),
            read: "QQ==".into(),
            value: None
        }]
    );
    let AfterLegacy::AskAgain(absent) = after_legacy(Some(&view(Some("returning"), None))) else {
        panic!("a missing key asks the per-user Secret again");
    };
    assert_eq!(
        plan(&absent, Some("Qg==".into())),
        [Step::LegacyMerge {
            resource_version: "900".into(),
            value: Some("Qg==".into())
        }],
        "a new user goes into the legacy Secret under its resourceVersion"
    );
}

#[test]
fn a_legacy_secret_without_the_phase_gets_legacy_with_its_resource_version() {
    assert_eq!(
        after_legacy(Some(&view(None, Some("QQ==")))),
        AfterLegacy::AddPhase("900".into())
    );
    assert_eq!(
        add_phase_patch("900"),
        json!({"metadata": {"resourceVersion": "900",
                            "annotations": {"ichor.maesh.dev/credentials-layout": "legacy"}}})
    );
    // A phase this release does not know is not guessed at.
    assert_eq!(
        after_legacy(Some(&view(Some("perUser"), Some("QQ==")))),
        AfterLegacy::UnknownPhase
    );
}

#[test]
fn a_write_of_a_legacy_entry_while_migrating_creates_then_removes_the_legacy_key() {
    let AfterLegacy::Found(found) = after_legacy(Some(&view(Some("migrating"), Some("QQ==")))) else {
        panic!("the entry is found in the legacy Secret");
    };
    assert_eq!(
        found,
        Found::Moving {
            read: "QQ==".into(),
            user: String::new()
        }
    );
    assert_eq!(
        plan(&found, Some("Qg==".into())),
        [
            Step::CreateUser("Qg==".into()),
            Step::RemoveLegacy {
                read: "QQ==".into(),
                after_create: Some(String::new())
            },
        ]
    );
    // A new user while migrating gets its own Secret.
    let AfterLegacy::AskAgain(absent) = after_legacy(Some(&view(Some("migrating"), None))) else {
        panic!("a missing key asks the per-user Secret again");
    };
    assert_eq!(
        plan(&absent, Some("Qg==".into())),
        [Step::CreateUser("Qg==".into())]
    );
    // An entry already moved is written where it is.
    assert_eq!(
        plan(&user(), Some("Qg==".into())),
        [Step::ChangeUser {
            resource_version: "12".into(),
            value: "Qg==".into()
        }]
    );
}

#[test]
fn a_key_absent_from_legacy_reads_the_per_user_secret_again() {
    assert_eq!(
        after_legacy(Some(&view(Some("legacy"), None))),
        AfterLegacy::AskAgain(Found::LegacyAbsent("900".into()))
    );
    assert_eq!(
        after_legacy(Some(&view(Some("migrating"), None))),
        AfterLegacy::AskAgain(Found::Nowhere)
    );
    // No legacy Secret (a fresh installation, or the migration's end): the same, and a first
    // entry creates the user's Secret.
    assert_eq!(after_legacy(None), AfterLegacy::AskAgain(Found::Nowhere));
    assert_eq!(
        plan(&Found::Nowhere, Some("QQ==".into())),
        [Step::CreateUser("QQ==".into())]
    );
    assert_eq!(plan(&Found::Nowhere, None), [], "nothing to remove");
}

#[test]
fn a_removal_while_migrating_removes_the_legacy_key_first() {
    assert_eq!(
        plan(
            &Found::Moving {
                read: "QQ==".into(),
                user: "u-1".into()
            },
            None
        ),
        [
            Step::RemoveLegacy {
                read: "QQ==".into(),
                after_create: None
            },
            Step::DeleteUserIfAny,
        ]
    );
    assert_eq!(
        plan(&user(), None),
        [
            Step::RemoveLegacyCopy,
            Step::DeleteUser {
                uid: "uid-1".into(),
                resource_version: "12".into()
            },
        ]
    );
}

#[test]
fn a_version_of_one_layout_or_phase_is_never_taken_for_another() {
    let all = [
        Found::Legacy("QQ==".into()),
        Found::Returning("QQ==".into()),
        Found::Moving {
            read: "QQ==".into(),
            user: "u-1".into(),
        },
        Found::Moving {
            read: "QQ==".into(),
            user: String::new(),
        },
        Found::LegacyAbsent("900".into()),
        user(),
        Found::Nowhere,
    ];
    for found in &all {
        let version = found.version();
        assert_eq!(Found::parse(&version).as_ref(), Some(found), "{version:?}");
        for other in all.iter().filter(|o| *o != found) {
            assert_ne!(other.version(), version);
        }
    }
    for never in [
        "",
        "entry:",
        "absent@",
        "move:",
        "returning:",
        "user@uid@",
        "100",
        "entry",
        "absent",
    ] {
        assert_eq!(Found::parse(&Version(never.to_owned())), None, "{never:?}");
    }
}

/// A move whose removal of the legacy key was refused keeps what it created only when the key
/// vanished (someone removed it as a stale copy of this very Secret) and the `IchorUser` is the
/// one read before the legacy Secret; a phase changed since the read, or a user deleted or made
/// again (another uid), undoes it.
#[test]
fn a_refused_removal_after_a_move_keeps_the_move_only_for_the_same_user_object() {
    let same = UserNow::Live("u-1".into());
    // The sweep removed the key after seeing the new Secret: the move stands.
    assert!(keep_after_refused_removal("QQ==", None, "u-1", &same));
    assert!(keep_after_refused_removal("QQ==", Some("Qg=="), "u-1", &same));
    // The key is still what was read: the phase changed; retried.
    assert!(!keep_after_refused_removal("QQ==", Some("QQ=="), "u-1", &same));
    // Deleted, being deleted, or made again since the read: a stale copy came back.
    assert!(!keep_after_refused_removal("QQ==", None, "u-1", &UserNow::Gone));
    assert!(!keep_after_refused_removal(
        "QQ==",
        None,
        "u-1",
        &UserNow::Live("u-2".into())
    ));
    // No user at the read: never kept.
    assert!(!keep_after_refused_removal(
        "QQ==",
        None,
        "",
        &UserNow::Live(String::new())
    ));
}
