//! The pure functions of the identity graph's nodes, and their serializable outputs.
//!
//! Every function here takes its inputs as values and returns its output (and, for timed nodes,
//! the instant it would change): no clock, no randomness, no I/O.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ichor_graph::{Desired, EffectRequest, Object, ObjectKey, Timed};
use ichor_renderers::auth::roles::role_errors;
use ichor_renderers::auth::user_name::UserName;
use ichor_renderers::cluster::render_cluster;
use ichor_renderers::crd::{
    CONDITION_PASSWORD_SET, CONDITION_READY, IchorInstallationSpec, IchorUserSpec, TalosCluster,
    TalosClusterSpec, TalosMachine, TalosMachineSpec, TalosMachineStatus, UsersSettings,
};
use ichor_renderers::rollout::restart_required;
use ichor_renderers::trust::keys::KeysDocument;
use ichor_renderers::trust::timeline::{TimelineSettings, plan};
use ichor_renderers::trust::tls::{CertFacts, IssuerService, San, decide};
use ichor_renderers::trust::{IssuerTrust, KEYS_JSON, NAMESPACE, render_trust_configmap};
use jiff::{SignedDuration, Timestamp};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::conditions::{StatusWrite, Wanted, merge};
use super::effects::{CertificateRequest, GenerateKeyRequest, RemoveCredentialsKeyRequest, SanName};
use super::read::{self, SecretValue, secret_value};
use super::{ISSUER_COMPONENT, OWNER_LABEL, OWNER_VALUE, TLS_CERT_KEY};

/// The issuer settings the key timeline uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// The largest ID token TTL, in seconds.
    pub max_id_token_ttl_secs: i64,
    /// The longest refresh lifetime, in seconds.
    pub max_refresh_lifetime_secs: i64,
    /// Why the defaults are used instead of the installation's values, if they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl Settings {
    /// The timeline settings (the defaults, which take the upper bounds, if out of range).
    pub fn timeline(&self) -> TimelineSettings {
        TimelineSettings::new(
            SignedDuration::from_secs(self.max_id_token_ttl_secs),
            SignedDuration::from_secs(self.max_refresh_lifetime_secs),
        )
        .unwrap_or_default()
    }
}

fn decode<T: DeserializeOwned>(v: Option<&Value>) -> Result<T, serde_json::Error> {
    T::deserialize(v.unwrap_or(&Value::Null))
}

/// `IchorInstallation` → settings. The first installation by name is used; its `spec.users`
/// is resolved with the renderer's defaults and bounds.
pub(crate) fn settings(installations: &BTreeMap<ObjectKey, Object>) -> Settings {
    let defaults = TimelineSettings::default();
    let fallback = |problem: String| Settings {
        max_id_token_ttl_secs: defaults.max_id_token_ttl().as_secs(),
        max_refresh_lifetime_secs: defaults.max_refresh_lifetime().as_secs(),
        problem: Some(problem),
    };
    let Some((key, inst)) = installations.iter().next() else {
        let resolved = UsersSettings::resolve(None);
        return match resolved {
            Ok(s) => Settings {
                max_id_token_ttl_secs: s.token_ttl.as_secs(),
                max_refresh_lifetime_secs: s.refresh_lifetime.as_secs(),
                problem: None,
            },
            Err(e) => fallback(e.to_string()),
        };
    };
    let spec: IchorInstallationSpec = match decode(inst.value.get("spec")) {
        Ok(s) => s,
        Err(e) => {
            return fallback(format!(
                "IchorInstallation {}: spec does not decode: {e}",
                key.name
            ));
        }
    };
    match UsersSettings::resolve(spec.users.as_ref()) {
        Ok(s) => Settings {
            max_id_token_ttl_secs: s.token_ttl.as_secs(),
            max_refresh_lifetime_secs: s.refresh_lifetime.as_secs(),
            problem: (installations.len() > 1).then(|| {
                format!(
                    "{} IchorInstallations exist; the settings of {} are used",
                    installations.len(),
                    key.name
                )
            }),
        },
        Err(e) => fallback(format!("IchorInstallation {}: {e}", key.name)),
    }
}

