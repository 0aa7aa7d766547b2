//! Signing keys for tests: the committed RSA fixtures (generating 3072-bit keys in every test
//! would take seconds), keys documents made by the controller's own key timeline with them, and
//! the key ring an in-process issuer signs with.

use ichor_renderers::trust::{
    HmacKey, KeyEffect, KeysDocument, KeysPlan, RsaKey, TimelineSettings,
    keys::{HmacSecret, PrivateKeyPem},
};
use jiff::{SignedDuration, Timestamp};

/// The committed RSA-3072 test keys (PKCS#8 PEM), used in turn for each key a plan makes.
pub const PEMS: [&str; 3] = [
    include_str!("../../../../issuer/tests/fixtures/rsa3072-1.pkcs8.pem"),
    include_str!("../../../../issuer/tests/fixtures/rsa3072-2.pkcs8.pem"),
    include_str!("../../../../issuer/tests/fixtures/rsa3072-3.pkcs8.pem"),
];

/// The controller's key timeline settings the tests use: 15-minute maximum token TTL, 48-hour
/// refresh lifetime, a rotation every 24 hours.
pub fn timeline_settings() -> TimelineSettings {
    TimelineSettings::new(SignedDuration::from_mins(15), SignedDuration::from_hours(48))
        .expect("timeline settings")
        .with_rotation_period(SignedDuration::from_hours(24))
        .expect("rotation period")
}

/// Performs a plan's effects the way the controller's applier does, with the fixture keys
/// (`next` counts the keys made so far, to pick a different fixture each time).
pub fn realize(plan: &KeysPlan, current: Option<&KeysDocument>, next: &mut usize) -> KeysDocument {
    let mut doc = plan.apply_changes(current);
    for effect in &plan.effects {
        let k = effect.key();
        match effect {
            KeyEffect::GenerateRsa(_) => {
                let pem = PrivateKeyPem::new(PEMS[*next % PEMS.len()].to_owned()).expect("pem");
                *next += 1;
                let key = RsaKey::new(k.kid.clone(), pem, k.created_at, k.active_from, k.retire_after);
                doc.insert_rsa(key.expect("rsa")).expect("insert");
            }
            KeyEffect::GenerateHmac(_) => {
                let secret = HmacSecret::new([u8::try_from(*next % 250).expect("u8") + 1; 32]);
                *next += 1;
                let key = HmacKey::new(k.kid.clone(), secret, k.created_at, k.active_from, k.retire_after);
                doc.insert_hmac(key.expect("hmac")).expect("insert");
            }
        }
    }
    doc
}

/// The first keys document at `at`, as the controller's timeline makes it.
pub fn first_document(at: Timestamp) -> KeysDocument {
    let plan = ichor_renderers::trust::plan(at, None, &timeline_settings());
    realize(&plan, None, &mut 0)
}
