//! `/validate/ichorusers`: the grant rule and the last-enabled-admin rule (ADR 0129 decision 2),
//! by the functions of `renderers::auth::roles` the `UserService` API calls, with their messages.
//!
//! - Namespace: IchorUsers live in the install namespace only (ADR 0094: `ichor-system`,
//!   [`AdmissionState::users_namespace`]); the controller and the issuer read no other. A create
//!   elsewhere is refused, by anyone who reaches the webhook, saying where they live
//!   ([`outside_the_users_namespace`]), instead of leaving a user nobody reads. An update or a
//!   delete of one already there (made before this rule) is reviewed as usual, so the garbage
//!   collector can orphan it and its finalizers stay removable.
//! - Grant: an Ichor identity (`ichor:*`) may add to `spec.roles` only what
//!   [`Requester::check_grant`] allows (admin anything; built-in roles up to its highest; custom
//!   roles it holds). Other identities are limited neither by this rule nor by the act-on rule
//!   below: RBAC is their only gate, so any of them with `ichorusers` rights can make admins.
//! - Last enabled admin: an update that turns an enabled admin into something else, or a delete
//!   of one, is refused when no other `IchorUser` of the namespace is an enabled admin. The others
//!   come from the watch cache (`user_cache`), looked at only when the change removes an enabled
//!   admin; the admin the cache names is then read again from the kube-apiserver
//!   ([`confirm_another_admin`]), so a demotion the cache has not seen yet cannot make two
//!   concurrent demotions both pass. A cache that is not synced or has lost its watch refuses.
//!   Users being deleted (a `deletionTimestamp`, kept by a finalizer) are not relied on as
//!   another enabled admin, and updates of them are checked like any other. Exempt: members of
//!   `system:masters` (the override certificate) and the namespace controller and garbage
//!   collector, by name with `system:` groups alone ([`is_exempt_from_last_admin_rule`]: the
//!   issuer may impersonate such a name with `ichor:` groups); no other ServiceAccount.
//! - The requester as it is now: an Ichor identity's token says what it held when it was issued
//!   (it stays valid at the kube-apiserver until it expires), so its `IchorUser` is looked up:
//!   one that is disabled, being deleted or gone is refused, and its roles are the token's
//!   `ichor:<role>` groups that `spec.roles` still holds. A write judged on those roles (one that
//!   adds or takes away a role, disables, re-enables or deletes:
//!   [`rests_on_the_requesters_roles`]) or of the requester itself reads it from the
//!   kube-apiserver ([`UserLister::fresh_requester`]), so a demotion the watch cache has not seen
//!   yet already counts; any other write looks in the cache ([`UserLister::requester`]). A cache
//!   that cannot be trusted, or a read that fails, refuses. A user may not re-enable itself.
//! - Acting on a user: an Ichor identity may re-enable (`spec.disabled` from `true` to `false`)
//!   only a user whose every role it may grant, and may take a role away from, disable or delete
//!   only a user whose every role (before the write) it may grant ([`Requester::check_act_on`],
//!   the API's message): a demoted, disabled or re-created admin would otherwise be a user its
//!   demoter may set the password of, and a disable ends the admin's sessions.
//! - Owner references: a create or update that adds or changes `metadata.ownerReferences`
//!   ([`gives_owners`]) is judged as a delete of the user (the act-on rule for a delete, the
//!   requester read fresh, and the last-enabled-admin rule): the garbage collector, exempt by
//!   name, deletes the user once its owners are gone. Removing every reference is free.
//! - Time: all the kube-apiserver reads of one review share one deadline ([`REVIEW_BUDGET`],
//!   under the webhook's 5 s), each read also bounded by its own timeout; a read cut short
//!   refuses, saying which.
//! - Sessions: a re-enable is refused while the user still has a refresh family from before it
//!   was disabled (the API ends them before it re-enables), and a create is refused while a
//!   credentials entry of an earlier user of the name is still stored (the controller removes it
//!   moments after the delete), so neither a stolen refresh token nor an old password comes back.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use ichor_renderers::auth::roles::{
    LastAdminRefusal, Requester, UserAct, UserChange, UserState, acts_taking_away, check_last_admin,
    is_exempt_from_last_admin_rule,
};
use ichor_renderers::auth::user_name::ICHOR_PREFIX;
use ichor_renderers::crd::{IchorUser, IchorUserSpec};

