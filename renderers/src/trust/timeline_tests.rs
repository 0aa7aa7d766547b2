//! Tests of the key timeline: the rules one by one, and the 400-day walk at one-minute steps
//! with a simulated applier (effects landing at once, or a few minutes late).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::keys::*;
use super::testdata::RSA2048_PKCS8;
use super::timeline::*;
use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;
use std::collections::{HashMap, VecDeque};
use std::time::Instant;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn mins(m: i64) -> SignedDuration {
    SignedDuration::from_mins(m)
}

fn days(d: i64) -> SignedDuration {
    SignedDuration::from_hours(24 * d)
}

fn pem() -> PrivateKeyPem {
    PrivateKeyPem::new(RSA2048_PKCS8.into()).unwrap()
}

/// Performs effects the way the applier does, with a fixed PEM and a secret derived from the kid.
fn materialize(doc: &mut KeysDocument, effects: &[KeyEffect], pem: &PrivateKeyPem) {
    for effect in effects {
        let k = effect.key();
        match effect {
            KeyEffect::GenerateRsa(_) => doc
                .insert_rsa(
                    RsaKey::new(
                        k.kid.clone(),
                        pem.clone(),
                        k.created_at,
                        k.active_from,
                        k.retire_after,
                    )
                    .unwrap(),
                )
                .unwrap(),
            KeyEffect::GenerateHmac(_) => {
                let secret = HmacSecret::new([k.kid.len() as u8; 32]);
                doc.insert_hmac(
                    HmacKey::new(k.kid.clone(), secret, k.created_at, k.active_from, k.retire_after).unwrap(),
                )
                .unwrap()
            }
        }
    }
}

fn applied(now: Timestamp, doc: Option<&KeysDocument>, settings: &TimelineSettings) -> KeysDocument {
    let p = plan(now, doc, settings);
    let mut d = p.apply_changes(doc);
    materialize(&mut d, &p.effects, &pem());
    d
}

fn kids<K: KeyTimes>(keys: &[K]) -> Vec<&str> {
    keys.iter().map(|k| k.kid()).collect()
}

#[test]
fn with_no_document_asks_for_both_first_keys_active_at_once() {
    let now = ts("2027-01-01T12:34:56Z");
    let p = plan(now, None, &TimelineSettings::default());
    assert!(p.changes.is_empty());
    assert_eq!(p.effects.len(), 2);
    let rsa = p.effects[0].key();
    assert!(matches!(p.effects[0], KeyEffect::GenerateRsa(_)));
    assert_eq!(
        (
            rsa.kid.as_str(),
            rsa.created_at,
            rsa.active_from,
            rsa.retire_after
        ),
        ("k-20270101-1234", now, now, None)
    );
    assert_eq!(rsa.reason, GenerateReason::NoSigningKey);
    assert!(matches!(p.effects[1], KeyEffect::GenerateHmac(_)));
    assert_eq!(p.effects[1].key().kid, "h-20270101-1234");
    assert_eq!(p.effects[1].key().active_from, now);
}

#[test]
fn after_the_first_keys_the_next_deadline_is_the_rotation_thirty_days_later() {
    let t0 = ts("2027-01-01T00:00:00Z");
    let settings = TimelineSettings::default();
    let doc = applied(t0, None, &settings);
    let p = plan(t0, Some(&doc), &settings);
    assert!(p.is_settled(), "{p:?}");
    assert_eq!(p.next_deadline, Some(ts("2027-01-31T00:00:00Z")));
    assert!(plan(ts("2027-01-30T23:59:59Z"), Some(&doc), &settings).is_settled());
}

#[test]
fn a_due_rotation_publishes_a_key_ten_minutes_before_it_signs() {
    let settings = TimelineSettings::default();
    let doc = applied(ts("2027-01-01T00:00:00Z"), None, &settings);
    let now = ts("2027-01-31T00:00:00Z");
    let p = plan(now, Some(&doc), &settings);
    assert!(p.changes.is_empty());
    let k = p.effects[0].key();
    assert_eq!(
        (k.kid.as_str(), k.created_at, k.active_from),
        ("k-20270131-0000", now, ts("2027-01-31T00:10:00Z"))
    );
    assert_eq!(
        k.reason,
        GenerateReason::RotationDue {
            newest: "k-20270101-0000".into(),
            due: now
        }
    );
    assert_eq!(p.effects[1].key().kid, "h-20270131-0000");
    // Until the new keys activate, the old ones sign and nothing else changes.
    let doc = applied(now, Some(&doc), &settings);
    let p = plan(ts("2027-01-31T00:09:00Z"), Some(&doc), &settings);
    assert!(p.is_settled());
    assert_eq!(p.next_deadline, Some(ts("2027-01-31T00:10:00Z")));
    assert_eq!(
        doc.signing_key(ts("2027-01-31T00:09:59Z")).unwrap().kid(),
        "k-20270101-0000"
    );
}

