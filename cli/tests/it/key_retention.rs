//! Key rotation under the refresh lifetime the issuer really uses: the controller's key timeline
//! (the identity graph, driven by the simulation's real performers) told the issuer's flags
//! through its `--refresh-lifetime`, and the issuer's own refresh-token code signing a session
//! before a rotation and verifying it, idle, ten days after the key that signed it was
//! superseded.

use base64::Engine as _;
use ichor_controller_core::identity::nodes::users_fallback_object;
use ichor_controller_core::sim::Sim;
use ichor_controller_core::sim::workload::start;
use ichor_graph::{Event, ObjectKey};
use ichor_issuer::keys::LoadedKeys;
use ichor_issuer::tokens::{RefreshClaims, TokenError, sign_artifact, unix_seconds, verify_artifact};
use ichor_renderers::crd::{GoDuration, UsersSettings};
use ichor_renderers::trust::KeysDocument;
use jiff::{SignedDuration, Timestamp};

const ISSUER: &str = "https://ichor.example.com";

fn keys_at(sim: &Sim<std::io::Sink>) -> LoadedKeys {
    let secret = sim
        .controller()
        .world()
        .get(&ObjectKey::new("Secret", "ichor-system", "ichor-oidc-signing"))
        .expect("the signing Secret exists");
    let b64 = secret.value["data"]["keys.json"].as_str().unwrap();
    let json = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
    LoadedKeys::from_document(&KeysDocument::parse(&json).unwrap()).unwrap()
}

/// The identity graph told `refresh_lifetime` by the controller's flag, settled at the start
/// of the simulated time (the first keys generated), and that instant.
fn controller_told(refresh_lifetime: GoDuration) -> (Sim<std::io::Sink>, Timestamp) {
    let mut sim = Sim::new(std::io::sink()).unwrap();
    sim.push(Event::Applied(users_fallback_object(&UsersSettings {
        token_ttl: "5m".parse().unwrap(),
        refresh_lifetime,
        kube_api_server_url: None,
        kube_api_tls_server_name: None,
        second_factor: ichor_renderers::auth::second_factor_policy::SecondFactorPolicy::default(),
    })))
    .unwrap();
    let t0 = start();
    sim.step(Event::Tick(t0)).unwrap();
    (sim, t0)
}

/// A controller told `refresh_lifetime` (its flag, as the chart sets it from the issuer's); a
/// session signed in an hour before the first HMAC rotation with that lifetime; the outcome of
/// refreshing it ten days after the rotation's new key took over.
fn idle_session_after_rotation(
    refresh_lifetime: &str,
) -> (String, String, Result<RefreshClaims, TokenError>) {
    let lifetime: GoDuration = refresh_lifetime.parse().unwrap();
    let (mut sim, t0) = controller_told(lifetime);

    let signed_in = t0 + SignedDuration::from_hours(30 * 24 - 1);
    sim.run_until(signed_in).unwrap();
    let keys = keys_at(&sim);
    let first = keys.signing_hmac(signed_in).unwrap().kid.to_owned();
    let claims = RefreshClaims {
        iss: ISSUER.into(),
        sub: "alice".into(),
        client_id: "kubectl".into(),
        audience: "ichor-kube".into(),
        fam: "f-1".into(),
        generation: 1,
        iat: unix_seconds(signed_in),
        exp: unix_seconds(signed_in) + lifetime.as_secs(),
    };
    let token = sign_artifact(&keys, &claims, signed_in, signed_in).unwrap();

    // The rotation (30 days after the first key) and ten idle days after its key took over.
    let later = t0 + SignedDuration::from_hours(40 * 24 + 1);
    sim.run_until(later).unwrap();
    let keys = keys_at(&sim);
    let now_signing = keys.signing_hmac(later).unwrap().kid.to_owned();
    let result = verify_artifact::<RefreshClaims>(&keys, &token, ISSUER, later);
    (first, now_signing, result)
}

#[test]
fn under_a_thirty_day_refresh_lifetime_an_idle_session_refreshes_after_its_key_was_superseded() {
    let (first, now_signing, result) = idle_session_after_rotation("720h");
    assert_ne!(first, now_signing, "the HMAC key was rotated meanwhile");
    let claims = result.expect("the superseded key still verifies the session");
    assert_eq!((claims.sub.as_str(), claims.fam.as_str()), ("alice", "f-1"));
}

#[test]
fn a_controller_told_twelve_hours_drops_the_superseded_key_and_the_same_session_is_refused() {
    let (first, now_signing, result) = idle_session_after_rotation("12h");
    assert_ne!(first, now_signing);
    assert!(
        matches!(result, Err(TokenError::UnknownKey(ref kid)) if *kid == first),
        "{result:?}"
    );
}

#[test]
fn the_drop_follows_the_flag_not_a_built_in_twelve_hours() {
    // 24 h: the key must still be there 20 hours after supersession, gone after 26.
    let (mut sim, t0) = controller_told(GoDuration::from_secs(24 * 3600));
    let first = keys_at(&sim).signing_hmac(t0).unwrap().kid.to_owned();
    let superseded: Timestamp = t0 + SignedDuration::from_hours(30 * 24) + SignedDuration::from_mins(10);
    sim.run_until(superseded + SignedDuration::from_hours(20))
        .unwrap();
    let at = superseded + SignedDuration::from_hours(20);
    assert!(
        keys_at(&sim).verifying_hmac(&first, at).is_some(),
        "kept for the refresh lifetime"
    );
    let at = superseded + SignedDuration::from_hours(26) + SignedDuration::from_mins(1);
    sim.run_until(at).unwrap();
    assert!(
        keys_at(&sim).verifying_hmac(&first, at).is_none(),
        "dropped after it (+ 2 h margin)"
    );
}
