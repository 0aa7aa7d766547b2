//! Known devices: a browser that signed in before waits for its password check in a small lane
//! of its own instead of behind a flood of sign-ins from unknown devices.
//!
//! A successful sign-in sets the device cookie [`COOKIE`]: an HS256 artifact ([`DeviceClaims`],
//! header `typ` [`TYP_DEVICE`]) naming the user, a random device id and its expiry, signed with
//! the HMAC key ring of the tickets, codes and refresh tokens. The header `typ` is the domain
//! separation: no other artifact verifies as a device cookie, and a device cookie verifies as
//! nothing else. A sign-in that presents a valid cookie for the very user name it signs in as
//! takes its password check through [`FastLane`] (a shared permit when one is free at once, else
//! its own argon2id permit and a short queue) instead of waiting in the shared
//! [`super::passwords::HashGate`]; while it is pending the shared queue starts no new check
//! ([`super::priority`]). The password is verified the same way, and a cookie that is forged,
//! expired, signed by a retired key or for another user is ignored without a word (the sign-in
//! goes through the shared queue like any other). So is one set before the user's credentials
//! entry's `notBefore` (a password set or reset, a revocation of the sessions, a new user of the
//! name), and one of a user that is gone, being deleted or disabled, found once the sign-in has
//! read the user and the entry: the cookie is only provisional until then
//! ([`Presented::confirmed_by`]), its lane place is taken only once it is confirmed, and a voided
//! one makes the sign-in take the limits again as one without a cookie.
//!
//! The limits treat a known device apart too: its sign-ins have a back-off budget of their own
//! ([`super::limits::backoff_key`]), so someone who only knows the user name cannot lock the
//! user out of the devices they signed in on, while the device's own wrong passwords back it off
//! as usual; and its address's failure bucket does not refuse it when emptied by others behind
//! that address (its failures are still charged there).
//!
//! The lane holds one check per user at a time and [`LANE_PERMITS`] + [`LANE_MAX_WAITING`] in
//! all, so a flood cannot move into it: each of its places needs a cookie of a different user,
//! and a cookie is only set after that user's correct password.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, HeaderValue, header};
use ichor_renderers::auth::{UserName, credentials::CredentialsEntry};
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use super::{Issuer, lock, passwords::HashGate, priority::LanePriority};
use crate::{
    keys::LoadedKeys,
    store::StoredUser,
    tokens::{self, Artifact, TokenError},
};

/// The cookie's name. The `__Host-` prefix makes browsers accept it only with `Secure`,
/// `Path=/` and no `Domain`, so no other host (a sibling subdomain) can set or shadow it.
pub const COOKIE: &str = "__Host-ichor-device";
/// Header `typ` of device cookies.
pub const TYP_DEVICE: &str = "ichor-device+jwt";
/// How long a device cookie is honoured after the sign-in that set it; each successful sign-in
/// sets a fresh one. It also ends when its HMAC key retires.
pub const DEVICE_TTL: SignedDuration = SignedDuration::from_hours(30 * 24);
/// Concurrent argon2id checks of the lane, beside the shared ones.
pub const LANE_PERMITS: usize = 1;
/// Checks that may wait for the lane's permit.
pub const LANE_MAX_WAITING: usize = 4;

/// What a device cookie says: this issuer saw `sub` sign in on device `dev` at `iat`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceClaims {
    /// Issuer.
    pub iss: String,
    /// The user who signed in.
    pub sub: String,
    /// A random id of the device, kept across the cookie's renewals.
    pub dev: String,
    /// The sign-in that set the cookie, unix seconds.
    pub iat: i64,
    /// Expiry, unix seconds.
    pub exp: i64,
}

impl Artifact for DeviceClaims {
    const TYP: &'static str = TYP_DEVICE;
    fn iss(&self) -> &str {
        &self.iss
    }
    fn exp(&self) -> i64 {
        self.exp
    }
}

/// A device cookie value for `user` on device `dev`, signed at `now` for [`DEVICE_TTL`].
///
/// # Errors
/// [`TokenError::NoSigningKey`] when no HMAC key is active, [`TokenError::Sign`] otherwise.
pub fn mint(
    keys: &LoadedKeys,
    issuer: &str,
    user: &str,
    dev: &str,
    now: Timestamp,
) -> Result<String, TokenError> {
    let iat = tokens::unix_seconds(now);
    let claims = DeviceClaims {
        iss: issuer.to_owned(),
        sub: user.to_owned(),
        dev: dev.to_owned(),
        iat,
        exp: iat + DEVICE_TTL.as_secs(),
    };
    tokens::sign_artifact(keys, &claims, now, now)
}