use super::access::{DEFAULT_CALL_TIMEOUT, UserLister};
use super::review::{self, AdmissionRequest, Decoded, Operation, Verdict, decode};
use super::{AdmissionError, AdmissionState};

/// The kind this webhook admits.
pub const KIND: &str = "IchorUser";

/// Decides one `IchorUser` admission request.
pub async fn review(state: &AdmissionState, req: &AdmissionRequest) -> Verdict {
    // Every read of one review shares one deadline, so the verdict comes before the webhook's.
    let deadline = tokio::time::Instant::now() + REVIEW_BUDGET;
    let spec = |which, object| decode::<IchorUserSpec>(which, KIND, object);
    let decoded = match req.operation {
        Operation::Create => spec("object", req.object.as_ref()).map(|n| (None, Some(n))),
        Operation::Update => spec("oldObject", req.old_object.as_ref())
            .and_then(|o| spec("object", req.object.as_ref()).map(|n| (Some(o), Some(n)))),
        Operation::Delete => spec("oldObject", req.old_object.as_ref()).map(|o| (Some(o), None)),
        Operation::Connect => Err(Verdict::deny(format!(
            "request.operation: {:?} is not admitted for IchorUser; only CREATE, UPDATE and DELETE are",
            review::operation_name(&req.operation)
        ))),
    };
    let (old, new): (Option<Decoded<'_, IchorUserSpec>>, _) = match decoded {
        Ok(pair) => pair,
        Err(denial) => return denial,
    };
    let namespace = match review::namespace(req) {
        "" => [&new, &old]
            .into_iter()
            .find_map(|o| o.as_ref().and_then(|o| o.metadata.namespace.as_deref()))
            .unwrap_or_default(),
        namespace => namespace,
    };
    if let Some(denial) = outside_the_users_namespace(state.users_namespace(), &req.operation, namespace) {
        return denial;
    }
    if let Some(new) = &new
        && let Some(denial) = super::user_texts::refused_texts(old.as_ref().map(|o| &o.spec), &new.spec)
    {
        return denial;
    }
    let username = review::username(req);
    let groups = review::groups(req);

    let name = [&new, &old]
        .into_iter()
        .find_map(|o| o.as_ref().and_then(|o| o.metadata.name.as_deref()))
        .unwrap_or(req.name.as_str());

    // An Ichor requester counts as what its `IchorUser` holds now, not what its token says. When
    // the verdict rests on its roles, or it writes itself, it is read fresh: the watch cache may
    // not have seen its demotion yet (a demoted admin re-promoting itself in that moment).
    // Owner references handed to the user let the garbage collector (exempt, by name) delete it
    // once the owners are gone: such a write is judged as a delete of the user.
    let owned = gives_owners(old.as_ref().map(|o| o.metadata), new.as_ref().map(|n| n.metadata));
    let requester = match Requester::from_identity(username, groups) {
        Some(token) => {
            let fresh = owned
                || rests_on_the_requesters_roles(
                    old.as_ref().map(|o| &o.spec),
                    new.as_ref().map(|n| &n.spec),
                )
                || username.strip_prefix(ICHOR_PREFIX) == Some(name);
            match live_requester(state, namespace, username, &token, fresh, deadline).await {
                Ok(live) => Some(live),
                Err(denial) => return denial,
            }
        }
        None => None,
    };

    // The grant rule: only roles added by this write are checked.
    if let (Some(new), Some(requester)) = (&new, &requester) {
        let old_roles: &[String] = old.as_ref().map_or(&[], |o| o.spec.roles.as_slice());
        if let Err(refusal) = requester.check_grant(old_roles, &new.spec.roles) {
            return Verdict::deny(format!("spec.roles: {refusal}"));
        }
    }

    // Taking a role away, a disable and a delete: the act-on rule on the roles held before.
    if let (Some(requester), Some(old)) = (&requester, &old) {
        let new_state = new.as_ref().map(|n| (n.spec.roles.as_slice(), n.spec.disabled));
        for act in acts_taking_away(&old.spec.roles, old.spec.disabled, new_state) {
            if let Err(refusal) = requester.check_act_on(act, name, &old.spec.roles) {
                let field = match act {
                    UserAct::Demote => "spec.roles: ",
                    UserAct::Disable => "spec.disabled: ",
                    _ => "",
                };
                return Verdict::deny(format!("{field}{refusal}"));
            }
        }
    }

    // New owner references: the act-on rule for a delete, on every role the user holds.
    if owned && let Some(requester) = &requester {
        let held = old
            .as_ref()
            .or(new.as_ref())
            .map_or(&[][..], |o| o.spec.roles.as_slice());
        if let Err(refusal) = requester.check_act_on(UserAct::Delete, name, held) {
            return Verdict::deny(format!("{OWNERS_FIELD}{refusal}{OWNERS_WHY}"));
        }
    }

    // A re-enable hands the user's roles back: the act-on rule, then no session from before.
    let enabling = matches!((&old, &new), (Some(o), Some(n)) if o.spec.disabled && !n.spec.disabled);
    if enabling && let Some(new) = &new {
        if requester.is_some() && username.strip_prefix(ICHOR_PREFIX) == Some(name) {
            return Verdict::deny(format!("spec.disabled: user \"{name}\" may not re-enable itself"));
        }
        if let Some(requester) = &requester
            && let Err(refusal) = requester.check_act_on(UserAct::Enable, name, &new.spec.roles)
        {
            return Verdict::deny(format!("spec.disabled: {refusal}"));
        }
        if let Some(denial) = sessions_from_before(state, namespace, name, deadline).await {
            return denial;
        }
    }
    if old.is_none()
        && let Some(denial) = earlier_credentials(state, namespace, name, deadline).await
    {
        return denial;
    }

    // The last-enabled-admin rule.
    if is_exempt_from_last_admin_rule(username, groups) {
        return Verdict::Allow;
    }
    let Some(old) = old else {
        return Verdict::Allow;
    };
    let old_state = UserState {
        roles: &old.spec.roles,
        disabled: old.spec.disabled,
    };
    let (change, field) = match &new {
        Some(_) if owned => (UserChange::Delete { old: old_state }, OWNERS_FIELD),
        Some(new) => {
            let new_state = UserState {
                roles: &new.spec.roles,
                disabled: new.spec.disabled,
            };
            let field = if new.spec.disabled && !old.spec.disabled {
                "spec.disabled: "
            } else {
                "spec.roles: "
            };
            (
                UserChange::Update {
                    old: old_state,
                    new: new_state,
                },
                field,
            )
        }
        None => (UserChange::Delete { old: old_state }, ""),
    };
    // A change that keeps every enabled admin passes with no other user at all: no list.
    if check_last_admin(name, &change, std::iter::empty::<(&str, &[String], bool)>()).is_ok() {
        return Verdict::Allow;
    }
    let users = match state.lister.cached_users(namespace) {
        Ok(users) => users,
        Err(error) => {
            tracing::warn!(%error, user = name, "admission: the IchorUser cache cannot be used; refusing");
            return refused_until_checked(field, &error);
        }
    };
    let others = users.iter().filter(|u| !is_terminating(u)).map(|u| {
        (
            u.metadata.name.as_deref().unwrap_or_default(),
            u.spec.roles.as_slice(),
            u.spec.disabled,
        )
    });
    if let Err(refusal) = check_last_admin(name, &change, others) {
        return Verdict::deny(format!("{field}{refusal}"));
    }
    // The cache names another enabled admin; it may be a moment behind a demotion of that
    // admin, so one is read again before the change is allowed.
    let candidates = enabled_admins_besides(name, &users);
    let budget = CONFIRM_BUDGET.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
    match tokio::time::timeout(
        budget,
        confirm_another_admin(state.lister.as_ref(), namespace, name, &change, &candidates),
    )
    .await
    {
        Ok(Ok(())) => Verdict::Allow,
        Ok(Err(Unconfirmed::Refused(refusal))) => Verdict::deny(format!("{field}{refusal}")),
        Ok(Err(Unconfirmed::Unreadable(error))) => {
            tracing::warn!(%error, user = name, "admission: an IchorUser read failed; refusing");
            refused_until_checked(field, &error)
        }
        Err(_) => refused_until_checked(field, &AdmissionError::ConfirmTimeout(budget)),
    }
}

