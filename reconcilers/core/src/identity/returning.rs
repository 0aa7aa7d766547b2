//! The move back into the legacy credentials Secret (docs/credentials-sharding.md, "Rollback"),
//! asked for with `IchorInstallation.spec.users.credentialsLayout: legacy` after the switch:
//! the phase goes `migrating` → `returning`, each user's own Secret is copied back into its key
//! of the legacy Secret and then deleted, and once none is left the phase goes `legacy` (then
//! the issuer may be downgraded). Pure, as [`super::migration`].
//!
//! From the end state (no legacy Secret) the controller first creates the legacy Secret again,
//! empty, in phase `returning` ([`RecreateLegacyRequest`]), and moves nobody back until
//! [`RETURN_WAIT`] has passed since its `creationTimestamp` ([`return_wait`]): an issuer replica
//! that saw it answer 404 does not read it again for 10 s (the issuer's user cache bound), and
//! until it reads it, it takes the end state for granted and would write a user moved back as a
//! new own Secret.

use std::collections::BTreeMap;

use ichor_graph::{Object, ObjectKey, Timed};
use ichor_renderers::auth::credentials::CREDENTIALS_SECRET_NAME;
use ichor_renderers::contract::{
    CREDENTIALS_NAMESPACE, ISSUER_USER_CACHE_SECONDS, LAYOUT_LEGACY, LAYOUT_MIGRATING, LAYOUT_RETURNING,
};
use ichor_renderers::trust::NAMESPACE;
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use super::migration::{LegacyState, Phase, Progress, SWEEP_BATCH, Step, SwitchLayoutRequest};

/// How long after the legacy Secret's creation the move back waits: three times the issuer
/// replicas' memory of its absence ([`ISSUER_USER_CACHE_SECONDS`], 10 s), so that a skew between
/// the API server's clock (which stamps `creationTimestamp`) and the controller's, or a request
/// an issuer still has in flight, does not shorten it below that memory.
pub const RETURN_WAIT: SignedDuration = SignedDuration::from_secs(30);

// The wait outlasts the issuers' memory of an absent legacy Secret, with room to spare.
const _: () = assert!(RETURN_WAIT.as_secs() >= 2 * ISSUER_USER_CACHE_SECONDS as i64);

/// Create the legacy Secret again, as `ichor init` of earlier releases made it (type `Opaque`,
/// labelled `app.kubernetes.io/part-of: ichor`), with no key and the phase `returning`; one that
/// exists already is left as it is (the graph decides again from it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecreateLegacyRequest {
    /// The legacy Secret's namespace.
    pub namespace: String,
    /// The legacy Secret's name.
    pub secret: String,
}

impl RecreateLegacyRequest {
    /// The effect id: `recreate-legacy-credentials`.
    pub fn id(&self) -> String {
        "recreate-legacy-credentials".to_owned()
    }
}

/// No legacy Secret while the installation asks for the legacy layout: create it again.
pub fn recreate() -> Step {
    Step::Recreate(RecreateLegacyRequest {
        namespace: NAMESPACE.to_owned(),
        secret: CREDENTIALS_SECRET_NAME.to_owned(),
    })
}

/// Whether the move back may start: `true` when the legacy Secret is not in phase `returning`
/// or was created at least [`RETURN_WAIT`] before `now`; else `false` until then (the deadline,
/// so the controller evaluates again at that instant). A Secret in `returning` whose creation
/// time is unknown is waited for forever (the move back would otherwise race an issuer's memory
/// of its absence): every Secret the API server serves has one.
pub fn return_wait(now: Timestamp, legacy: &LegacyState) -> Timed<bool> {
    if legacy.phase != Phase::Returning {
        return Timed::forever(true);
    }
    let Some(until) = legacy.created.and_then(|c| c.checked_add(RETURN_WAIT).ok()) else {
        return Timed::forever(false);
    };
    if now >= until {
        Timed::forever(true)
    } else {
        Timed::until(false, until)
    }
}

/// Phase `returning`, asked for legacy, before [`RETURN_WAIT`] has passed: wait, saying until
/// when.
pub fn waiting(created: Option<Timestamp>) -> Step {
    Step::Wait(match created.and_then(|c| c.checked_add(RETURN_WAIT).ok()) {
        Some(until) => format!(
            "{CREDENTIALS_SECRET_NAME} was created again at {}: nobody moves back before {until}, when no issuer \
             replica can still remember it as absent",
            created.map(|c| c.to_string()).unwrap_or_default()
        ),
        None => format!(
            "{CREDENTIALS_SECRET_NAME} in phase {LAYOUT_RETURNING} shows no creationTimestamp: nobody moves back \
             until its creation time is known"
        ),
    })
}
use super::project::CredentialsSources;

