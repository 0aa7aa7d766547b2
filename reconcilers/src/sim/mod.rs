//! A deterministic stand-in for the applier, to drive the identity graph to its fixed point in
//! tests, golden journals and benchmarks. NOT the production applier:
//!
//! - an apply merges the desired fields into the observed object (objects merged, lists and
//!   scalars replaced), as server-side apply does for the fields it owns;
//! - an apply stamps `lastTransitionTime` on every desired status condition that has none (the
//!   applier's half of the contract of [`crate::identity::StatusWrite`]), with the time of the
//!   latest tick (the Unix epoch before the first one): the event time, so runs stay
//!   deterministic;
//! - `generate-rsa-key` uses ONE fixed, public test key (`testdata/rsa2048.pkcs8.pem`) for every
//!   kid, and `generate-hmac-key` derives its 32 bytes from the kid: never use them for real;
//! - certificates are issued with rcgen (ECDSA P-256, random keys), the leaf carrying the
//!   authorityKeyIdentifier so the issued-by check holds;
//! - `remove-credentials-key` removes the key.
//!
//! Every event the simulation makes (inputs and results) is written to a journal, so a
//! simulated run can be replayed, and its resource versions are a counter.

pub mod fixtures;
pub mod workload;

use std::io::Write;

use ichor_graph::{Action, Event, JournalError, JournalWriter, Object, ObjectKey, Redaction};
use ichor_renderers::trust::keys::{HmacKey, HmacSecret, KeysDocument, PrivateKeyPem, RsaKey};
use ichor_renderers::trust::timeline::plan;
use ichor_renderers::trust::tls::CA_COMMON_NAME;
use ichor_renderers::trust::{CA_SECRET, KEYS_JSON, NAMESPACE, SIGNING_SECRET, TLS_SECRET};
use jiff::Timestamp;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::identity::conditions::stamp_transition_times;
use crate::identity::effects::{
    GenerateKeyRequest, IssueCaRequest, IssueLeafRequest, KeyKind, RemoveCredentialsKeyRequest,
};
use crate::identity::{CA_CERT_KEY, Controller, RenderChange, TLS_CERT_KEY, TLS_KEY_KEY};

/// The public test key every simulated RSA key uses.
pub const TEST_RSA_PEM: &str = include_str!("../../testdata/rsa2048.pkcs8.pem");

/// Why the simulation stopped.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The graph did not build.
    #[error("the identity graph did not build: {0}")]
    Build(#[from] ichor_graph::BuildError),
    /// The journal could not be written.
    #[error("the simulation's journal could not be written: {0}")]
    Journal(#[from] JournalError),
    /// An effect could not be performed.
    #[error("effect {id}: {message}")]
    Effect {
        /// The effect id.
        id: String,
        /// What went wrong.
        message: String,
    },
    /// The graph did not reach a fixed point.
    #[error("no fixed point after {0} rounds of feeding actions back")]
    NoFixedPoint(usize),
}

/// The most rounds [`Sim::settle`] feeds actions back before giving up.
pub const MAX_ROUNDS: usize = 32;

/// A simulated controller: the graph, a fake applier, and the journal of everything.
pub struct Sim<W: Write> {
    controller: Controller,
    journal: JournalWriter<W>,
    resource_version: u64,
    /// Every action decided so far, in order.
    pub actions: Vec<Action>,
    /// Every render change so far, in order.
    pub renders: Vec<RenderChange>,
    /// Whether to keep actions and renders (off for long benchmark journals).
    pub record: bool,
}

fn effect_error(id: &str, message: impl Into<String>) -> SimError {
    SimError::Effect {
        id: id.to_owned(),
        message: message.into(),
    }
}

/// Merges `patch` into `base`: objects recursively, everything else replaced.
pub fn merge_into(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                match b.get_mut(k) {
                    Some(slot) => merge_into(slot, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, p) => *b = p.clone(),
    }
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64(s: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).ok()
}

/// Sets a certificate's validity (whole seconds; instants before 1970 become 1970).
fn set_validity(params: &mut CertificateParams, from: Timestamp, to: Timestamp) {
    let secs = |t: Timestamp| std::time::Duration::from_secs(u64::try_from(t.as_second()).unwrap_or(0));
    params.not_before = rcgen::date_time_ymd(1970, 1, 1) + secs(from);
    params.not_after = rcgen::date_time_ymd(1970, 1, 1) + secs(to);
}

/// A Secret object with the given base64 data.
pub fn secret(name: &str, data: &[(&str, &[u8])], type_: &str) -> Object {
    let data: Map<String, Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(b64(v))))
        .collect();
    Object::new(
        "Secret",
        NAMESPACE,
        name,
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": NAMESPACE,
                "labels": {"app.kubernetes.io/part-of": "ichor"}},
            "type": type_, "data": data}),
    )
}