/// A create of an `IchorUser` in `namespace`, which is not `users_namespace` (where IchorUsers
/// live: the controller and the issuer read no other namespace, so such a user would be silently
/// ignored): the refusal, saying where they live. `None` for anything else: an update or delete
/// of a stray user made before this rule is harmless (nothing reads it) and must stay possible
/// (the garbage collector orphaning it, its finalizers removed).
pub fn outside_the_users_namespace(
    users_namespace: &str,
    operation: &Operation,
    namespace: &str,
) -> Option<Verdict> {
    (matches!(operation, Operation::Create) && namespace != users_namespace).then(|| {
        Verdict::deny(format!(
            "metadata.namespace: IchorUsers live in the namespace {users_namespace:?} only, where Ichor is \
             installed; one in {namespace:?} would be read by nothing (no sign-in, no role): create it in \
             {users_namespace:?}"
        ))
    })
}

/// The field a write giving a user owner references is refused on.
const OWNERS_FIELD: &str = "metadata.ownerReferences: ";
/// Why owner references are judged as a delete, appended to an act-on refusal.
const OWNERS_WHY: &str = " (owner references let the garbage collector delete the user once its owners are gone, \
     so adding or changing them is judged as deleting it; removing all of them is allowed)";

/// Whether a write from `old` to `new` (`None`: a create, or a delete) adds or changes
/// `metadata.ownerReferences`: the garbage collector deletes an object whose owners are all gone,
/// so such a write can delete the user. Removing every reference cannot, and a delete is judged
/// as one anyway.
pub fn gives_owners(old: Option<&ObjectMeta>, new: Option<&ObjectMeta>) -> bool {
    fn refs(meta: Option<&ObjectMeta>) -> &[OwnerReference] {
        meta.and_then(|m| m.owner_references.as_deref())
            .unwrap_or_default()
    }
    let new_refs = refs(new);
    new.is_some() && !new_refs.is_empty() && new_refs != refs(old)
}