/// One batch of the move back: for each user, its own Secret is read (value v at
/// resourceVersion r), one JSON Patch of the legacy Secret tests the phase `returning` and adds
/// every key with its value, then each own Secret is deleted with the preconditions uid and r
/// (changed since: kept, and the next batch copies it again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReturnRequest {
    /// The legacy Secret's namespace.
    pub namespace: String,
    /// The legacy Secret's name.
    pub secret: String,
    /// The namespace of the per-user Secrets.
    pub credentials_namespace: String,
    /// The users moved back by this batch.
    pub users: Vec<String>,
}

impl ReturnRequest {
    /// The effect id: `credentials-return <first user> (<n> keys)`.
    pub fn id(&self) -> String {
        let first = self.users.first().map_or("", String::as_str);
        format!("credentials-return {first} ({} keys)", self.users.len())
    }
}

/// The derived credentials keys → progress of the move back (`moved`: users whose entry is in
/// the legacy Secret alone; `remaining`: users with an own Secret) and the next batch.
pub fn batch(keys: &BTreeMap<ObjectKey, Object>) -> (Progress, Vec<String>) {
    let mut progress = Progress::default();
    let mut users = Vec::new();
    for (key, object) in keys {
        if CredentialsSources::of(object).per_user.is_some() {
            progress.remaining += 1;
            if users.len() < SWEEP_BATCH {
                users.push(key.name.to_string());
            }
        } else {
            progress.moved += 1;
        }
    }
    (progress, users)
}

fn switch(from: &str, to: &str, reason: String) -> Step {
    Step::Switch(SwitchLayoutRequest {
        namespace: NAMESPACE.to_owned(),
        secret: CREDENTIALS_SECRET_NAME.to_owned(),
        from: from.to_owned(),
        to: to.to_owned(),
        reason,
    })
}

/// Phase `migrating` while the installation asks for the legacy layout: the switch to
/// `returning`.
pub fn start() -> Step {
    switch(
        LAYOUT_MIGRATING,
        LAYOUT_RETURNING,
        "the IchorInstallation asks for the legacy layout (spec.users.credentialsLayout)".to_owned(),
    )
}