/// The issuer Service as the graph uses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceFacts {
    /// The ClusterIP.
    pub cluster_ip: IpAddr,
    /// The Service's name.
    pub name: String,
    /// The Service's namespace.
    pub namespace: String,
}

impl From<&ServiceFacts> for IssuerService {
    fn from(s: &ServiceFacts) -> Self {
        IssuerService {
            cluster_ip: s.cluster_ip,
            name: s.name.clone(),
            namespace: s.namespace.clone(),
        }
    }
}

/// The issuer Service selection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssuerServiceOut {
    /// The selected Service, when one is usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceFacts>,
    /// Why none or another was selected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Services → the issuer Service: in `ichor-system`, labelled
/// `app.kubernetes.io/component=issuer`, the first by name when several are.
pub(crate) fn issuer_service(services: &BTreeMap<ObjectKey, Object>) -> IssuerServiceOut {
    let candidates: Vec<&Object> = services
        .values()
        .filter(|s| {
            s.namespace == NAMESPACE
                && read::label(s, "app.kubernetes.io/component") == Some(ISSUER_COMPONENT)
        })
        .collect();
    let Some(first) = candidates.first() else {
        return IssuerServiceOut {
            service: None,
            problem: Some(format!(
                "no Service in {NAMESPACE} is labelled app.kubernetes.io/component={ISSUER_COMPONENT}; the issuer \
                 certificates and ichor-oidc-trust wait for it"
            )),
        };
    };
    let several = (candidates.len() > 1).then(|| {
        format!(
            "{} Services are labelled app.kubernetes.io/component={ISSUER_COMPONENT}; {} is used",
            candidates.len(),
            first.name
        )
    });
    let svc: Result<k8s_openapi::api::core::v1::Service, _> = serde_json::from_value(first.value.clone());
    let parsed = svc
        .map_err(|e| format!("Service {}/{}: does not decode: {e}", first.namespace, first.name))
        .and_then(|s| IssuerService::from_service(&s).map_err(|e| e.to_string()));
    match parsed {
        Ok(s) => IssuerServiceOut {
            service: Some(ServiceFacts {
                cluster_ip: s.cluster_ip,
                name: s.name,
                namespace: s.namespace,
            }),
            problem: several,
        },
        Err(e) => IssuerServiceOut {
            service: None,
            problem: Some(e),
        },
    }
}

/// What the decisions need of a certificate ([`CertFacts`] in serializable form).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CertSummary {
    /// Start of validity.
    pub not_before: Timestamp,
    /// End of validity.
    pub not_after: Timestamp,
    /// Subject alternative names.
    pub sans: Vec<SanName>,
    /// Subject.
    pub subject: String,
    /// Issuer.
    pub issuer: String,
    /// sha256 of the subject DER.
    pub subject_der_sha256: String,
    /// sha256 of the issuer DER.
    pub issuer_der_sha256: String,
    /// sha256 fingerprint.
    pub sha256_fingerprint: String,
    /// subjectKeyIdentifier.
    pub subject_key_id: Option<String>,
    /// authorityKeyIdentifier.
    pub authority_key_id: Option<String>,
    /// Whether it is a CA.
    pub is_ca: bool,
}

impl From<&CertFacts> for CertSummary {
    fn from(f: &CertFacts) -> Self {
        CertSummary {
            not_before: f.not_before,
            not_after: f.not_after,
            sans: f.sans.iter().map(SanName::from).collect(),
            subject: f.subject.clone(),
            issuer: f.issuer.clone(),
            subject_der_sha256: f.subject_der_sha256.clone(),
            issuer_der_sha256: f.issuer_der_sha256.clone(),
            sha256_fingerprint: f.sha256_fingerprint.clone(),
            subject_key_id: f.subject_key_id.clone(),
            authority_key_id: f.authority_key_id.clone(),
            is_ca: f.is_ca,
        }
    }
}

