//! The identity graph (docs/architecture.md, "The graph") on the `ichor-graph` engine: pure, no
//! client, no clock.
//!
//! ```text
//! IchorInstallation ──────────────┐
//! IchorUsersFallback (the flags) ─┴─► settings ─┐
//! now ──────────────────────────────────────────┼─► signing-keys (emit: keys.json Secret, generate-*-key)
//! Secret ichor-oidc-signing ────────────────────┘
//! Secrets ichor-oidc-ca, ichor-oidc-tls ─► certificates ─┬─► certificate-effects (emit: issue-ca, issue-leaf)
//! Services (component=issuer) ─► issuer-service ─────────┤    (with now)
//! ConfigMap ichor-oidc-trust (observed) ─────────────────┴─► trust ─► trust-configmap (emit)
//! certificates ─► ui-ca-configmap (emit: ichor-ui-ca)
//!                                                              │
//! TalosCluster ─► cluster-auth[cluster] ◄──────────────────────┘
//! IchorInstallation ─► second-factor ─► cluster-auth[every cluster] (claim validation rules)
//! TalosMachine ─► machine-conditions[machine] (joined to its cluster) ─► machine-status[machine] (emit)
//! IchorUser ─► user-status[user] (joined to its credentials key; conditions → status write, emit)
//! IchorUser (count) ─► users-observed ─┐
//! credentials key (legacy key | own Secret) ─► credentials-gc[key] (joined to user-exists[its IchorUser]) (emit: remove-credentials-key)
//! Secret ichor-user-credentials ─► credentials-phase ─┐
//! Namespace ichor-credentials, foreign Secrets there ─► credentials-namespace ─┤
//! Deployment ichor-issuer, its Pods ─► issuer-layouts ────────────────────────┤
//! now, credentials-phase ─► return-wait ──────────────────────────────────────┤
//! IchorInstallation, credentials keys ─────────────────────────────────────────┴─► credentials-migration
//!     (emit: credentials-layout, credentials-sweep, retire-legacy-credentials, credentials-return,
//!      recreate-legacy-credentials; the installation's status)
//! certificates, Secret ichor-webhook-tls, ValidatingWebhookConfiguration, now ─► webhook-certificate (emit: issue-webhook-leaf)
//! certificates, ValidatingWebhookConfiguration ─► webhook-ca-bundle (emit: the configuration's caBundles)
//! TalosOperation ─► rollout[operation] ◄─ now, IchorRolloutSettings, cluster-auth[its cluster], TalosMachines,
//!                   TalosOperations, ReadyzObservation[operation]  (emit: status writes, rollout-* effects;
//!                   only for operations labelled app.kubernetes.io/managed-by=ichor-identity)
//! ```
//!
//! # Design notes
//! - **Desired trust, not observed.** Clusters render from the `trust` node's output (what
//!   `ichor-oidc-trust` must say), so a ClusterIP or CA change reaches every Ichor-issuer
//!   cluster in the same evaluation as the new ConfigMap.
//! - **Status writes and the clock: the applier stamps `lastTransitionTime`.** Conditions are
//!   computed per object without the clock ([`conditions::merge`]): an object whose conditions
//!   are already observed yields `None`, and one whose status, reason or message differ yields
//!   the whole list to write. A condition whose status is unchanged is written exactly as
//!   observed (its `lastTransitionTime` kept, reason and message updated); one whose status
//!   changed, or that is new, carries NO `lastTransitionTime`, and the applier sets it to the
//!   time of its write (the contract of [`StatusWrite`]; the simulated applier of
//!   `crate::sim` stamps the time of the latest tick). Once the stamped write is observed the
//!   desired write disappears, so the fixed point holds although lists are compared whole. A
//!   status write is a desired object whose value holds only `status` (the applier writes it to
//!   the status subresource); `conditions` is written whole, other condition types kept as
//!   observed. No per-object node reads `now`: a tick recomputes only the nodes whose output
//!   depends on time (the key timeline and the certificate decisions).
//! - **Credentials.** Users join one derived object per user with credentials ([`project`]):
//!   a key of the legacy Secret, the user's own Secret of the credentials namespace (observed by
//!   metadata only), or both while entries move. So a sign-in (which rewrites a Secret)
//!   recomputes nothing, and a new password recomputes one user. Garbage collection of the
//!   credentials of a user whose `IchorUser` is gone is the *effect*
//!   `remove-credentials-key <user>` (not a desired object: the applier removes that one key by
//!   JSON merge patch with the Secret's resourceVersion, since users' entries are written by the
//!   issuer and must never be overwritten whole, then deletes the user's own Secret with its
//!   observed uid as precondition). Nothing is collected while no `IchorUser` is
//!   observed at all (the credentials Secret arriving before the users' list must not empty
//!   it); beyond that, the controller must fold the initial list of every watched kind before
//!   its first evaluation, or a key would look orphaned. (A replay evaluates after every event,
//!   so a journal whose credentials come before its users reports such removals.)
//! - **Secrets and ownership.** The Secrets hold material only effects can produce, so the
//!   graph never desires them whole and never owns them: only objects labelled
//!   [`OWNER_LABEL`]`=`[`OWNER_VALUE`] (the trust ConfigMap) can be deleted as orphans. The graph
//!   never deletes an `IchorUser`, a `TalosMachine` or a Secret, whatever their labels.
//! - **Redacted journals.** A journal written with the default redaction holds `{"sha256": …}`
//!   instead of Secret values. Nodes treat such a value as *present but unreadable*: the keys
//!   node plans nothing (never requests keys because of it), the certificate node decides
//!   nothing, and the trust node keeps the observed ConfigMap. Credentials keys stay visible
//!   (key names are not redacted), so user conditions and garbage collection replay exactly.
//!   The golden journals are written unredacted (test material only) to replay every decision.