/// How many of the enabled admins the cache names are read again, at most, before the change
/// is refused (each a `GET`; a cache this far behind is refused rather than read through).
pub const MAX_CONFIRMATIONS: usize = 5;
/// How long the reads confirming another enabled admin may take together (the webhook has 5 s).
pub const CONFIRM_BUDGET: Duration = DEFAULT_CALL_TIMEOUT;
/// How long all the reads of one review may take together: under the webhook's 5 s timeout, so
/// a slow kube-apiserver gets this webhook's refusal (with its reason), not a timeout.
pub const REVIEW_BUDGET: Duration = Duration::from_millis(4500);

/// `read` bounded by `deadline` (each read is bounded by its own timeout too); the reason an
/// error gives when the deadline passes first.
async fn by_deadline<T>(
    deadline: tokio::time::Instant,
    read: impl Future<Output = Result<T, AdmissionError>>,
    late: impl FnOnce(String) -> AdmissionError,
) -> Result<T, AdmissionError> {
    match tokio::time::timeout_at(deadline, read).await {
        Ok(result) => result,
        Err(_) => Err(late(format!(
            "no answer within the {REVIEW_BUDGET:?} all reads of one admission review share"
        ))),
    }
}

fn refused_until_checked(field: &str, error: &AdmissionError) -> Verdict {
    Verdict::deny(format!(
        "{field}{error}; the change is refused until it can be checked"
    ))
}