impl From<&CertSummary> for CertFacts {
    fn from(s: &CertSummary) -> Self {
        CertFacts {
            not_before: s.not_before,
            not_after: s.not_after,
            sans: s.sans.iter().map(San::from).collect(),
            subject: s.subject.clone(),
            issuer: s.issuer.clone(),
            subject_der_sha256: s.subject_der_sha256.clone(),
            issuer_der_sha256: s.issuer_der_sha256.clone(),
            sha256_fingerprint: s.sha256_fingerprint.clone(),
            subject_key_id: s.subject_key_id.clone(),
            authority_key_id: s.authority_key_id.clone(),
            is_ca: s.is_ca,
        }
    }
}

/// The state of one certificate Secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum CertState {
    /// No Secret or no `tls.crt`.
    Absent,
    /// `tls.crt` is redacted (a replayed journal): present, content unknown.
    Redacted,
    /// `tls.crt` is not a readable certificate.
    Unreadable {
        /// Why.
        error: String,
    },
    /// The certificate.
    Read {
        /// Its facts.
        facts: Box<CertSummary>,
        /// Its PEM (certificates are public).
        pem: String,
    },
}

impl CertState {
    fn facts(&self) -> Option<CertFacts> {
        match self {
            CertState::Read { facts, .. } => Some(facts.as_ref().into()),
            _ => None,
        }
    }

    fn fingerprint(&self) -> Option<String> {
        match self {
            CertState::Read { facts, .. } => Some(facts.sha256_fingerprint.clone()),
            _ => None,
        }
    }
}

/// The CA and the leaf as observed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Certificates {
    /// `ichor-oidc-ca`.
    pub ca: CertState,
    /// `ichor-oidc-tls`.
    pub leaf: CertState,
}

fn cert_state(secret: Option<&Object>, what: &str) -> CertState {
    let Some(secret) = secret else {
        return CertState::Absent;
    };
    match secret_value(secret, TLS_CERT_KEY) {
        SecretValue::Absent => CertState::Absent,
        SecretValue::Redacted => CertState::Redacted,
        SecretValue::Undecodable(error) => CertState::Unreadable { error },
        SecretValue::Bytes(bytes) => match String::from_utf8(bytes) {
            Err(_) => CertState::Unreadable {
                error: format!("{what} is not UTF-8 PEM text"),
            },
            Ok(pem) => match CertFacts::from_pem(&pem, what) {
                Ok(f) => CertState::Read {
                    facts: Box::new((&f).into()),
                    pem,
                },
                Err(e) => CertState::Unreadable { error: e.to_string() },
            },
        },
    }
}

/// The CA and leaf Secrets → their certificates.
pub(crate) fn certificates(ca: &Option<Object>, leaf: &Option<Object>) -> Certificates {
    Certificates {
        ca: cert_state(ca.as_ref(), "tls.crt of ichor-oidc-ca"),
        leaf: cert_state(leaf.as_ref(), "tls.crt of ichor-oidc-tls"),
    }
}

fn effect<T: Serialize>(id: String, request: &T) -> Option<EffectRequest> {
    EffectRequest::new(id, request).ok()
}

/// The key timeline: `now`, the signing Secret and the settings → the desired `keys.json`
/// (only when keys are dropped or retired and nothing is generated) and key generation effects.
///
/// An absent Secret or an absent `keys.json` is an empty document (the first keys are
/// generated). A redacted, undecodable or invalid `keys.json` is *present but unreadable*:
/// nothing is planned (never replace live keys because they cannot be read).
pub(crate) fn signing_keys(now: Timestamp, secret: &Option<Object>, settings: &Settings) -> Timed<Desired> {
    let doc = match secret.as_ref().map(|s| secret_value(s, KEYS_JSON)) {
        None | Some(SecretValue::Absent) => None,
        Some(SecretValue::Bytes(bytes)) => match KeysDocument::parse(&bytes) {
            Ok(d) => Some(d),
            Err(_) => return Timed::forever(Desired::default()),
        },
        Some(SecretValue::Redacted | SecretValue::Undecodable(_)) => {
            return Timed::forever(Desired::default());
        }
    };
    let p = plan(now, doc.as_ref(), &settings.timeline());
    let mut desired = Desired::default();
    if p.effects.is_empty() {
        if !p.changes.is_empty() {
            let json = p.apply_changes(doc.as_ref()).to_json();
            desired.objects.push(Object::new(
                "Secret",
                NAMESPACE,
                ichor_renderers::trust::SIGNING_SECRET,
                json!({ "data": { KEYS_JSON: read::base64(json.as_bytes()) } }),
            ));
        }
    } else {
        let based_on = secret.as_ref().and_then(|s| s.resource_version.clone());
        for e in &p.effects {
            let request = GenerateKeyRequest::new(e, based_on.clone(), &p.changes);
            desired.effects.extend(effect(request.id(), &request));
        }
    }
    Timed {
        value: desired,
        deadline: p.next_deadline,
    }
}