#[test]
fn a_superseded_key_is_retired_after_the_token_lifetimes_plus_two_hours() {
    let settings = TimelineSettings::default();
    let doc = applied(ts("2027-01-01T00:00:00Z"), None, &settings);
    let doc = applied(ts("2027-01-31T00:00:00Z"), Some(&doc), &settings);
    let active = ts("2027-01-31T00:10:00Z");
    let p = plan(active, Some(&doc), &settings);
    assert!(p.effects.is_empty());
    assert_eq!(
        p.changes,
        vec![
            DocumentChange::SetRetireAfter {
                family: KeyFamily::Rsa,
                kid: "k-20270101-0000".into(),
                retire_after: ts("2027-01-31T02:25:00Z"),
                successor: "k-20270131-0000".into(),
            },
            DocumentChange::SetRetireAfter {
                family: KeyFamily::Hmac,
                kid: "h-20270101-0000".into(),
                retire_after: ts("2027-03-02T02:10:00Z"),
                successor: "h-20270131-0000".into(),
            },
        ]
    );
    assert_eq!(p.next_deadline, Some(ts("2027-01-31T02:25:00Z")));
    let doc = p.apply_changes(Some(&doc));
    // Still published one second before retireAfter, dropped at retireAfter exactly.
    assert!(plan(ts("2027-01-31T02:24:59Z"), Some(&doc), &settings).is_settled());
    let p = plan(ts("2027-01-31T02:25:00Z"), Some(&doc), &settings);
    assert_eq!(
        p.changes,
        vec![DocumentChange::Drop {
            family: KeyFamily::Rsa,
            kid: "k-20270101-0000".into(),
            retire_after: Some(ts("2027-01-31T02:25:00Z")),
        }]
    );
    assert_eq!(kids(p.apply_changes(Some(&doc)).keys()), ["k-20270131-0000"]);
}

#[test]
fn shorter_token_lifetimes_retire_keys_sooner() {
    let settings = TimelineSettings::new(mins(5), SignedDuration::from_hours(12)).unwrap();
    assert_eq!(settings.retention(KeyFamily::Rsa), mins(125));
    assert_eq!(
        settings.retention(KeyFamily::Hmac),
        SignedDuration::from_hours(14)
    );
}

#[test]
fn a_controller_back_after_a_long_outage_drops_long_superseded_keys_at_once() {
    let settings = TimelineSettings::default();
    let doc = applied(ts("2027-01-01T00:00:00Z"), None, &settings);
    let doc = applied(ts("2027-01-31T00:00:00Z"), Some(&doc), &settings);
    // Back 40 days later: the old keys' retention is over; a new rotation is due.
    let now = ts("2027-03-12T00:00:00Z");
    let p = plan(now, Some(&doc), &settings);
    assert!(p.changes.contains(&DocumentChange::Drop {
        family: KeyFamily::Rsa,
        kid: "k-20270101-0000".into(),
        retire_after: None
    }));
    assert!(p.changes.contains(&DocumentChange::Drop {
        family: KeyFamily::Hmac,
        kid: "h-20270101-0000".into(),
        retire_after: None
    }));
    assert_eq!(p.effects.len(), 2);
    let doc = applied(now, Some(&doc), &settings);
    assert_eq!(doc.signing_key(now).unwrap().kid(), "k-20270131-0000");
    assert!(plan(now, Some(&doc), &settings).is_settled());
}

#[test]
fn a_document_whose_keys_all_retired_gets_an_immediate_key() {
    let settings = TimelineSettings::default();
    let t0 = ts("2027-01-01T00:00:00Z");
    let rsa = RsaKey::new("k-old".into(), pem(), t0, t0, Some(ts("2027-01-02T00:00:00Z"))).unwrap();
    let hmac = HmacKey::new("h-20270105-0000".into(), HmacSecret::new([1; 32]), t0, t0, None).unwrap();
    let doc = KeysDocument::new(vec![rsa], vec![hmac]).unwrap();
    let now = ts("2027-01-05T00:00:00Z");
    let p = plan(now, Some(&doc), &settings);
    assert_eq!(p.changes.len(), 1);
    assert_eq!(p.effects.len(), 1);
    assert_eq!(p.effects[0].key().active_from, now);
    assert_eq!(p.effects[0].key().reason, GenerateReason::NoSigningKey);
}