impl<W: Write> Sim<W> {
    /// A simulation writing its journal (unredacted: test material only) to `out`.
    ///
    /// # Errors
    /// The graph did not build.
    pub fn new(out: W) -> Result<Self, SimError> {
        Ok(Sim {
            controller: Controller::new()?,
            journal: JournalWriter::with_redaction(out, Redaction::none()),
            resource_version: 0,
            actions: Vec::new(),
            renders: Vec::new(),
            record: true,
        })
    }

    /// The controller.
    pub fn controller(&self) -> &Controller {
        &self.controller
    }

    /// The controller, to evaluate by hand (tests, benchmarks).
    pub fn controller_mut(&mut self) -> &mut Controller {
        &mut self.controller
    }

    /// The journal writer's output.
    pub fn into_journal(self) -> W {
        self.journal.into_inner()
    }

    /// Flushes the journal.
    ///
    /// # Errors
    /// The writer failed.
    pub fn flush(&mut self) -> Result<(), SimError> {
        Ok(self.journal.flush()?)
    }

    fn next_rv(&mut self) -> String {
        self.resource_version += 1;
        self.resource_version.to_string()
    }

    /// Journals and folds one event without evaluating. Applied objects get a new resource
    /// version.
    ///
    /// # Errors
    /// The journal could not be written.
    pub fn push(&mut self, event: Event) -> Result<(), SimError> {
        let event = match event {
            Event::Applied(mut o) => {
                o.resource_version = Some(self.next_rv());
                Event::Applied(o)
            }
            other => other,
        };
        self.journal.append(&event)?;
        self.controller.fold(event);
        Ok(())
    }

    /// A new simulation, writing to `out`, whose journal starts with every object of this one's
    /// World (derived objects excluded) and a tick at its `now`, then settles. Used to start a
    /// golden journal from a settled installation.
    ///
    /// # Errors
    /// As [`Sim::step`].
    pub fn fork<W2: Write>(&self, out: W2) -> Result<Sim<W2>, SimError> {
        let mut next = Sim::new(out)?;
        next.resource_version = self.resource_version;
        for o in self.controller.world().iter() {
            if o.kind != crate::identity::CREDENTIALS_KEY_KIND {
                next.push(Event::Applied(o.clone()))?;
            }
        }
        if let Some(now) = self.controller.world().now() {
            next.push(Event::Tick(now))?;
        }
        next.settle()?;
        Ok(next)
    }

    /// Evaluates once and returns the actions (recording them).
    pub fn evaluate(&mut self) -> Vec<Action> {
        let (eval, renders) = self.controller.evaluate();
        if self.record {
            self.actions.extend(eval.actions.iter().cloned());
            self.renders.extend(renders);
        }
        eval.actions
    }

    /// Pushes one event, then evaluates and feeds actions back until nothing is left to do.
    ///
    /// # Errors
    /// The journal failed, an effect failed, or there was no fixed point.
    pub fn step(&mut self, event: Event) -> Result<(), SimError> {
        self.push(event)?;
        self.settle()
    }

    /// Evaluates and feeds actions back until an evaluation decides nothing.
    ///
    /// # Errors
    /// An effect failed, or there was no fixed point after [`MAX_ROUNDS`].
    pub fn settle(&mut self) -> Result<(), SimError> {
        for _ in 0..MAX_ROUNDS {
            let actions = self.evaluate();
            if actions.is_empty() {
                return Ok(());
            }
            self.perform(&actions)?;
        }
        Err(SimError::NoFixedPoint(MAX_ROUNDS))
    }