/// The CA and leaf decisions: `now`, the certificates and the issuer Service → issuance effects.
/// Waits (no decision) without a Service, or while a certificate is redacted.
pub(crate) fn certificate_effects(
    now: Timestamp,
    certs: &Certificates,
    service: &IssuerServiceOut,
) -> Timed<Desired> {
    let Some(svc) = &service.service else {
        return Timed::forever(Desired::default());
    };
    if matches!(certs.ca, CertState::Redacted) || matches!(certs.leaf, CertState::Redacted) {
        return Timed::forever(Desired::default());
    }
    let decision = decide(
        now,
        certs.ca.facts().as_ref(),
        certs.leaf.facts().as_ref(),
        &svc.into(),
    );
    let mut desired = Desired::default();
    for e in &decision.effects {
        let replaces = match e {
            ichor_renderers::trust::TlsEffect::IssueCa { .. } => certs.ca.fingerprint(),
            ichor_renderers::trust::TlsEffect::IssueLeaf { .. } => certs.leaf.fingerprint(),
        };
        match CertificateRequest::new(e, replaces) {
            CertificateRequest::Ca(r) => desired
                .effects
                .extend(effect(CertificateRequest::Ca(r.clone()).id(), &r)),
            CertificateRequest::Leaf(r) => desired
                .effects
                .extend(effect(CertificateRequest::Leaf(r.clone()).id(), &r)),
        }
    }
    Timed {
        value: desired,
        deadline: decision.next_deadline,
    }
}

/// Where the trust facts come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TrustSource {
    /// Rendered from the issuer Service and the CA.
    Rendered,
    /// The Service or the CA is not readable now: the observed ConfigMap is kept as it is.
    KeptObserved,
    /// Nothing to render and nothing observed.
    Unavailable,
}

/// The desired trust facts (what `ichor-oidc-trust` must say).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustOut {
    /// The discovery URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery_url: Option<String>,
    /// The CA PEM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_pem: Option<String>,
    /// Where they come from.
    pub source: TrustSource,
}

impl TrustOut {
    /// The trust facts, when known.
    pub fn trust(&self) -> Option<IssuerTrust> {
        Some(IssuerTrust {
            discovery_url: self.discovery_url.clone()?,
            ca_pem: self.ca_pem.clone()?,
        })
    }
}

/// The issuer Service, the CA and the observed `ichor-oidc-trust` → the desired trust facts.
/// Rendered when the Service and the CA are readable; otherwise the observed ConfigMap is kept
/// (a missing Service for a moment must not remove the trust of every cluster).
pub(crate) fn trust(service: &IssuerServiceOut, certs: &Certificates, observed: &Option<Object>) -> TrustOut {
    if let (Some(svc), CertState::Read { pem, .. }) = (&service.service, &certs.ca) {
        let t = IssuerTrust::for_service(&svc.into(), pem.clone());
        return TrustOut {
            discovery_url: Some(t.discovery_url),
            ca_pem: Some(t.ca_pem),
            source: TrustSource::Rendered,
        };
    }
    let kept = observed
        .as_ref()
        .and_then(|o| serde_json::from_value::<k8s_openapi::api::core::v1::ConfigMap>(o.value.clone()).ok())
        .and_then(|cm| IssuerTrust::from_configmap(&cm).ok());
    match kept {
        Some(t) => TrustOut {
            discovery_url: Some(t.discovery_url),
            ca_pem: Some(t.ca_pem),
            source: TrustSource::KeptObserved,
        },
        None => TrustOut {
            discovery_url: None,
            ca_pem: None,
            source: TrustSource::Unavailable,
        },
    }
}