pub mod conditions;
pub mod effects;
pub mod layouts;
pub mod migration;
pub mod nodes;
pub mod project;
mod read;
pub mod replay;
pub mod returning;
pub mod rollout;
pub mod webhook;

use ichor_graph::{BuildError, Desired, Family, Graph, GraphBuilder, Node, Object, ObjectKey, Ownership};
use ichor_renderers::contract::{CREDENTIALS_NAMESPACE, ISSUER_DEPLOYMENT};
use ichor_renderers::trust::{CA_SECRET, NAMESPACE, SIGNING_SECRET, TLS_SECRET, TRUST_CONFIGMAP};

pub use conditions::StatusWrite;
pub use nodes::{Certificates, ClusterAuth, IssuerServiceOut, Settings, TrustOut, still_a_user};
pub use project::{CREDENTIALS_KEY_KIND, derived_events, fold};
pub use replay::{
    Controller, IdentityReplayError, RenderChange, ReplayLine, ReplayReport, replay, replay_with,
};

/// Label value (`app.kubernetes.io/component`) selecting the issuer Service in `ichor-system`:
/// the seed's `app.kubernetes.io/component=ui` (the issuer is the seed's ichor-ui).
pub use ichor_renderers::contract::ISSUER_COMPONENT;
/// The label value the chart gave the issuer Service before [`ISSUER_COMPONENT`], still accepted:
/// journals recorded then replay as they were decided, and a controller upgraded ahead of the
/// chart keeps its issuer Service.
pub use ichor_renderers::contract::LEGACY_ISSUER_COMPONENT;
/// Label marking the objects this graph owns whole (and so may delete as orphans).
pub use ichor_renderers::contract::OWNER_LABEL;
/// Value of [`OWNER_LABEL`].
pub use ichor_renderers::contract::OWNER_VALUE;
/// Key of the certificate in `ichor-oidc-ca` and `ichor-oidc-tls`.
pub const TLS_CERT_KEY: &str = "tls.crt";
/// Key of the private key in `ichor-oidc-ca` and `ichor-oidc-tls`.
pub const TLS_KEY_KEY: &str = "tls.key";
/// Key of the CA certificate in `ichor-oidc-tls`.
pub const CA_CERT_KEY: &str = "ca.crt";