    /// Ticks at every deadline before `until`, settling after each, then at `until`.
    ///
    /// # Errors
    /// As [`Sim::step`].
    pub fn run_until(&mut self, until: Timestamp) -> Result<(), SimError> {
        loop {
            let now = self.controller.world().now();
            match self.controller.graph().next_deadline(now) {
                Some(d) if d < until && now.is_none_or(|n| d > n) => self.step(Event::Tick(d))?,
                _ => break,
            }
        }
        self.step(Event::Tick(until))
    }

    /// Performs actions as the applier would, journaling the results.
    ///
    /// # Errors
    /// An effect failed.
    pub fn perform(&mut self, actions: &[Action]) -> Result<(), SimError> {
        let mut key_requests = Vec::new();
        for action in actions {
            match action {
                Action::Apply { object, .. } => {
                    let now = self.controller.world().now().unwrap_or(Timestamp::UNIX_EPOCH);
                    let mut desired = object.value.clone();
                    stamp_transition_times(&mut desired, now);
                    let mut value = self
                        .controller
                        .world()
                        .get(&object.key())
                        .map(|o| o.value.clone())
                        .unwrap_or_else(|| json!({}));
                    merge_into(&mut value, &desired);
                    self.push(Event::Applied(Object::new(
                        object.kind.clone(),
                        object.namespace.clone(),
                        object.name.clone(),
                        value,
                    )))?;
                }
                Action::Delete { key, .. } => self.push(Event::Deleted(key.clone()))?,
                Action::Effect { request, .. } => {
                    let id = request.id.as_str();
                    if id.starts_with("generate-") {
                        let r: GenerateKeyRequest = serde_json::from_value(request.request.clone())
                            .map_err(|e| effect_error(id, e.to_string()))?;
                        key_requests.push(r);
                    } else if id.starts_with("issue-ca") {
                        let r: IssueCaRequest = serde_json::from_value(request.request.clone())
                            .map_err(|e| effect_error(id, e.to_string()))?;
                        self.issue_ca(id, &r)?;
                    } else if id.starts_with("issue-leaf") {
                        let r: IssueLeafRequest = serde_json::from_value(request.request.clone())
                            .map_err(|e| effect_error(id, e.to_string()))?;
                        self.issue_leaf(id, &r)?;
                    } else if id.starts_with("remove-credentials-key") {
                        let r: RemoveCredentialsKeyRequest = serde_json::from_value(request.request.clone())
                            .map_err(|e| effect_error(id, e.to_string()))?;
                        self.remove_key(&r)?;
                    } else {
                        return Err(effect_error(id, "unknown effect"));
                    }
                }
            }
        }
        if !key_requests.is_empty() {
            self.generate_keys(&key_requests)?;
        }
        Ok(())
    }