/// The desired `ichor-oidc-trust` ConfigMap, labelled as owned by this graph.
pub(crate) fn trust_configmap(trust: &TrustOut) -> Desired {
    let Some(t) = trust.trust() else {
        return Desired::default();
    };
    let mut value = serde_json::to_value(render_trust_configmap(&t)).unwrap_or(Value::Null);
    if let Some(labels) = value
        .get_mut("metadata")
        .and_then(|m| m.get_mut("labels"))
        .and_then(Value::as_object_mut)
    {
        labels.insert(OWNER_LABEL.to_owned(), json!(OWNER_VALUE));
    }
    let cm = Object::new(
        "ConfigMap",
        NAMESPACE,
        ichor_renderers::trust::TRUST_CONFIGMAP,
        value,
    );
    Desired {
        objects: vec![cm],
        effects: Vec::new(),
    }
}

/// One cluster's rendered authentication document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAuth {
    /// Document kind → sha256 of the rendered document (empty when nothing was rendered).
    pub documents: BTreeMap<String, String>,
    /// Why nothing was rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A `TalosCluster` and the desired trust → its rendered document hashes.
pub(crate) fn cluster_auth(key: &ObjectKey, cluster: &Object, trust: &TrustOut) -> ClusterAuth {
    let spec: TalosClusterSpec = match decode(cluster.value.get("spec")) {
        Ok(s) => s,
        Err(e) => {
            return ClusterAuth {
                documents: BTreeMap::new(),
                error: Some(format!("TalosCluster {key}: spec does not decode: {e}")),
            };
        }
    };
    let mut tc = TalosCluster::new(&key.name, spec);
    tc.metadata.namespace = Some(key.namespace.to_string());
    let trust = trust.trust();
    let render = render_cluster(&tc, &[], trust.as_ref());
    ClusterAuth {
        documents: render.desired_hashes(),
        error: render.authentication.err().map(|e| e.to_string()),
    }
}

/// The `TalosCluster` a machine belongs to.
pub(crate) fn machine_cluster(machine: &Object) -> Option<ObjectKey> {
    let name = machine.value.get("spec")?.get("cluster")?.as_str()?;
    Some(ObjectKey::new("TalosCluster", machine.namespace.clone(), name))
}

/// A `TalosMachine` and its cluster's render → the `Ready` condition write, when
/// `restart_required` has an opinion that is not already observed.
pub(crate) fn machine_condition(
    key: &ObjectKey,
    machine: &Object,
    cluster: &Option<ClusterAuth>,
) -> Option<StatusWrite> {
    let cluster = cluster.as_ref()?;
    if cluster.documents.is_empty() {
        return None;
    }
    let spec: TalosMachineSpec = decode(machine.value.get("spec")).ok()?;
    let status: Option<TalosMachineStatus> = decode(machine.value.get("status")).ok();
    let mut tm = TalosMachine::new(&key.name, spec);
    tm.metadata.namespace = Some(key.namespace.to_string());
    tm.status = status;
    let (_, cond) = restart_required(std::slice::from_ref(&tm), &cluster.documents)
        .into_iter()
        .next()?;
    let wanted = Wanted {
        type_: CONDITION_READY,
        status: cond.status,
        reason: cond.reason.to_owned(),
        message: cond.message,
    };
    merge(read::conditions(machine), &[wanted], None, None)
}

/// Reasons of the `IchorUser` conditions.
pub mod reasons {
    /// `PasswordSet=True`.
    pub const PASSWORD_SET: &str = "PasswordSet";
    /// `PasswordSet=False`.
    pub const NO_PASSWORD: &str = "NoPassword";
    /// `Ready=True`.
    pub const READY: &str = "Ready";
    /// `Ready=False`: `spec.disabled`.
    pub const DISABLED: &str = "Disabled";
    /// `Ready=False`: no password.
    pub const PASSWORD_NOT_SET: &str = "PasswordNotSet";
    /// `Ready=False`: the name or a role is invalid.
    pub const INVALID_SPEC: &str = "InvalidSpec";
}

