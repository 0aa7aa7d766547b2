//! Where a user's credentials entry lives while both layouts exist, and what a write of it must
//! send: pure decisions, no I/O (the requests are made in [`super`]).
//!
//! The legacy Secret carries the migration's phase in its annotation
//! [`CREDENTIALS_LAYOUT_ANNOTATION`] (docs/credentials-sharding.md, "Migration"):
//! - [`Phase::Legacy`]: entries are written where they are found; a new user's first entry goes
//!   into the legacy Secret; no per-user Secret is created.
//! - [`Phase::Migrating`]: a write of an entry found in the legacy Secret moves it: the per-user
//!   Secret is created with the changed entry, then the legacy key is removed (tested against the
//!   value read). New users get their own Secret.
//! - [`Phase::Returning`]: as `legacy`, but legacy writes test `returning`.
//!
//! No legacy Secret at all is the end state (a fresh installation): every entry has its own
//! Secret.
//!
//! A read ends in a [`Found`], which is also the [`Version`] a write is checked against: the
//! version says in which layout, and under which phase, the entry was read, so a write can never
//! land in the other layout or under another phase than the one read — it is a conflict instead,
//! retried from a fresh read.

use ichor_renderers::contract::{
    CREDENTIALS_LAYOUT_ANNOTATION, LAYOUT_LEGACY, LAYOUT_MIGRATING, LAYOUT_RETURNING,
};

use super::per_user;
use crate::store::Version;

/// Version prefix: an entry of the legacy Secret read in phase `legacy` (the value follows,
/// base64 as the Secret holds it).
const LEGACY_ENTRY: &str = "entry:";
/// Version prefix: an entry of the legacy Secret read in phase `returning`.
const RETURNING_ENTRY: &str = "returning:";
/// Version prefix: an entry of the legacy Secret read in phase `migrating` (a write moves it).
const MOVING_ENTRY: &str = "move:";
/// Version prefix: no entry; the legacy Secret at this `resourceVersion` takes the first one.
const LEGACY_ABSENT: &str = "absent@";

/// The migration's phase, as the legacy Secret's annotation names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// Entries stay where they are; new users go to the legacy Secret.
    Legacy,
    /// A write of a legacy entry moves it to its own Secret.
    Migrating,
    /// The controller moves entries back; no per-user Secret is created.
    Returning,
}

impl Phase {
    /// The phase an annotation value names, `None` for a value this release does not know.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            LAYOUT_LEGACY => Some(Self::Legacy),
            LAYOUT_MIGRATING => Some(Self::Migrating),
            LAYOUT_RETURNING => Some(Self::Returning),
            _ => None,
        }
    }

    /// The annotation value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Legacy => LAYOUT_LEGACY,
            Self::Migrating => LAYOUT_MIGRATING,
            Self::Returning => LAYOUT_RETURNING,
        }
    }
}

/// The JSON Pointer (RFC 6901) of the phase annotation: `/` in its name escaped as `~1`.
pub fn phase_pointer() -> String {
    format!("/metadata/annotations/{}", escape(CREDENTIALS_LAYOUT_ANNOTATION))
}

/// The JSON Pointer of a legacy data key.
pub fn data_pointer(name: &str) -> String {
    format!("/data/{}", escape(name))
}

/// RFC 6901 escaping of one reference token.
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// The JSON Patch operation that refuses a patch unless the legacy Secret is in `phase`.
pub fn phase_test(phase: Phase) -> serde_json::Value {
    serde_json::json!({"op": "test", "path": phase_pointer(), "value": phase.as_str()})
}

/// The merge patch that gives a legacy Secret without a phase the phase `legacy`, only if it is
/// still at `resource_version` (so it never overwrites a phase set since the read).
pub fn add_phase_patch(resource_version: &str) -> serde_json::Value {
    serde_json::json!({
        "metadata": {
            "resourceVersion": resource_version,
            "annotations": { CREDENTIALS_LAYOUT_ANNOTATION: LAYOUT_LEGACY },
        }
    })
}

/// Where a read found the user's entry (or where a first one goes): the version a write is
/// checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// In the legacy Secret in phase `legacy`, with this value (base64).
    Legacy(String),
    /// In the legacy Secret in phase `returning`, with this value.
    Returning(String),
    /// In the legacy Secret in phase `migrating`: a write moves it.
    Moving {
        /// The value read (base64).
        read: String,
        /// The uid of the user's `IchorUser`, read before the legacy Secret (empty when there
        /// was none): what tells a move's refused removal from a user deleted and made again
        /// ([`keep_after_refused_removal`]).
        user: String,
    },
    /// None; the legacy Secret (phase `legacy` or `returning`) at this `resourceVersion` takes it.
    LegacyAbsent(String),
    /// In the user's own Secret with this `uid` and `resourceVersion` (its entry may be absent).
    User {
        /// The Secret's uid.
        uid: String,
        /// The Secret's resourceVersion.
        resource_version: String,
    },
    /// None anywhere; a first entry is the user's own Secret, created.
    Nowhere,
}