#[test]
fn a_kid_already_taken_gets_a_numbered_suffix() {
    let settings = TimelineSettings::default();
    let t0 = ts("2027-01-01T00:00:00Z");
    let now = ts("2027-01-31T00:00:30Z");
    let hmac = HmacKey::new("h-20270131-0000".into(), HmacSecret::new([1; 32]), t0, t0, None).unwrap();
    let doc = KeysDocument::new(vec![], vec![hmac]).unwrap();
    let p = plan(now, Some(&doc), &settings);
    let hmac_effect = p.effects.iter().find(|e| e.family() == KeyFamily::Hmac).unwrap();
    assert_eq!(hmac_effect.key().kid, "h-20270131-0000-2");
}

#[test]
fn settings_outside_their_bounds_are_refused_with_the_setting_named() {
    let err = TimelineSettings::new(mins(16), days(1)).unwrap_err();
    assert!(err.to_string().starts_with("the ID token TTL is 16m"), "{err}");
    assert!(TimelineSettings::new(mins(5), days(31)).is_err());
    assert!(TimelineSettings::new(SignedDuration::from_secs(59), days(1)).is_err());
    assert!(
        TimelineSettings::default()
            .with_rotation_period(SignedDuration::from_hours(23))
            .is_err()
    );
    assert!(TimelineSettings::default().with_publish_lead(mins(61)).is_err());
    assert_eq!(
        TimelineSettings::default()
            .with_rotation_period(days(7))
            .unwrap()
            .rotation_period(),
        days(7)
    );
}

// ---------------------------------------------------------------------------------------------
// The walk.

#[derive(Debug, serde::Serialize)]
struct Event {
    at: String,
    kid: String,
    what: String,
}

/// A simulated controller + applier + issuer, checking the invariants at every step.
struct Sim {
    settings: TimelineSettings,
    delay: SignedDuration,
    doc: Option<KeysDocument>,
    version: u64,
    pending: VecDeque<(Timestamp, u64, Vec<KeyEffect>)>,
    /// Last instant each kid was seen signing.
    last_signed: HashMap<String, Timestamp>,
    /// First instant each kid was in the document.
    published_at: HashMap<String, Timestamp>,
    /// (kid, retireAfter) of the last observed document, to diff on change.
    seen: Vec<(String, Option<Timestamp>)>,
    seen_version: u64,
    signers: (String, String),
    bootstrapped: Option<Timestamp>,
    events: Vec<Event>,
    max_rsa: usize,
    max_hmac: usize,
    pem: PrivateKeyPem,
    parses: usize,
}

impl Sim {
    fn new(settings: TimelineSettings, delay: SignedDuration) -> Self {
        Sim {
            settings,
            delay,
            doc: None,
            version: 0,
            pending: VecDeque::new(),
            last_signed: HashMap::new(),
            published_at: HashMap::new(),
            seen: Vec::new(),
            seen_version: 0,
            signers: (String::new(), String::new()),
            bootstrapped: None,
            events: Vec::new(),
            max_rsa: 0,
            max_hmac: 0,
            pem: pem(),
            parses: 0,
        }
    }

    fn event(&mut self, at: Timestamp, kid: &str, what: String) {
        self.events.push(Event {
            at: at.to_string(),
            kid: kid.to_owned(),
            what,
        });
    }

    fn step(&mut self, now: Timestamp) {
        // Writes that land now: applied only if the document is still the one they were planned
        // against (optimistic concurrency), as the applier does.
        while self.pending.front().is_some_and(|(at, _, _)| *at <= now) {
            let Some((_, base, effects)) = self.pending.pop_front() else {
                break;
            };
            if base == self.version {
                let mut doc = self.doc.take().unwrap_or_default();
                materialize(&mut doc, &effects, &self.pem);
                self.doc = Some(doc);
                self.version += 1;
            }
        }

        let p = plan(now, self.doc.as_ref(), &self.settings);
        if let Some(d) = p.next_deadline {
            assert!(d > now, "deadline {d} not after {now}");
        }
        if !p.changes.is_empty() {
            self.doc = Some(p.apply_changes(self.doc.as_ref()));
            self.version += 1;
        }
        if !p.effects.is_empty() {
            if self.delay.is_zero() {
                let mut doc = self.doc.take().unwrap_or_default();
                materialize(&mut doc, &p.effects, &self.pem);
                self.doc = Some(doc);
                self.version += 1;
            } else {
                self.pending
                    .push_back((now + self.delay, self.version, p.effects));
            }
        }
        if self.delay.is_zero() {
            let again = plan(now, self.doc.as_ref(), &self.settings);
            assert!(again.is_settled(), "not idempotent at {now}: {again:?}");
        }
        self.check(now);
    }