/// An `IchorUser` and whether its credentials key exists → the `Ready` and `PasswordSet`
/// conditions write, when not already observed.
pub(crate) fn user_conditions(
    key: &ObjectKey,
    user: &Object,
    credentials: &Option<Object>,
) -> Option<StatusWrite> {
    let password = credentials.is_some();
    let password_set = if password {
        Wanted {
            type_: CONDITION_PASSWORD_SET,
            status: true,
            reason: reasons::PASSWORD_SET.into(),
            message: "A password hash is stored for this user.".into(),
        }
    } else {
        Wanted {
            type_: CONDITION_PASSWORD_SET,
            status: false,
            reason: reasons::NO_PASSWORD.into(),
            message: format!(
                "No password is stored for this user: an admin sets one (`ichor user set-password {}`).",
                key.name
            ),
        }
    };
    let spec: Result<IchorUserSpec, _> = decode(user.value.get("spec"));
    let mut problems: Vec<String> = Vec::new();
    if let Err(e) = UserName::parse(&key.name) {
        problems.push(e.to_string());
    }
    let disabled = match &spec {
        Ok(s) => {
            problems.extend(role_errors(&s.roles).iter().map(ToString::to_string));
            s.disabled
        }
        Err(e) => {
            problems.push(format!("spec does not decode: {e}"));
            false
        }
    };
    let (status, reason, message) = if !problems.is_empty() {
        (false, reasons::INVALID_SPEC, problems.join("; "))
    } else if disabled {
        (
            false,
            reasons::DISABLED,
            "The user is disabled (spec.disabled): signing in and refreshing are refused.".to_owned(),
        )
    } else if !password {
        (
            false,
            reasons::PASSWORD_NOT_SET,
            "The user cannot sign in until a password is set.".to_owned(),
        )
    } else {
        (true, reasons::READY, "The user can sign in.".to_owned())
    };
    let ready = Wanted {
        type_: CONDITION_READY,
        status,
        reason: reason.into(),
        message,
    };
    let observed_generation = user
        .value
        .get("status")
        .and_then(|s| s.get("observedGeneration"))
        .and_then(Value::as_i64);
    merge(
        read::conditions(user),
        &[ready, password_set],
        read::generation(user),
        observed_generation,
    )
}

/// One object's pending write → the desired status object (`{"status": …}` only: a status
/// subresource write). No clock: conditions whose status changed carry no `lastTransitionTime`,
/// which the applier sets (see [`super::conditions`]).
pub(crate) fn status_object(key: &ObjectKey, write: &Option<StatusWrite>) -> Desired {
    match write {
        Some(write) => status_desired(key, write.status()),
        None => Desired::default(),
    }
}

/// The desired status-only object of `key` holding `status`.
fn status_desired(key: &ObjectKey, status: Value) -> Desired {
    // Built by hand: `json!` would serialize the status value into a second copy.
    let mut value = serde_json::Map::new();
    value.insert("status".to_owned(), status);
    Desired {
        objects: vec![Object::new(
            &*key.kind,
            &*key.namespace,
            &*key.name,
            Value::Object(value),
        )],
        effects: Vec::new(),
    }
}

/// An `IchorUser` and its credentials key → the status write of its conditions
/// ([`user_conditions`]), nothing when they are already observed.
pub(crate) fn user_status(key: &ObjectKey, user: &Object, credentials: &Option<Object>) -> Desired {
    match user_conditions(key, user, credentials) {
        Some(write) => status_desired(key, write.into_status()),
        None => Desired::default(),
    }
}

/// A credentials key, its `IchorUser` and whether any user is observed → the removal of the key
/// when its user is gone (never while no user at all is observed: the users' list is not in yet).
pub(crate) fn credentials_gc(key: &ObjectKey, user_exists: &Option<bool>, users_observed: bool) -> Desired {
    if user_exists.is_some() || !users_observed {
        return Desired::default();
    }
    let request = RemoveCredentialsKeyRequest {
        namespace: NAMESPACE.to_owned(),
        secret: ichor_renderers::auth::credentials::CREDENTIALS_SECRET_NAME.to_owned(),
        key: key.name.to_string(),
    };
    Desired {
        objects: Vec::new(),
        effects: effect(request.id(), &request).into_iter().collect(),
    }
}