/// Whether a write from `old` to `new` (`None`: a create, or a delete) is judged on the
/// requester's roles: it adds a role (the grant rule), takes one away, disables, re-enables or
/// deletes (the act-on rule). Other writes (display name, e-mail, metadata) are not.
pub fn rests_on_the_requesters_roles(old: Option<&IchorUserSpec>, new: Option<&IchorUserSpec>) -> bool {
    let Some(new) = new else {
        return true;
    };
    let old_roles: &[String] = old.map_or(&[], |o| o.roles.as_slice());
    let adds = new.roles.iter().any(|role| !old_roles.contains(role));
    let changes_the_user = old.is_some_and(|o| {
        o.disabled != new.disabled
            || !acts_taking_away(&o.roles, o.disabled, Some((new.roles.as_slice(), new.disabled))).is_empty()
    });
    adds || changes_the_user
}

/// The Ichor requester `username` (`ichor:<name>`) as its `IchorUser` of `namespace` stands
/// now: `token`'s roles limited to the `spec.roles` it still holds. Looked up in the watch
/// cache, or, when `fresh`, read from the kube-apiserver ([`UserLister::fresh_requester`]). A
/// denial when the user is disabled, being deleted or gone (its token outlived it), or when it
/// cannot be looked up.
async fn live_requester(
    state: &AdmissionState,
    namespace: &str,
    username: &str,
    token: &Requester,
    fresh: bool,
    deadline: tokio::time::Instant,
) -> Result<Requester, Verdict> {
    let name = username.strip_prefix(ICHOR_PREFIX).unwrap_or(username);
    let late = |reason| AdmissionError::ReadRequester {
        name: name.to_owned(),
        reason,
    };
    let looked_up = if fresh {
        by_deadline(deadline, state.lister.fresh_requester(namespace, name), late).await
    } else {
        by_deadline(deadline, state.lister.requester(namespace, name), late).await
    };
    let user = match looked_up {
        Ok(user) => user,
        Err(error) => {
            tracing::warn!(%error, requester = name, "admission: the requester's IchorUser cannot be looked up; refusing");
            return Err(refused_until_checked("", &error));
        }
    };
    match user {
        Some(user) if !user.spec.disabled && !is_terminating(&user) => Ok(token.limited_to(&user.spec.roles)),
        _ => Err(Verdict::deny(format!(
            "Ichor user \"{name}\" is disabled, being deleted or gone: a token it was issued before may \
             not change users; sign in as an enabled user"
        ))),
    }
}

/// Whether the user is being deleted (a `deletionTimestamp`; a finalizer may keep it for long):
/// such a user is no admin another change can rely on.
fn is_terminating(user: &IchorUser) -> bool {
    user.metadata.deletion_timestamp.is_some()
}

/// The enabled admins among `users` other than `user` that are not being deleted, by name: the
/// candidates a change that removes `user` as an enabled admin may rely on.
pub fn enabled_admins_besides(user: &str, users: &[Arc<IchorUser>]) -> Vec<String> {
    let mut names: Vec<String> = users
        .iter()
        .filter(|u| !is_terminating(u))
        .filter_map(|u| {
            let name = u.metadata.name.as_deref()?;
            let state = UserState {
                roles: &u.spec.roles,
                disabled: u.spec.disabled,
            };
            (name != user && state.is_enabled_admin()).then(|| name.to_owned())
        })
        .collect();
    names.sort();
    names
}