    fn check(&mut self, now: Timestamp) {
        let Some(doc) = self.doc.as_ref() else { return };
        if self.bootstrapped.is_none() && doc.signing_key(now).is_some() && doc.signing_hmac(now).is_some() {
            self.bootstrapped = Some(now);
        }
        if self.seen_version != self.version {
            self.on_document_change(now);
        }
        self.check_signers(now);
    }

    fn check_signers(&mut self, now: Timestamp) {
        let Some(doc) = self.doc.as_ref() else { return };
        if self.bootstrapped.is_none() {
            return;
        }
        // Exactly one signing key of each kind: one key may sign, and it is the only activated,
        // live key without a retireAfter (every other one is marked superseded).
        let rsa = doc
            .signing_key(now)
            .unwrap_or_else(|| panic!("no signing RSA key at {now}"));
        let hmac = doc
            .signing_hmac(now)
            .unwrap_or_else(|| panic!("no signing HMAC key at {now}"));
        let unmarked = |n: usize| n == 1;
        assert!(
            unmarked(
                doc.keys()
                    .iter()
                    .filter(|k| k.may_sign(now) && k.retire_after().is_none())
                    .count()
            ),
            "more than one current RSA key at {now}"
        );
        assert!(
            unmarked(
                doc.hmac()
                    .iter()
                    .filter(|k| k.may_sign(now) && k.retire_after().is_none())
                    .count()
            ),
            "more than one current HMAC key at {now}"
        );
        assert!(doc.published(now).iter().any(|k| k.kid() == rsa.kid()));
        assert!(doc.verifying_hmacs(now).iter().any(|k| k.kid() == hmac.kid()));
        for (kid, slot) in [(rsa.kid(), 0), (hmac.kid(), 1)] {
            match self.last_signed.get_mut(kid) {
                Some(t) => *t = now,
                None => {
                    self.last_signed.insert(kid.to_owned(), now);
                }
            }
            let current = if slot == 0 {
                &mut self.signers.0
            } else {
                &mut self.signers.1
            };
            if current != kid {
                *current = kid.to_owned();
                // A rotated key was published at least the lead (minus the applier's delay)
                // before it signs; only a first key signs at once.
                let published = self.published_at[kid];
                let is_first = self.events.iter().filter(|e| e.what == "active").count() < 2;
                if !is_first {
                    assert!(
                        published + self.settings.publish_lead() - self.delay <= now,
                        "{kid} signs at {now}, published only at {published}"
                    );
                }
                self.events.push(Event {
                    at: now.to_string(),
                    kid: kid.to_owned(),
                    what: "active".into(),
                });
            }
        }
    }

    fn on_document_change(&mut self, now: Timestamp) {
        let Some(doc) = self.doc.as_ref() else { return };
        let current: Vec<(String, Option<Timestamp>)> = doc
            .keys()
            .iter()
            .map(|k| (k.kid().to_owned(), k.retire_after()))
            .chain(doc.hmac().iter().map(|k| (k.kid().to_owned(), k.retire_after())))
            .collect();
        self.max_rsa = self.max_rsa.max(doc.keys().len());
        self.max_hmac = self.max_hmac.max(doc.hmac().len());
        assert!(doc.keys().len() <= 3, "{} RSA keys at {now}", doc.keys().len());

        // The issuer reads what the controller wrote, through the one parser.
        let parsed = KeysDocument::parse(doc.to_json().as_bytes()).unwrap();
        assert_eq!(&parsed, doc);
        self.parses += 1;

        let previous = std::mem::take(&mut self.seen);
        let mut events = Vec::new();
        for (kid, retire) in &current {
            match previous.iter().find(|(k, _)| k == kid) {
                None => {
                    self.published_at.insert(kid.clone(), now);
                    let active = doc
                        .rsa_key(kid)
                        .map(|k| k.active_from())
                        .or_else(|| doc.hmac_key(kid).map(|k| k.active_from()))
                        .unwrap();
                    events.push((kid.clone(), format!("published, active from {active}")));
                }
                Some((_, before)) if before != retire => {
                    let at = retire.map_or("-".into(), |r| r.to_string());
                    events.push((kid.clone(), format!("retired: retireAfter {at}")));
                }
                Some(_) => {}
            }
        }
        for (kid, _) in &previous {
            if current.iter().any(|(k, _)| k == kid) {
                continue;
            }
            // No key disappears while something it signed can still be valid.
            let validity = if kid.starts_with("k-") {
                self.settings.max_id_token_ttl()
            } else {
                self.settings.max_refresh_lifetime()
            };
            if let Some(last) = self.last_signed.get(kid) {
                assert!(
                    *last + validity <= now,
                    "{kid} dropped at {now}, last signed at {last}"
                );
            }
            events.push((kid.clone(), "dropped".into()));
        }
        for (kid, what) in events {
            self.event(now, &kid, what);
        }
        self.seen = current;
        self.seen_version = self.version;
    }
}