/// The claims of `value` when it is a device cookie of this issuer for `user`, valid at `now`
/// (HS256, `typ` [`TYP_DEVICE`], a live key, the MAC compared in constant time, `iss`, `exp`);
/// `None` for anything else, which the caller treats as no cookie at all.
pub fn recognise(
    keys: &LoadedKeys,
    value: &str,
    issuer: &str,
    user: &str,
    now: Timestamp,
) -> Option<DeviceClaims> {
    tokens::verify_artifact::<DeviceClaims>(keys, value, issuer, now)
        .ok()
        .filter(|c| c.sub == user)
}

/// The value of the first [`COOKIE`] in the request's `Cookie` headers.
pub fn from_headers(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then(|| value.trim_matches('"'))
        })
}

/// The `Set-Cookie` header for `value`: `HttpOnly` (no script reads it), `Secure`, `Path=/`
/// (the `__Host-` rules), `SameSite=Strict` (the sign-in form and the web UI post from the
/// issuer's own origin, so no cross-site request needs it) and `Max-Age` of [`DEVICE_TTL`].
pub fn set_cookie(value: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!(
        "{COOKIE}={value}; Path=/; Max-Age={}; Secure; HttpOnly; SameSite=Strict",
        DEVICE_TTL.as_secs()
    ))
    .ok()
}

/// The argon2id lane of known devices: its own [`HashGate`] and the users holding a place in
/// it (one place per user, [`LANE_PERMITS`] + [`LANE_MAX_WAITING`] places in all, so a place
/// never finds the gate's queue full). Each place counts as a pending check in the
/// [`LanePriority`] the shared queue yields to.
#[derive(Debug)]
pub struct FastLane {
    gate: HashGate,
    users: Mutex<HashSet<String>>,
    places: usize,
    priority: Arc<LanePriority>,
}

/// A place in the lane for one user's check, given back when dropped.
#[derive(Debug)]
pub struct LanePlace<'a> {
    lane: &'a FastLane,
    user: String,
}

impl FastLane {
    /// A lane of `permits` concurrent checks and `max_waiting` waiting ones, each pending in
    /// `priority`.
    pub fn new(permits: usize, max_waiting: usize, priority: Arc<LanePriority>) -> Self {
        FastLane {
            gate: HashGate::new(permits, max_waiting),
            users: Mutex::new(HashSet::new()),
            places: permits + max_waiting,
            priority,
        }
    }

    /// The lane's argon2id permits.
    pub fn permits(&self) -> &Arc<tokio::sync::Semaphore> {
        self.gate.semaphore()
    }

    /// How many places are taken now.
    pub fn pending(&self) -> usize {
        lock(&self.users).len()
    }

    /// Whether every place is taken (a known device's sign-in would wait in the shared queue).
    pub fn full(&self) -> bool {
        lock(&self.users).len() >= self.places
    }

    /// A place for `user`, unless that user already holds one or every place is taken (the
    /// sign-in then waits in the shared queue like any other).
    pub fn enter(&self, user: &str) -> Option<LanePlace<'_>> {
        let mut users = lock(&self.users);
        if users.len() >= self.places || users.contains(user) {
            return None;
        }
        users.insert(user.to_owned());
        self.priority.lane_enter();
        Some(LanePlace {
            lane: self,
            user: user.to_owned(),
        })
    }
}

impl LanePlace<'_> {
    /// The gate the place's check goes through.
    pub fn gate(&self) -> &HashGate {
        &self.lane.gate
    }
}

impl Drop for LanePlace<'_> {
    fn drop(&mut self) {
        lock(&self.lane.users).remove(&self.user);
        self.lane.priority.lane_leave();
    }
}

/// A sign-in's known device: the device id of a valid cookie for `name` in `headers`, with a
/// place in the issuer's lane when one is free.
pub(crate) struct Known<'a> {
    /// The device id to keep when the cookie is renewed.
    pub dev: String,
    /// The lane place, `None` when the lane is full.
    pub place: Option<LanePlace<'a>>,
}