/// Why no other enabled admin was confirmed.
#[derive(Debug)]
pub enum Unconfirmed {
    /// Every candidate read is no longer an enabled admin (or is gone): the rule's refusal.
    Refused(LastAdminRefusal),
    /// A read failed: the rule could not be checked.
    Unreadable(AdmissionError),
}

/// Reads the `candidates` (at most [`MAX_CONFIRMATIONS`], in order) from the kube-apiserver
/// until one is still an enabled admin, by [`check_last_admin`] on the fresh object alone. A
/// candidate that is gone, being deleted or no longer an enabled admin is passed over; a failed
/// read stops the search (fail closed).
///
/// # Errors
/// [`Unconfirmed::Refused`] when no candidate is confirmed, [`Unconfirmed::Unreadable`] when a
/// read failed first.
pub async fn confirm_another_admin(
    lister: &dyn UserLister,
    namespace: &str,
    user: &str,
    change: &UserChange<'_>,
    candidates: &[String],
) -> Result<(), Unconfirmed> {
    for candidate in candidates.iter().take(MAX_CONFIRMATIONS) {
        let fresh = lister
            .read_user(namespace, candidate)
            .await
            .map_err(Unconfirmed::Unreadable)?;
        let Some(fresh) = fresh.filter(|f| !is_terminating(f)) else {
            continue;
        };
        let confirmed = [(
            candidate.as_str(),
            fresh.spec.roles.as_slice(),
            fresh.spec.disabled,
        )];
        if check_last_admin(user, change, confirmed).is_ok() {
            return Ok(());
        }
    }
    Err(Unconfirmed::Refused(LastAdminRefusal {
        user: user.to_owned(),
    }))
}

/// A re-enable of `user` while its credentials entry still holds a refresh family that has not
/// ended: the family was started before the disable (a disabled user starts none), so the
/// re-enable would bring a possibly stolen refresh token back. `None` when there is none.
async fn sessions_from_before(
    state: &AdmissionState,
    namespace: &str,
    user: &str,
    deadline: tokio::time::Instant,
) -> Option<Verdict> {
    let read = state.lister.read_credentials(namespace, user);
    let entry = match by_deadline(deadline, read, |reason| credentials_late(user, reason)).await {
        Ok(entry) => entry?,
        Err(error) => {
            tracing::warn!(%error, user, "admission: a credentials entry read failed; refusing");
            return Some(refused_until_checked("spec.disabled: ", &error));
        }
    };
    let live = entry.live_families(jiff::Timestamp::now());
    (live > 0).then(|| {
        Verdict::deny(format!(
            "spec.disabled: user \"{user}\" still has {live} session(s) from before it was disabled, \
             which re-enabling would bring back; end them first (`ichor user revoke-sessions {user}`), \
             or re-enable it with `ichor user update {user} --enable`, which ends them"
        ))
    })
}

/// A create of `user` while a credentials entry of that name is still stored: it belongs to an
/// earlier user of the name (deleted moments ago, its entry not yet collected), and its password
/// and sessions must not pass to the new one. `None` when there is none.
async fn earlier_credentials(
    state: &AdmissionState,
    namespace: &str,
    user: &str,
    deadline: tokio::time::Instant,
) -> Option<Verdict> {
    let read = state.lister.read_credentials(namespace, user);
    match by_deadline(deadline, read, |reason| credentials_late(user, reason)).await {
        Ok(None) => None,
        Ok(Some(_)) => Some(Verdict::deny(format!(
            "metadata.name: the credentials of an earlier user \"{user}\" are still stored (the controller \
             removes them moments after a delete), and its password and sessions must not pass to a new \
             user of the name; retry in a few seconds"
        ))),
        Err(error) => {
            tracing::warn!(%error, user, "admission: a credentials entry read failed; refusing");
            Some(refused_until_checked("metadata.name: ", &error))
        }
    }
}

fn credentials_late(user: &str, reason: String) -> AdmissionError {
    AdmissionError::ReadCredentials {
        name: user.to_owned(),
        reason,
    }
}