/// Phase `returning`: the next batch back, or the switch to `legacy` once no own Secret is left
/// (`asks_legacy`); asked for per-user Secrets again, the switch back to `migrating` (`blocker`:
/// why that must wait). `unseen` says why the Secrets of the credentials namespace are not known
/// (not listed, or the namespace not observed): no own Secret seen then proves nothing, and the
/// switch to `legacy` waits (an older issuer reads the legacy Secret alone).
pub fn step(
    keys: &BTreeMap<ObjectKey, Object>,
    asks_legacy: bool,
    blocker: Option<String>,
    unseen: Option<String>,
) -> (Step, Progress) {
    let (progress, users) = batch(keys);
    if !asks_legacy {
        let step = match blocker {
            Some(why) => Step::Wait(why),
            None => switch(
                LAYOUT_RETURNING,
                LAYOUT_MIGRATING,
                "the IchorInstallation asks for perUser again".to_owned(),
            ),
        };
        return (step, progress);
    }
    let step = if let (true, Some(why)) = (users.is_empty(), unseen) {
        Step::Wait(why)
    } else if users.is_empty() {
        switch(
            LAYOUT_RETURNING,
            LAYOUT_LEGACY,
            "no user's own Secret is left: every entry is back in the legacy Secret".to_owned(),
        )
    } else {
        Step::Return(ReturnRequest {
            namespace: NAMESPACE.to_owned(),
            secret: CREDENTIALS_SECRET_NAME.to_owned(),
            credentials_namespace: CREDENTIALS_NAMESPACE.to_owned(),
            users,
        })
    };
    (step, progress)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::project::{CREDENTIALS_KEY_KIND, PerUserSource, credentials_key};
    use serde_json::json;

    fn keys(list: &[(&str, bool, bool)]) -> BTreeMap<ObjectKey, Object> {
        list.iter()
            .map(|(user, legacy, own)| {
                let sources = CredentialsSources {
                    legacy: *legacy,
                    per_user: own.then(|| PerUserSource {
                        uid: Some(format!("u-{user}")),
                    }),
                };
                let value = serde_json::to_value(&sources).unwrap_or_else(|_| json!({}));
                (
                    credentials_key(user),
                    Object::new(CREDENTIALS_KEY_KIND, NAMESPACE, *user, value),
                )
            })
            .collect()
    }

    #[test]
    fn users_with_an_own_secret_go_back_in_batches_and_then_the_phase_is_legacy() {
        let k = keys(&[("a", true, false), ("b", false, true), ("c", true, true)]);
        let (next, progress) = step(&k, true, None, None);
        assert_eq!(
            progress,
            Progress {
                moved: 1,
                remaining: 2
            }
        );
        match next {
            Step::Return(r) => {
                assert_eq!(r.users, ["b", "c"]);
                assert_eq!(r.id(), "credentials-return b (2 keys)");
            }
            other => panic!("expected a batch back, got {other:?}"),
        }
        let done = keys(&[("a", true, false), ("b", true, false)]);
        match step(&done, true, None, None).0 {
            Step::Switch(s) => assert_eq!((s.from.as_str(), s.to.as_str()), ("returning", "legacy")),
            other => panic!("expected the switch to legacy, got {other:?}"),
        }
        // The credentials namespace's Secrets not listed: none seen is not none left.
        match step(&done, true, None, Some("not listed yet".into())).0 {
            Step::Wait(why) => assert_eq!(why, "not listed yet"),
            other => panic!("expected a wait while unlisted, got {other:?}"),
        }
        // Known ones still go back meanwhile.
        assert!(matches!(
            step(&k, true, None, Some("not listed yet".into())).0,
            Step::Return(_)
        ));
        let many: Vec<(String, bool, bool)> = (0..150).map(|i| (format!("u{i:03}"), false, true)).collect();
        let borrowed: Vec<(&str, bool, bool)> = many.iter().map(|(u, l, o)| (u.as_str(), *l, *o)).collect();
        let Step::Return(r) = step(&keys(&borrowed), true, None, None).0 else {
            panic!("expected a batch")
        };
        assert_eq!(r.users.len(), SWEEP_BATCH);
    }

    fn returning(created: Option<&str>) -> LegacyState {
        LegacyState {
            phase: Phase::Returning,
            empty_at: None,
            created: created.map(|c| c.parse().unwrap_or_else(|e| panic!("{e}"))),
        }
    }

    #[test]
    fn the_move_back_waits_thirty_seconds_after_the_legacy_secret_was_created() {
        let t = |s: &str| -> Timestamp { s.parse().unwrap_or_else(|e| panic!("{e}")) };
        let legacy = returning(Some("2027-01-01T00:00:00Z"));
        assert_eq!(
            return_wait(t("2027-01-01T00:00:29Z"), &legacy),
            Timed::until(false, t("2027-01-01T00:00:30Z"))
        );
        // Longer than the issuer replicas' 10 s memory of its absence, whatever the moment.
        assert!(!return_wait(t("2027-01-01T00:00:11Z"), &legacy).value);
        assert_eq!(
            return_wait(t("2027-01-01T00:00:30Z"), &legacy),
            Timed::forever(true)
        );
        assert_eq!(
            return_wait(t("2027-01-01T00:00:00Z"), &returning(None)),
            Timed::forever(false)
        );
        let migrating = LegacyState {
            phase: Phase::Migrating,
            ..returning(None)
        };
        assert_eq!(
            return_wait(t("2027-01-01T00:00:00Z"), &migrating),
            Timed::forever(true)
        );
        match waiting(legacy.created) {
            Step::Wait(why) => assert!(why.contains("2027-01-01T00:00:30Z"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn from_the_end_state_the_legacy_secret_is_created_again_by_its_own_name() {
        match recreate() {
            Step::Recreate(r) => {
                assert_eq!(
                    (r.namespace.as_str(), r.secret.as_str()),
                    (NAMESPACE, CREDENTIALS_SECRET_NAME)
                );
                assert_eq!(r.id(), "recreate-legacy-credentials");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn asked_for_per_user_again_the_phase_goes_back_to_migrating_when_nothing_is_in_the_way() {
        let k = keys(&[("b", false, true)]);
        match step(&k, false, None, None).0 {
            Step::Switch(s) => assert_eq!((s.from.as_str(), s.to.as_str()), ("returning", "migrating")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            step(&k, false, Some("old pod".into()), None).0,
            Step::Wait(_)
        ));
        match start() {
            Step::Switch(s) => assert_eq!((s.from.as_str(), s.to.as_str()), ("migrating", "returning")),
            other => panic!("{other:?}"),
        }
    }
}