/// A device cookie of the user a sign-in names, valid by its MAC, expiry and user: a known
/// device only once [`Presented::confirmed_by`] the user and its credentials entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Presented {
    /// The device id to keep when the cookie is renewed.
    pub dev: String,
    /// When the sign-in that set it happened.
    pub iat: Timestamp,
}

impl Presented {
    /// Whether `user` (the usable user, `None` when it is gone or being deleted) and `entry`
    /// (its credentials entry, `None` when there is none) still honour the cookie: the user
    /// exists and is not disabled, and the cookie was set at or after the entry's `notBefore`,
    /// as a token must be. A password set or reset, a revocation of the user's sessions and a
    /// delete and re-create of the user (a new entry, its `notBefore` its creation) all move
    /// `notBefore` past every cookie set before, so a stolen cookie ends with them; and it ends
    /// as soon as the user is deleted, even while the entry waits for the controller's clean-up.
    pub fn confirmed_by(&self, user: Option<&StoredUser>, entry: Option<&CredentialsEntry>) -> bool {
        user.is_some_and(|u| !u.disabled) && entry.is_some_and(|e| e.accepts_issued_at(self.iat))
    }
}

/// The device cookie of `name` in `headers`, when its MAC, expiry and user are right (`None`
/// also for a missing name or keys). One HMAC check: the sign-in does it before its limits,
/// since a known device has a back-off budget of its own and is not refused by its address's
/// emptied bucket — provisionally: the sign-in confirms it against the credentials entry it
/// reads ([`Presented::confirmed_by`]) and, when it is not, goes on as one without a cookie.
pub(crate) fn device_of(issuer: &Issuer, headers: &HeaderMap, name: Option<&UserName>) -> Option<Presented> {
    let (value, name) = (from_headers(headers)?, name?);
    let keys = issuer.keys().load()?;
    let claims = recognise(&keys, value, issuer.issuer(), name.as_str(), issuer.now())?;
    Some(Presented {
        dev: claims.dev,
        iat: Timestamp::from_second(claims.iat).ok()?,
    })
}

/// The known device `dev` of `name`, with a place in the issuer's lane when one is free.
pub(crate) fn known<'a>(issuer: &'a Issuer, name: &UserName, dev: String) -> Known<'a> {
    Known {
        dev,
        place: issuer.devices.enter(name.as_str()),
    }
}