/// Node names, as they appear in every action's reason.
pub mod names {
    /// `now`.
    pub const NOW: &str = "now";
    /// Settings from `IchorInstallation` over the controller's flags.
    pub const SETTINGS: &str = "settings";
    /// The key timeline.
    pub const SIGNING_KEYS: &str = "signing-keys";
    /// The certificates as observed.
    pub const CERTIFICATES: &str = "certificates";
    /// The CA and leaf decisions.
    pub const CERTIFICATE_EFFECTS: &str = "certificate-effects";
    /// The issuer Service.
    pub const ISSUER_SERVICE: &str = "issuer-service";
    /// The desired trust facts.
    pub const TRUST: &str = "trust";
    /// The desired trust ConfigMap.
    pub const TRUST_CONFIGMAP: &str = "trust-configmap";
    /// The desired `ichor-ui-ca` ConfigMap.
    pub const UI_CA_CONFIGMAP: &str = "ui-ca-configmap";
    /// The second-factor policy in force (from `IchorInstallation`).
    pub const SECOND_FACTOR: &str = "second-factor";
    /// Per cluster render.
    pub const CLUSTER_AUTH: &str = "cluster-auth";
    /// Per machine condition.
    pub const MACHINE_CONDITIONS: &str = "machine-conditions";
    /// Machine status writes.
    pub const MACHINE_STATUS: &str = "machine-status";
    /// Whether the users' own credentials Secrets were listed (the watcher's marker is there).
    pub const CREDENTIALS_LISTED: &str = "credentials-listed";
    /// Per user conditions and their status write.
    pub const USER_STATUS: &str = "user-status";
    /// Per observed user: whether it still counts as a user (`false` once it is being deleted).
    pub const USER_EXISTS: &str = "user-exists";
    /// Whether any IchorUser is observed (guards garbage collection; reads only their count).
    pub const USERS_OBSERVED: &str = "users-observed";
    /// Credentials garbage collection.
    pub const CREDENTIALS_GC: &str = "credentials-gc";
    /// The legacy credentials Secret's phase (and whether it is empty).
    pub const CREDENTIALS_PHASE: &str = "credentials-phase";
    /// Whether the credentials namespace exists and holds only credentials.
    pub const CREDENTIALS_NAMESPACE: &str = "credentials-namespace";
    /// Why the issuer replicas do not all understand the per-user layout, if they do not.
    pub const ISSUER_LAYOUTS: &str = "issuer-layouts";
    /// Whether the move back into a re-created legacy Secret has waited out the issuers' memory
    /// of its absence.
    pub const RETURN_WAIT: &str = "return-wait";
    /// The move off the legacy credentials Secret, and the installation's status.
    pub const CREDENTIALS_MIGRATION: &str = "credentials-migration";
    /// The webhooks' serving certificate decision.
    pub const WEBHOOK_CERTIFICATE: &str = "webhook-certificate";
    /// The `caBundle`s of the webhook configuration.
    pub const WEBHOOK_CA_BUNDLE: &str = "webhook-ca-bundle";
    /// Per `TalosOperation`: the apiserver-restart rollout's next step (owned operations only).
    pub const ROLLOUT: &str = "rollout";
}

/// Handles to the nodes whose outputs are useful outside the graph (reports, tests).
#[derive(Debug, Clone, Copy)]
pub struct Identity {
    /// The settings.
    pub settings: Node<Settings>,
    /// The issuer Service.
    pub issuer_service: Node<IssuerServiceOut>,
    /// The certificates.
    pub certificates: Node<Certificates>,
    /// The desired trust.
    pub trust: Node<TrustOut>,
    /// Per cluster render.
    pub clusters: Family<ClusterAuth>,
    /// Per user status write: the desired status object, none when already observed.
    pub users: Family<Desired>,
    /// Per machine pending write.
    pub machines: Family<Option<StatusWrite>>,
}

fn secret(name: &str) -> ObjectKey {
    ObjectKey::new("Secret", NAMESPACE, name)
}

