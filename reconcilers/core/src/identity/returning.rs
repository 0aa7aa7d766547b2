//! The move back into the legacy credentials Secret (docs/credentials-sharding.md, "Rollback"),
//! asked for with `IchorInstallation.spec.users.credentialsLayout: legacy` after the switch:
//! the phase goes `migrating` → `returning`, each user's own Secret is copied back into its key
//! of the legacy Secret and then deleted, and once none is left the phase goes `legacy` (then
//! the issuer may be downgraded). Pure, as [`super::migration`].
//!
//! From the end state (no legacy Secret) the move back is not made by this release: the
//! controller would have to create the legacy Secret again and wait out the issuers' memory of
//! its absence first.

use std::collections::BTreeMap;

use ichor_graph::{Object, ObjectKey};
use ichor_renderers::auth::credentials::CREDENTIALS_SECRET_NAME;
use ichor_renderers::contract::{CREDENTIALS_NAMESPACE, LAYOUT_LEGACY, LAYOUT_MIGRATING, LAYOUT_RETURNING};
use ichor_renderers::trust::NAMESPACE;
use serde::{Deserialize, Serialize};

use super::migration::{Progress, SWEEP_BATCH, Step, SwitchLayoutRequest};
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
/// why that must wait).
pub fn step(
    keys: &BTreeMap<ObjectKey, Object>,
    asks_legacy: bool,
    blocker: Option<String>,
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
    let step = if users.is_empty() {
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
        let (next, progress) = step(&k, true, None);
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
        match step(&done, true, None).0 {
            Step::Switch(s) => assert_eq!((s.from.as_str(), s.to.as_str()), ("returning", "legacy")),
            other => panic!("expected the switch to legacy, got {other:?}"),
        }
        let many: Vec<(String, bool, bool)> = (0..150).map(|i| (format!("u{i:03}"), false, true)).collect();
        let borrowed: Vec<(&str, bool, bool)> = many.iter().map(|(u, l, o)| (u.as_str(), *l, *o)).collect();
        let Step::Return(r) = step(&keys(&borrowed), true, None).0 else {
            panic!("expected a batch")
        };
        assert_eq!(r.users.len(), SWEEP_BATCH);
    }

    #[test]
    fn asked_for_per_user_again_the_phase_goes_back_to_migrating_when_nothing_is_in_the_way() {
        let k = keys(&[("b", false, true)]);
        match step(&k, false, None).0 {
            Step::Switch(s) => assert_eq!((s.from.as_str(), s.to.as_str()), ("returning", "migrating")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(step(&k, false, Some("old pod".into())).0, Step::Wait(_)));
        match start() {
            Step::Switch(s) => assert_eq!((s.from.as_str(), s.to.as_str()), ("migrating", "returning")),
            other => panic!("{other:?}"),
        }
    }
}