/// The `Set-Cookie` of a successful sign-in of `user`: the known device's id kept, or a new one.
/// `None` (and a log line) when no cookie can be made; the sign-in succeeds without it.
pub(crate) fn cookie_after_sign_in(issuer: &Issuer, user: &str, dev: Option<String>) -> Option<HeaderValue> {
    let dev = match dev {
        Some(dev) => dev,
        None => super::token::random_id().ok()?,
    };
    let keys = issuer.keys().load()?;
    match mint(&keys, issuer.issuer(), user, &dev, issuer.now()) {
        Ok(value) => set_cookie(&value),
        Err(e) => {
            tracing::warn!(error = %e, "cannot sign a device cookie; the sign-in goes on without one");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::RefreshClaims;
    use ichor_renderers::trust::{HmacKey, KeysDocument, RsaKey, keys::HmacSecret, keys::PrivateKeyPem};

    const PEM: &str = include_str!("../../tests/fixtures/rsa3072-1.pkcs8.pem");
    const ISS: &str = "https://ichor.example.com";

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    /// h-1 signs from January and retires on February 15th; h-2 signs from February on.
    fn keys() -> LoadedKeys {
        let t = ts("2026-01-01T00:00:00Z");
        let rsa = RsaKey::new(
            "k-1".into(),
            PrivateKeyPem::new(PEM.into()).expect("pem"),
            t,
            t,
            None,
        );
        let h1 = HmacKey::new(
            "h-1".into(),
            HmacSecret::new([1; 32]),
            t,
            t,
            Some(ts("2026-02-15T00:00:00Z")),
        );
        let feb = ts("2026-02-01T00:00:00Z");
        let h2 = HmacKey::new("h-2".into(), HmacSecret::new([2; 32]), feb, feb, None);
        let doc = KeysDocument::new(vec![rsa.expect("rsa")], vec![h1.expect("h1"), h2.expect("h2")]);
        LoadedKeys::from_document(&doc.expect("doc")).expect("load")
    }

    fn kid(token: &str) -> String {
        let header = token.split('.').next().expect("header");
        let header: serde_json::Value = serde_json::from_slice(
            &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, header).expect("b64"),
        )
        .expect("json");
        header["kid"].as_str().expect("kid").to_owned()
    }

    #[test]
    fn a_cookie_is_recognised_for_its_user_until_it_expires() {
        let keys = keys();
        let now = ts("2026-01-10T00:00:00Z");
        let cookie = mint(&keys, ISS, "alice", "dev-1", now).expect("mint");
        let claims = recognise(&keys, &cookie, ISS, "alice", now).expect("valid");
        assert_eq!((claims.sub.as_str(), claims.dev.as_str()), ("alice", "dev-1"));
        assert_eq!(claims.exp - claims.iat, DEVICE_TTL.as_secs());
        let last = now + DEVICE_TTL - SignedDuration::from_secs(1);
        assert!(recognise(&keys, &cookie, ISS, "alice", last).is_some());
        assert!(
            recognise(&keys, &cookie, ISS, "alice", now + DEVICE_TTL).is_none(),
            "expired"
        );
    }

    #[test]
    fn a_cookie_is_confirmed_only_by_an_entry_whose_not_before_it_does_not_precede() {
        let set = ts("2026-01-10T00:00:00Z");
        let cookie = Presented {
            dev: "dev-1".into(),
            iat: set,
        };
        let alice = StoredUser {
            name: "alice".into(),
            roles: Vec::new(),
            disabled: false,
            display_name: None,
            email: None,
        };
        let entry = |not_before: &str| CredentialsEntry::new("$argon2id$x".into(), ts(not_before), false);
        assert!(cookie.confirmed_by(Some(&alice), Some(&entry("2026-01-09T00:00:00Z"))));
        assert!(
            cookie.confirmed_by(Some(&alice), Some(&entry("2026-01-10T00:00:00Z"))),
            "the same second"
        );
        assert!(
            !cookie.confirmed_by(Some(&alice), Some(&entry("2026-01-10T00:00:01Z"))),
            "reset after"
        );
        assert!(!cookie.confirmed_by(Some(&alice), None), "no entry");
    }

    #[test]
    fn a_cookie_of_a_user_gone_being_deleted_or_disabled_is_not_confirmed_by_its_entry() {
        let cookie = Presented {
            dev: "dev-1".into(),
            iat: ts("2026-01-10T00:00:00Z"),
        };
        let entry = CredentialsEntry::new("$argon2id$x".into(), ts("2026-01-09T00:00:00Z"), false);
        assert!(
            !cookie.confirmed_by(None, Some(&entry)),
            "the user is gone or being deleted"
        );
        let disabled = StoredUser {
            name: "alice".into(),
            roles: Vec::new(),
            disabled: true,
            display_name: None,
            email: None,
        };
        assert!(!cookie.confirmed_by(Some(&disabled), Some(&entry)), "disabled");
    }

    #[test]
    fn a_cookie_of_another_user_or_issuer_is_ignored() {
        let keys = keys();
        let now = ts("2026-01-10T00:00:00Z");
        let cookie = mint(&keys, ISS, "alice", "dev-1", now).expect("mint");
        assert!(recognise(&keys, &cookie, ISS, "bob", now).is_none());
        assert!(recognise(&keys, &cookie, ISS, "alice2", now).is_none());
        assert!(recognise(&keys, &cookie, "https://other.example.com", "alice", now).is_none());
    }

    #[test]
    fn a_tampered_cookie_is_ignored() {
        let keys = keys();
        let now = ts("2026-01-10T00:00:00Z");
        let cookie = mint(&keys, ISS, "alice", "dev-1", now).expect("mint");
        let parts: Vec<&str> = cookie.split('.').collect();
        // The payload of a cookie for bob under alice's signature.
        let bob = mint(&keys, ISS, "bob", "dev-1", now).expect("mint");
        let bob_payload = bob.split('.').nth(1).expect("payload");
        let swapped = format!("{}.{bob_payload}.{}", parts[0], parts[2]);
        assert!(recognise(&keys, &swapped, ISS, "bob", now).is_none());
        // One bit of the signature flipped.
        let mut sig = parts[2].to_owned().into_bytes();
        sig[0] = if sig[0] == b'A' { b'B' } else { b'A' };
        let flipped = format!(
            "{}.{}.{}",
            parts[0],
            parts[1],
            String::from_utf8(sig).expect("utf8")
        );
        assert!(recognise(&keys, &flipped, ISS, "alice", now).is_none());
        for garbage in ["", "x", "a.b.c", &"a".repeat(tokens::MAX_TOKEN_BYTES + 1)] {
            assert!(
                recognise(&keys, garbage, ISS, "alice", now).is_none(),
                "{garbage:.20}"
            );
        }
    }

    #[test]
    fn no_other_artifact_passes_as_a_cookie_nor_a_cookie_as_another_artifact() {
        let keys = keys();
        let now = ts("2026-01-10T00:00:00Z");
        // A refresh token of alice, signed with the same key, carrying the same fields a cookie has.
        let refresh = RefreshClaims {
            iss: ISS.into(),
            sub: "alice".into(),
            client_id: "ichor-cli".into(),
            audience: "ichor-kube".into(),
            fam: "f1".into(),
            generation: 1,
            iat: now.as_second(),
            exp: now.as_second() + 3600,
        };
        let token = tokens::sign_artifact(&keys, &refresh, now, now).expect("sign");
        assert!(recognise(&keys, &token, ISS, "alice", now).is_none());
        let cookie = mint(&keys, ISS, "alice", "dev-1", now).expect("mint");
        let err = tokens::verify_artifact::<RefreshClaims>(&keys, &cookie, ISS, now).expect_err("typ");
        assert!(matches!(err, TokenError::Type { .. }), "{err:?}");
    }

    #[test]
    fn a_cookie_of_the_previous_key_verifies_until_that_key_retires() {
        let keys = keys();
        let january = ts("2026-01-25T00:00:00Z");
        let cookie = mint(&keys, ISS, "alice", "dev-1", january).expect("mint");
        assert_eq!(kid(&cookie), "h-1");
        let february = ts("2026-02-10T00:00:00Z");
        assert_eq!(
            kid(&mint(&keys, ISS, "alice", "dev-1", february).expect("mint")),
            "h-2"
        );
        assert!(
            recognise(&keys, &cookie, ISS, "alice", february).is_some(),
            "h-1 is still live"
        );
        let retired = ts("2026-02-15T00:00:00Z");
        assert!(
            retired < january + DEVICE_TTL,
            "the cookie itself has not expired"
        );
        assert!(
            recognise(&keys, &cookie, ISS, "alice", retired).is_none(),
            "h-1 retired"
        );
    }

    #[test]
    fn the_cookie_is_found_among_others_and_set_with_its_attributes() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, HeaderValue::from_static("a=1; ichor-device=no"));
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("b=2;__Host-ichor-device=v.w.x ; c=3"),
        );
        assert_eq!(from_headers(&headers), Some("v.w.x"));
        assert_eq!(from_headers(&HeaderMap::new()), None);
        let set = set_cookie("v.w.x").expect("header");
        let set = set.to_str().expect("ascii");
        assert!(set.starts_with("__Host-ichor-device=v.w.x; Path=/;"), "{set}");
        for attribute in ["; Secure", "; HttpOnly", "; SameSite=Strict", "; Max-Age=2592000"] {
            assert!(set.contains(attribute), "{set} lacks {attribute}");
        }
        assert!(!set.contains("Domain"), "{set}");
    }

    #[test]
    fn the_lane_holds_one_place_per_user_and_a_bounded_number_in_all() {
        let priority = Arc::new(LanePriority::default());
        let lane = FastLane::new(1, 1, Arc::clone(&priority));
        let alice = lane.enter("alice").expect("a free place");
        assert!(lane.enter("alice").is_none(), "one place per user");
        let bob = lane.enter("bob").expect("the second place");
        assert!(lane.enter("carol").is_none(), "two places in all");
        assert_eq!(priority.lane_pending(), 2, "each place is a pending check");
        drop(alice);
        assert!(lane.enter("carol").is_some(), "a place given back is free again");
        assert!(lane.enter("alice").is_some());
        drop(bob);
        assert_eq!(priority.lane_pending(), 0, "every place given back");
    }
}