impl Found {
    /// The opaque version handed to the caller.
    pub fn version(&self) -> Version {
        Version(match self {
            Self::Legacy(value) => format!("{LEGACY_ENTRY}{value}"),
            Self::Returning(value) => format!("{RETURNING_ENTRY}{value}"),
            Self::Moving { read, user } => format!("{MOVING_ENTRY}{user}:{read}"),
            Self::LegacyAbsent(rv) => format!("{LEGACY_ABSENT}{rv}"),
            Self::User {
                uid,
                resource_version,
            } => per_user::version(uid, resource_version).0,
            Self::Nowhere => per_user::NO_ENTRY_VERSION.to_owned(),
        })
    }

    /// The version back, or `None` for a string this store never hands out (which cannot be
    /// current: the write is a conflict). An empty value or `resourceVersion` is refused: to the
    /// API server an empty `resourceVersion` is no precondition at all.
    pub fn parse(version: &Version) -> Option<Self> {
        let v = version.0.as_str();
        let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        if let Some(value) = v.strip_prefix(LEGACY_ENTRY) {
            return non_empty(value).map(Self::Legacy);
        }
        if let Some(value) = v.strip_prefix(RETURNING_ENTRY) {
            return non_empty(value).map(Self::Returning);
        }
        if let Some(rest) = v.strip_prefix(MOVING_ENTRY) {
            let (user, read) = rest.split_once(':')?;
            return non_empty(read).map(|read| Self::Moving {
                read,
                user: user.to_owned(),
            });
        }
        if let Some(rv) = v.strip_prefix(LEGACY_ABSENT) {
            return non_empty(rv).map(Self::LegacyAbsent);
        }
        if v == per_user::NO_ENTRY_VERSION {
            return Some(Self::Nowhere);
        }
        per_user::parse_version(version).map(|(uid, resource_version)| Self::User {
            uid,
            resource_version,
        })
    }
}

/// The legacy Secret as a read needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyView {
    /// Its `resourceVersion`.
    pub resource_version: String,
    /// Its phase annotation, if any (the raw value).
    pub phase: Option<String>,
    /// The user's value (base64), if it has one.
    pub value: Option<String>,
}

/// What to do after the user's own Secret answered 404 and the legacy Secret was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterLegacy {
    /// The legacy Secret has no phase yet: add `legacy` under this `resourceVersion`
    /// ([`add_phase_patch`]), then read it again.
    AddPhase(String),
    /// The phase annotation holds a value this release does not know: refuse to guess.
    UnknownPhase,
    /// The entry is in the legacy Secret.
    Found(Found),
    /// The legacy Secret has no such key (or there is no legacy Secret): GET the user's own
    /// Secret once more (a move between the two reads created it before it removed the legacy
    /// key); if it is still absent, this is where a first entry goes.
    AskAgain(Found),
}

/// Decides the read of a user whose own Secret was absent, from the legacy Secret (`None`: it
/// answered 404, or this replica saw it answer 404 within the last [`crate::store::USER_CACHE_TTL`]).
pub fn after_legacy(legacy: Option<&LegacyView>) -> AfterLegacy {
    let Some(legacy) = legacy else {
        return AfterLegacy::AskAgain(Found::Nowhere);
    };
    let Some(raw) = legacy.phase.as_deref() else {
        return AfterLegacy::AddPhase(legacy.resource_version.clone());
    };
    let Some(phase) = Phase::parse(raw) else {
        return AfterLegacy::UnknownPhase;
    };
    match (&legacy.value, phase) {
        (Some(value), Phase::Legacy) => AfterLegacy::Found(Found::Legacy(value.clone())),
        (Some(value), Phase::Returning) => AfterLegacy::Found(Found::Returning(value.clone())),
        (Some(value), Phase::Migrating) => AfterLegacy::Found(Found::Moving {
            read: value.clone(),
            user: String::new(),
        }),
        (None, Phase::Legacy | Phase::Returning) => {
            AfterLegacy::AskAgain(Found::LegacyAbsent(legacy.resource_version.clone()))
        }
        (None, Phase::Migrating) => AfterLegacy::AskAgain(Found::Nowhere),
    }
}