fn walk(
    settings: TimelineSettings,
    delay: SignedDuration,
    start: Timestamp,
    days_: i64,
    step: SignedDuration,
) -> Sim {
    let mut sim = Sim::new(settings, delay);
    let end = start + days(days_);
    let mut now = start;
    while now < end {
        sim.step(now);
        now += step;
    }
    let boot = sim.bootstrapped.expect("the first keys never became active");
    assert!(boot <= start + delay, "first keys active only at {boot}");
    sim
}

#[test]
fn a_400_day_walk_at_one_minute_steps_keeps_every_invariant() {
    let start = ts("2027-01-01T00:00:00Z");
    let begun = Instant::now();
    let sim = walk(
        TimelineSettings::default(),
        SignedDuration::ZERO,
        start,
        400,
        mins(1),
    );
    let elapsed = begun.elapsed();
    eprintln!(
        "400-day walk, 576000 steps, immediate applier: {elapsed:?} ({} parses)",
        sim.parses
    );
    // The old RSA key goes 2h25m after its successor signs; the old HMAC key lives on for the
    // refresh lifetime, so three HMAC keys coexist for two hours around each rotation.
    assert_eq!((sim.max_rsa, sim.max_hmac), (2, 3));
    assert!(sim.events.iter().filter(|e| e.what == "dropped").count() >= 24);
    insta::assert_yaml_snapshot!("key_timeline_400_days", sim.events);
}

#[test]
fn a_400_day_walk_with_effects_landing_minutes_late_keeps_every_invariant() {
    let start = ts("2027-01-01T00:00:00Z");
    for delay in [mins(3), mins(7)] {
        let begun = Instant::now();
        let sim = walk(TimelineSettings::default(), delay, start, 400, mins(1));
        eprintln!("400-day walk, delay {delay:#}: {:?}", begun.elapsed());
        // One key per rotation: the repeated requests of the in-flight minutes conflicted.
        let published = sim
            .events
            .iter()
            .filter(|e| e.what.starts_with("published") && e.kid.starts_with("k-"))
            .count();
        assert_eq!(published, 14, "{:#?}", sim.events);
        assert!(sim.max_rsa <= 3);
    }
}

#[test]
fn a_400_day_walk_with_the_issuers_default_lifetimes_keeps_every_invariant() {
    let settings = TimelineSettings::new(mins(5), SignedDuration::from_hours(12)).unwrap();
    let sim = walk(
        settings,
        SignedDuration::ZERO,
        ts("2027-03-15T17:43:00Z"),
        400,
        mins(1),
    );
    // A superseded HMAC key now lives 14 hours, so never three at once.
    assert_eq!(sim.max_hmac, 2);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn random_settings_starts_and_delays_keep_every_invariant(
        ttl in 1i64..=15,
        refresh_hours in 1i64..=720,
        period_days in 1i64..=45,
        lead in 1i64..=60,
        delay_fraction in 0i64..=9,
        start in 1_700_000_000i64..2_000_000_000,
    ) {
        let settings = TimelineSettings::new(mins(ttl), SignedDuration::from_hours(refresh_hours))
            .unwrap()
            .with_rotation_period(days(period_days))
            .unwrap()
            .with_publish_lead(mins(lead))
            .unwrap();
        let delay = mins(lead * delay_fraction / 10);
        let start = Timestamp::from_second(start).unwrap();
        let sim = walk(settings, delay, start, 2 * period_days + 2, mins(1));
        prop_assert!(sim.max_rsa <= 3);
    }
}