/// Builds the identity graph and returns it with its handles.
///
/// # Errors
/// A registration mistake (a bug of this function; the tests build it).
pub fn build() -> Result<(Graph, Identity), BuildError> {
    let mut b = GraphBuilder::new();
    b.ownership(Ownership::new(OWNER_LABEL, OWNER_VALUE));
    let now = b.now();
    let installations = b.objects("installations", "IchorInstallation");
    let services = b.objects("services", "Service");
    let users = b.objects("users", "IchorUser");
    let clusters = b.objects("clusters", "TalosCluster");
    let machines = b.objects("machines", "TalosMachine");
    let credential_keys = b.objects("credentials-keys", CREDENTIALS_KEY_KIND);
    let signing_secret = b.object("signing-secret", secret(SIGNING_SECRET));
    let ca_secret = b.object("ca-secret", secret(CA_SECRET));
    let tls_secret = b.object("tls-secret", secret(TLS_SECRET));
    let webhook_tls = b.object("webhook-tls-secret", secret(webhook::WEBHOOK_TLS_SECRET));
    let webhook_configurations = b.objects("webhook-configurations", webhook::CONFIGURATION_KIND);
    let observed_trust = b.object(
        "observed-trust-configmap",
        ObjectKey::new("ConfigMap", NAMESPACE, TRUST_CONFIGMAP),
    );

    let users_fallback = b.object(
        "users-fallback",
        ObjectKey::new(nodes::USERS_FALLBACK_KIND, NAMESPACE, nodes::USERS_FALLBACK_NAME),
    );
    let settings = b.node(
        names::SETTINGS,
        (installations.all(), users_fallback),
        |(installations, flags)| nodes::settings(installations, flags),
    );
    let signing = b.node_timed(
        names::SIGNING_KEYS,
        (now, signing_secret, settings),
        |(now, secret, settings)| nodes::signing_keys(*now, secret, settings),
    );
    b.emit(&signing);

    let issuer_service = b.node(names::ISSUER_SERVICE, services.all(), nodes::issuer_service);
    let certificates = b.node(names::CERTIFICATES, (ca_secret, tls_secret), |(ca, tls)| {
        nodes::certificates(ca, tls)
    });
    let cert_effects = b.node_timed(
        names::CERTIFICATE_EFFECTS,
        (now, certificates, issuer_service),
        |(now, certs, svc)| nodes::certificate_effects(*now, certs, svc),
    );
    b.emit(&cert_effects);

    let webhook_cert = b.node_timed(
        names::WEBHOOK_CERTIFICATE,
        (now, certificates, webhook_tls, webhook_configurations.all()),
        |(now, certs, secret, configurations)| {
            webhook::webhook_certificate(*now, certs, secret, configurations)
        },
    );
    b.emit(&webhook_cert);
    let ca_bundle = b.node(
        names::WEBHOOK_CA_BUNDLE,
        (certificates, webhook_configurations.all()),
        |(certs, configurations)| webhook::webhook_ca_bundle(certs, configurations),
    );
    b.emit(&ca_bundle);

    let trust = b.node(
        names::TRUST,
        (issuer_service, certificates, observed_trust),
        |(svc, certs, observed)| nodes::trust(svc, certs, observed),
    );
    let trust_cm = b.node(names::TRUST_CONFIGMAP, trust, nodes::trust_configmap);
    b.emit(&trust_cm);
    let ui_ca = b.node(names::UI_CA_CONFIGMAP, certificates, nodes::ui_ca_configmap);
    b.emit(&ui_ca);

    // The policy alone (not the settings): a change of a token lifetime re-renders no cluster.
    let second_factor = b.node(names::SECOND_FACTOR, installations.all(), nodes::second_factor);
    let cluster_auth = b.family(
        names::CLUSTER_AUTH,
        &clusters,
        (trust, second_factor),
        |key, cluster: &Object, (trust, second_factor)| {
            nodes::cluster_auth(key, cluster, trust, second_factor)
        },
    );
    let machine_conditions = b.family(
        names::MACHINE_CONDITIONS,
        &machines,
        cluster_auth.joined(|m: &Object| nodes::machine_cluster(m)),
        |key, machine: &Object, cluster| nodes::machine_condition(key, machine, cluster),
    );
    let machine_status = b.family(
        names::MACHINE_STATUS,
        &machine_conditions,
        (),
        |key, write: &Option<StatusWrite>, _| nodes::status_object(key, write),
    );
    b.emit(&machine_status);

    // One family per user: its conditions and the status write in one step (a user event is
    // the most frequent one, and a second family would only re-encode the conditions).
    // Whether the users' own credentials Secrets were listed: a refused list shows none of them.
    let secrets_listed = b.object(
        "credentials-secrets-listed",
        project::credentials_secrets_listed_key(),
    );
    let credentials_listed = b.node(
        names::CREDENTIALS_LISTED,
        secrets_listed,
        |listed: &Option<Object>| listed.is_some(),
    );
    let user_status = b.family(
        names::USER_STATUS,
        &users,
        (
            credential_keys.joined(|u: &Object| Some(project::credentials_key(&u.name))),
            credentials_listed,
        ),
        |key, user: &Object, (creds, listed)| nodes::user_status(key, user, creds, *listed),
    );
    b.emit(&user_status);

    // GC joins one bool per user (it is still a user: not being deleted), so it recomputes when
    // a user comes, goes or starts being deleted, never when one is edited (the bool is
    // recomputed, cheaply, and unchanged); its guard reads only how many users there are (O(1),
    // and unchanged by edits).
    let user_exists = b.family(names::USER_EXISTS, &users, (), |_, user: &Object, _| {
        nodes::still_a_user(user)
    });
    let users_observed = b.node(names::USERS_OBSERVED, users.count(), |n: &usize| *n > 0);
    let gc = b.family(
        names::CREDENTIALS_GC,
        &credential_keys,
        (
            user_exists.joined(|k: &Object| Some(ObjectKey::new("IchorUser", NAMESPACE, k.name.clone()))),
            users_observed,
        ),
        |key, k: &Object, (user, observed)| nodes::credentials_gc(key, k, user, *observed),
    );
    b.emit(&gc);

    // The move off the legacy credentials Secret (docs/credentials-sharding.md, "Migration").
    let legacy_secret = b.object("legacy-credentials-secret", project::credentials_secret_key());
    let legacy = b.node(names::CREDENTIALS_PHASE, legacy_secret, migration::legacy_state);
    let credentials_namespace = b.object(
        "credentials-namespace-object",
        ObjectKey::new("Namespace", "", CREDENTIALS_NAMESPACE),
    );
    let foreign = b.objects("foreign-credentials-secrets", project::FOREIGN_SECRET_KIND);
    let dedication = b.node(
        names::CREDENTIALS_NAMESPACE,
        (credentials_namespace, secrets_listed, foreign.all()),
        |(namespace, listed, foreign)| migration::dedication(namespace, listed, foreign),
    );
    let issuer_deployment = b.object(
        "issuer-deployment",
        ObjectKey::new("Deployment", NAMESPACE, ISSUER_DEPLOYMENT),
    );
    let issuer_pods = b.objects("issuer-pods", "Pod");
    let issuers = b.node(
        names::ISSUER_LAYOUTS,
        (issuer_deployment, issuer_pods.all()),
        |(deployment, pods)| migration::issuers(deployment, pods),
    );
    // Reads the clock, but its output changes once (when the wait ends), so the migration node
    // does not recompute on every tick.
    let return_wait = b.node_timed(names::RETURN_WAIT, (now, legacy), |(now, legacy)| {
        returning::return_wait(*now, legacy)
    });
    let migration = b.node(
        names::CREDENTIALS_MIGRATION,
        (
            installations.all(),
            legacy,
            dedication,
            issuers,
            credential_keys.all(),
            return_wait,
        ),
        |(installations, legacy, dedication, issuers, keys, waited)| {
            migration::migration(installations, legacy, dedication, issuers, keys, *waited)
        },
    );
    b.emit(&migration);

    // The rollout of each `config` operation this subsystem owns (labelled managed-by
    // ichor-identity; the others are Ichor core's): its status writes and Talos effects.
    let operations = b.objects("operations", "TalosOperation");
    let observations = b.objects("readyz-observations", rollout::OBSERVATION_KIND);
    let rollout_settings = b.object(
        "rollout-settings",
        ObjectKey::new(rollout::SETTINGS_KIND, NAMESPACE, rollout::SETTINGS_NAME),
    );
    let rollout = b.family_timed(
        names::ROLLOUT,
        &operations,
        (
            now,
            rollout_settings,
            cluster_auth.joined(rollout::operation_cluster),
            machines.all(),
            operations.all(),
            observations.joined(rollout::observation_key),
        ),
        |key, operation: &Object, inputs| rollout::rollout(key, operation, inputs),
    );
    b.emit(&rollout);

    let graph = b.build()?;
    Ok((
        graph,
        Identity {
            settings,
            issuer_service,
            certificates,
            trust,
            clusters: cluster_auth,
            users: user_status,
            machines: machine_conditions,
        },
    ))
}

/// The identity graph (see [`build`] for the handles too).
///
/// # Errors
/// A registration mistake.
pub fn graph() -> Result<Graph, BuildError> {
    build().map(|(g, _)| g)
}

#[cfg(test)]
mod tests;