    /// Writes every requested key of one evaluation, with the plan's document changes, in one
    /// update (as the applier must).
    fn generate_keys(&mut self, requests: &[GenerateKeyRequest]) -> Result<(), SimError> {
        let id = requests.first().map(GenerateKeyRequest::id).unwrap_or_default();
        let key = ObjectKey::new("Secret", NAMESPACE, SIGNING_SECRET);
        let current = match self.controller.world().get(&key) {
            Some(o) => match o
                .value
                .get("data")
                .and_then(|d| d.get(KEYS_JSON))
                .and_then(Value::as_str)
            {
                Some(s) => {
                    let bytes = unb64(s).ok_or_else(|| effect_error(&id, "keys.json is not base64"))?;
                    Some(KeysDocument::parse(&bytes).map_err(|e| effect_error(&id, e.to_string()))?)
                }
                None => None,
            },
            None => None,
        };
        let settings = self
            .controller
            .graph()
            .output(&self.controller.handles().settings)
            .ok_or_else(|| effect_error(&id, "no settings"))?;
        let planned_at = requests.first().map(|r| r.created_at).unwrap_or_default();
        let mut doc =
            plan(planned_at, current.as_ref(), &settings.timeline()).apply_changes(current.as_ref());
        for r in requests {
            let bad = |e: String| effect_error(&r.id(), e);
            match r.kind {
                KeyKind::Rsa => {
                    let pem =
                        PrivateKeyPem::new(TEST_RSA_PEM.to_owned()).map_err(|e| bad(format!("{e:?}")))?;
                    let k = RsaKey::new(r.kid.clone(), pem, r.created_at, r.active_from, None)
                        .map_err(|e| bad(e.to_string()))?;
                    doc.insert_rsa(k).map_err(|e| bad(e.to_string()))?;
                }
                KeyKind::Hmac => {
                    let bytes: [u8; 32] = Sha256::digest(format!("sim-hmac {}", r.kid)).into();
                    let k = HmacKey::new(
                        r.kid.clone(),
                        HmacSecret::new(bytes),
                        r.created_at,
                        r.active_from,
                        None,
                    )
                    .map_err(|e| bad(e.to_string()))?;
                    doc.insert_hmac(k).map_err(|e| bad(e.to_string()))?;
                }
            }
        }
        let json = doc.to_json();
        self.push(Event::Applied(secret(
            SIGNING_SECRET,
            &[(KEYS_JSON, json.as_bytes())],
            "Opaque",
        )))
    }

    fn ca_params(common_name: &str) -> CertificateParams {
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params
    }

    fn issue_ca(&mut self, id: &str, r: &IssueCaRequest) -> Result<(), SimError> {
        let key = KeyPair::generate().map_err(|e| effect_error(id, e.to_string()))?;
        let mut params = Self::ca_params(&r.common_name);
        set_validity(&mut params, r.not_before, r.not_after);
        let cert = params
            .self_signed(&key)
            .map_err(|e| effect_error(id, e.to_string()))?;
        self.push(Event::Applied(secret(
            CA_SECRET,
            &[
                (TLS_CERT_KEY, cert.pem().as_bytes()),
                (TLS_KEY_KEY, key.serialize_pem().as_bytes()),
            ],
            "kubernetes.io/tls",
        )))
    }

    fn issue_leaf(&mut self, id: &str, r: &IssueLeafRequest) -> Result<(), SimError> {
        let ca = self
            .controller
            .world()
            .get(&ObjectKey::new("Secret", NAMESPACE, CA_SECRET))
            .ok_or_else(|| effect_error(id, "no CA to sign with"))?;
        let field = |k: &str| {
            ca.value
                .get("data")
                .and_then(|d| d.get(k))
                .and_then(Value::as_str)
                .and_then(unb64)
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| effect_error(id, format!("CA Secret has no readable {k}")))
        };
        let ca_pem = field(TLS_CERT_KEY)?;
        let ca_key = KeyPair::from_pem(&field(TLS_KEY_KEY)?).map_err(|e| effect_error(id, e.to_string()))?;
        let issuer = Issuer::new(Self::ca_params(CA_COMMON_NAME), ca_key);
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, r.common_name.as_str());
        params.subject_alt_names =
            crate::perform::subject_alt_names(&r.sans).map_err(|e| effect_error(id, e))?;
        set_validity(&mut params, r.not_before, r.not_after);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().map_err(|e| effect_error(id, e.to_string()))?;
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(|e| effect_error(id, e.to_string()))?;
        self.push(Event::Applied(secret(
            TLS_SECRET,
            &[
                (TLS_CERT_KEY, cert.pem().as_bytes()),
                (TLS_KEY_KEY, key.serialize_pem().as_bytes()),
                (CA_CERT_KEY, ca_pem.as_bytes()),
            ],
            "kubernetes.io/tls",
        )))
    }

    fn remove_key(&mut self, r: &RemoveCredentialsKeyRequest) -> Result<(), SimError> {
        let key = ObjectKey::new("Secret", r.namespace.clone(), r.secret.clone());
        let Some(mut o) = self.controller.world().get(&key).cloned() else {
            return Ok(());
        };
        if let Some(data) = o.value.get_mut("data").and_then(Value::as_object_mut) {
            data.remove(&r.key);
        }
        self.push(Event::Applied(o))
    }
}