/// One request of a credentials write, in the order [`plan`] gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// JSON Patch of the legacy Secret (group-committed): test of the phase, when given, then
    /// test of the key against `read`, then `replace` with `value` or `remove`.
    LegacyPatch {
        /// The phase the patch tests first.
        phase: Option<Phase>,
        /// The value as read (base64).
        read: String,
        /// The new value; `None` removes the key.
        value: Option<String>,
    },
    /// Merge patch of one legacy key under the legacy Secret's `resourceVersion`.
    LegacyMerge {
        /// The resourceVersion read.
        resource_version: String,
        /// The new value; `None` removes the key.
        value: Option<String>,
    },
    /// Remove the legacy key holding `read` (test of the phase `migrating`, test of the value,
    /// remove); a failed test or a missing legacy Secret is a conflict. After a move's create
    /// (`after_create`), that conflict is settled by [`keep_after_refused_removal`]: the Secret
    /// just created is kept, or deleted again (by its uid and resourceVersion) and the write
    /// retried. Any other failure after a create leaves the legacy copy behind (readers take the
    /// user's own Secret first).
    RemoveLegacy {
        /// The value as read (base64).
        read: String,
        /// After this write's create of the user's own Secret (a move): the uid of the user's
        /// `IchorUser` as read before the legacy Secret ([`Found::Moving`]).
        after_create: Option<String>,
    },
    /// Read the legacy Secret now and remove the user's key, if it has one (test of the phase as
    /// read, test of the value as read, remove); a failed test is a conflict.
    RemoveLegacyCopy,
    /// Create the user's own Secret holding `value` (409: a conflict).
    CreateUser(String),
    /// Merge patch of the user's own Secret under its `resourceVersion`.
    ChangeUser {
        /// The resourceVersion read.
        resource_version: String,
        /// The new value.
        value: String,
    },
    /// Delete the user's own Secret with preconditions uid and resourceVersion.
    DeleteUser {
        /// The uid read.
        uid: String,
        /// The resourceVersion read.
        resource_version: String,
    },
    /// Delete the user's own Secret if one exists now (read, then delete with what was read):
    /// one created after the read by a concurrent move that this removal overrides.
    DeleteUserIfAny,
}

/// The user, as a quorum read finds it when a move's removal of the legacy key was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserNow {
    /// No such `IchorUser`, or one being deleted.
    Gone,
    /// There, with this uid.
    Live(String),
}

/// Whether a move keeps the user's own Secret it just created when its removal of the legacy
/// key (as read: `read`, with the user's uid read before it: `user_read`) was refused. Pure.
///
/// - The key still holds `read` (`legacy_now`): nothing else moved it; the phase changed since
///   the read (say to `returning`). Not kept: deleted again and the write retried, which finds
///   the entry where the phase now puts it.
/// - The key is gone (or holds another value): either the controller's sweep removed it as a
///   stale copy after it saw this very Secret (kept: it is the only copy of the write, and
///   deleting it would lose the user's entry), or the entry was moved by another replica and
///   removed with its user since the read, and the create brought a deleted user's entry back
///   (not kept). A user deleted since the read is gone now, or is another object (another uid)
///   if it was made again: only the same `IchorUser` as at the read keeps the move. No clock is
///   involved.
pub fn keep_after_refused_removal(
    read: &str,
    legacy_now: Option<&str>,
    user_read: &str,
    user_now: &UserNow,
) -> bool {
    if legacy_now == Some(read) || user_read.is_empty() {
        return false;
    }
    matches!(user_now, UserNow::Live(uid) if uid == user_read)
}

/// The requests that write `value` (base64; `None` removes the entry) where the read `found`
/// the entry. An empty plan writes nothing (removing an entry there is none of).
pub fn plan(found: &Found, value: Option<String>) -> Vec<Step> {
    match (found, value) {
        (Found::Legacy(read), value) => vec![Step::LegacyPatch {
            phase: Some(Phase::Legacy),
            read: read.clone(),
            value,
        }],
        (Found::Returning(read), value) => vec![Step::LegacyPatch {
            phase: Some(Phase::Returning),
            read: read.clone(),
            value,
        }],
        (Found::LegacyAbsent(resource_version), value) => vec![Step::LegacyMerge {
            resource_version: resource_version.clone(),
            value,
        }],
        // A move: the create is the compare-and-set (of two movers one gets 409); the legacy
        // key is removed after it, so a reader always finds one of the two.
        (Found::Moving { read, user }, Some(value)) => vec![
            Step::CreateUser(value),
            Step::RemoveLegacy {
                read: read.clone(),
                after_create: Some(user.clone()),
            },
        ],
        // A removal while migrating: the legacy key first (its test is the compare-and-set),
        // so a stale copy can never be read after the user's Secret is gone.
        (Found::Moving { read, .. }, None) => vec![
            Step::RemoveLegacy {
                read: read.clone(),
                after_create: None,
            },
            Step::DeleteUserIfAny,
        ],
        (Found::User { resource_version, .. }, Some(value)) => vec![Step::ChangeUser {
            resource_version: resource_version.clone(),
            value,
        }],
        (
            Found::User {
                uid,
                resource_version,
            },
            None,
        ) => vec![
            Step::RemoveLegacyCopy,
            Step::DeleteUser {
                uid: uid.clone(),
                resource_version: resource_version.clone(),
            },
        ],
        (Found::Nowhere, Some(value)) => vec![Step::CreateUser(value)],
        (Found::Nowhere, None) => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
