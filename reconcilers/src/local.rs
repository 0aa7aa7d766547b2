//! The World's local source and the local applier of `ichor dev`: the same identity graph as in
//! a cluster, over a directory of manifests instead of the Kubernetes API.
//!
//! # Source
//! - The GitOps tree (`IchorUser`, `IchorInstallation`, `TalosCluster`, `TalosMachine` YAML,
//!   read with [`ichor_renderers::manifest::load_dir`]), re-read on every [`LocalController::tick`]
//!   and diffed against the previous read, so an edit takes effect without a restart. A tree
//!   that does not parse keeps the previous objects (one bad save must not delete every user)
//!   and the problems are reported. Objects without a namespace are placed in `ichor-system`.
//! - The produced Secrets, one directory per Secret and one file per key
//!   (`<secrets dir>/<name>/<key>`, files 0600 in 0700 directories): a Secret's directory is
//!   exactly what a Kubernetes Secret volume looks like, so the issuer reads `keys.json` and
//!   `tls.crt`/`tls.key` from the paths its flags point to in a cluster.
//! - The credentials file of the issuer's local store (`{"entries": {"<user>": …}}`), of which
//!   only the user names are read (as the keys of a synthesised `ichor-user-credentials`).
//! - A synthesised issuer Service `localhost` (label `app.kubernetes.io/component=issuer`) with
//!   ClusterIP 127.0.0.1, so the leaf carries the IP SAN 127.0.0.1 and the DNS SAN `localhost`.
//!
//! # Applier
//! Effects are performed by [`crate::perform`]; produced Secrets are written as files (each file
//! atomically: a synced temporary file renamed over it) and fed back as `Applied` events with a
//! new resourceVersion, until an evaluation decides nothing. Status writes to `IchorUser` and
//! `TalosMachine` and the trust ConfigMap are kept in memory (reported, never written into the
//! user's GitOps files). `remove-credentials-key` is handed to the caller's
//! [`CredentialsRemover`] (the issuer's store owns that file and its lock).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ichor_graph::{Action, Event, Object, ObjectKey};
use ichor_renderers::auth::credentials::CREDENTIALS_SECRET_NAME;
use ichor_renderers::manifest::{ManifestErrors, Manifests, load_dir};
use ichor_renderers::trust::{CA_SECRET, NAMESPACE, TLS_SECRET};
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::identity::effects::RemoveCredentialsKeyRequest;
use crate::identity::{Controller, ISSUER_COMPONENT, TLS_CERT_KEY, TLS_KEY_KEY};
use crate::perform::{self, KeyMaterial, OPAQUE, Outcome, PerformError, SecretData, TLS_TYPE};

/// The name of the synthesised issuer Service (its DNS SANs start with it).
pub const ISSUER_SERVICE_NAME: &str = "localhost";
/// The synthesised issuer Service's ClusterIP (the leaf's IP SAN).
pub const ISSUER_SERVICE_IP: &str = "127.0.0.1";
/// The most evaluate–apply rounds of one [`LocalController::tick`].
pub const MAX_ROUNDS: usize = 16;

/// Why the local controller could not start or write.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The identity graph did not build (a bug).
    #[error("the identity graph did not build: {0}")]
    Build(#[from] ichor_graph::BuildError),
    /// A Secret file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },
    /// A Secret key cannot be a file name.
    #[error("Secret {secret}: key {key:?} cannot be stored as a file (use letters, digits, '-', '_', '.')")]
    BadKey {
        /// The Secret.
        secret: String,
        /// The key.
        key: String,
    },
}

fn io_error(path: &Path, source: io::Error) -> LocalError {
    LocalError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Secrets kept as files: `<dir>/<name>/<key>`.
#[derive(Debug, Clone)]
pub struct SecretFiles {
    dir: PathBuf,
}

fn valid_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Creates `dir` (and parents) mode 0700, and makes an existing `dir` 0700.
fn private_dir(dir: &Path) -> Result<(), LocalError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io_error(dir, e))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(|e| io_error(dir, e))
}

/// Replaces `path` by `bytes` atomically: a synced 0600 temporary file in the same directory,
/// renamed over it, then the directory synced.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written?;
    fs::File::open(dir)?.sync_all()
}

impl SecretFiles {
    /// Secrets under `dir` (created 0700 on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        SecretFiles { dir: dir.into() }
    }

    /// The directory of Secret `name`.
    pub fn dir_of(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes `secret` whole: every key as a file (private key material before certificates, so
    /// a reader sees a new certificate only with its key), then removes keys it no longer has.
    ///
    /// # Errors
    /// [`LocalError::BadKey`] for a name that cannot be a file; [`LocalError::Io`].
    pub fn write(&self, secret: &SecretData) -> Result<(), LocalError> {
        let bad = |key: &str| LocalError::BadKey {
            secret: secret.name.clone(),
            key: key.to_owned(),
        };
        if !valid_file_name(&secret.name) {
            return Err(bad(""));
        }
        if let Some(k) = secret.data.keys().find(|k| !valid_file_name(k)) {
            return Err(bad(k));
        }
        private_dir(&self.dir)?;
        let dir = self.dir_of(&secret.name);
        private_dir(&dir)?;
        let mut keys: Vec<&String> = secret.data.keys().collect();
        keys.sort_by_key(|k| (k.as_str() != TLS_KEY_KEY, k.as_str() == TLS_CERT_KEY));
        for key in keys {
            let path = dir.join(key);
            let bytes = secret.data.get(key).map(Vec::as_slice).unwrap_or_default();
            atomic_write(&path, bytes).map_err(|e| io_error(&path, e))?;
        }
        for entry in fs::read_dir(&dir).map_err(|e| io_error(&dir, e))? {
            let entry = entry.map_err(|e| io_error(&dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if valid_file_name(&name) && !secret.data.contains_key(&name) {
                fs::remove_file(entry.path()).map_err(|e| io_error(&entry.path(), e))?;
            }
        }
        Ok(())
    }

    /// Every Secret stored (directories with valid names; hidden and temporary files skipped).
    ///
    /// # Errors
    /// [`LocalError::Io`] (a missing directory is no Secret, not an error).
    pub fn read_all(&self) -> Result<Vec<SecretData>, LocalError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error(&self.dir, e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&self.dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !valid_file_name(&name) || !entry.path().is_dir() {
                continue;
            }
            let mut data = BTreeMap::new();
            let dir = entry.path();
            for file in fs::read_dir(&dir).map_err(|e| io_error(&dir, e))? {
                let file = file.map_err(|e| io_error(&dir, e))?;
                let key = file.file_name().to_string_lossy().into_owned();
                if valid_file_name(&key) && file.path().is_file() {
                    data.insert(key, fs::read(file.path()).map_err(|e| io_error(&file.path(), e))?);
                }
            }
            let type_ = if name == CA_SECRET || name == TLS_SECRET {
                TLS_TYPE
            } else {
                OPAQUE
            };
            out.push(SecretData {
                name,
                type_: type_.to_owned(),
                data,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

/// The synthesised issuer Service (ClusterIP 127.0.0.1).
pub fn issuer_service() -> Object {
    Object::new(
        "Service",
        NAMESPACE,
        ISSUER_SERVICE_NAME,
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": ISSUER_SERVICE_NAME, "namespace": NAMESPACE,
                "labels": {"app.kubernetes.io/component": ISSUER_COMPONENT,
                    "app.kubernetes.io/part-of": "ichor"}},
            "spec": {"clusterIP": ISSUER_SERVICE_IP, "type": "ClusterIP",
                "ports": [{"name": "internal", "port": ichor_renderers::trust::INTERNAL_PORT}]}}),
    )
}

fn to_object<T: serde::Serialize>(kind: &str, typed: &T) -> Option<Object> {
    let mut value = serde_json::to_value(typed).ok()?;
    let meta = value.get_mut("metadata")?.as_object_mut()?;
    let name = meta.get("name")?.as_str()?.to_owned();
    let namespace = match meta.get("namespace").and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() => ns.to_owned(),
        _ => {
            meta.insert("namespace".to_owned(), json!(NAMESPACE));
            NAMESPACE.to_owned()
        }
    };
    Some(Object::new(kind, namespace, name, value))
}

/// The objects of a manifest tree the graph watches (ConfigMaps are left out: the trust
/// ConfigMap is the graph's own).
pub fn manifest_objects(m: &Manifests) -> Vec<Object> {
    let mut out = Vec::new();
    out.extend(m.users.iter().filter_map(|u| to_object("IchorUser", u)));
    out.extend(
        m.installations
            .iter()
            .filter_map(|o| to_object("IchorInstallation", o)),
    );
    out.extend(m.clusters.iter().filter_map(|o| to_object("TalosCluster", o)));
    out.extend(m.machines.iter().filter_map(|o| to_object("TalosMachine", o)));
    out
}

/// The user names holding an entry in the local credentials file (`None`: no file yet, or one
/// that does not parse — then nothing is derived from it).
pub fn credentials_users(path: &Path) -> Option<Vec<String>> {
    let bytes = fs::read(path).ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    let mut users: Vec<String> = value.get("entries")?.as_object()?.keys().cloned().collect();
    users.sort();
    Some(users)
}

/// The credentials Secret the graph sees for these users: one (empty) key per user. Only the key
/// names matter to the graph; no hash ever enters the World.
pub fn credentials_secret(users: &[String]) -> Object {
    let data: serde_json::Map<String, Value> = users.iter().map(|u| (u.clone(), json!(""))).collect();
    Object::new(
        "Secret",
        NAMESPACE,
        CREDENTIALS_SECRET_NAME,
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": CREDENTIALS_SECRET_NAME, "namespace": NAMESPACE},
            "type": OPAQUE, "data": data}),
    )
}

/// The reason node of effects asked for again after a failed apply.
pub const REISSUE_NODE: &str = "requested-effects";

/// Removes a user's credentials entry for the graph's garbage collection.
pub trait CredentialsRemover: Send {
    /// Removes the entry of `request.key` (absent is fine).
    ///
    /// # Errors
    /// Why it could not be removed (the graph asks again on a later tick).
    fn remove(&mut self, request: &RemoveCredentialsKeyRequest) -> Result<(), String>;
}

/// What one [`LocalController::tick`] did, for the log.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TickReport {
    /// Source events folded (manifest and credentials changes).
    pub events: usize,
    /// Every action decided, as text (`apply …`, `effect …`), with its reason.
    pub actions: Vec<String>,
    /// Problems: a manifest tree that does not parse, a failed effect or write, a node failure.
    pub problems: Vec<String>,
    /// Secrets written (names).
    pub secrets_written: Vec<String>,
    /// Whether an evaluation decided nothing within [`MAX_ROUNDS`].
    pub settled: bool,
}

/// Where the local controller reads and writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPaths {
    /// The GitOps tree of manifests.
    pub manifests: PathBuf,
    /// The Secrets directory (`<dir>/<name>/<key>`).
    pub secrets: PathBuf,
    /// The issuer local store's credentials file.
    pub credentials: PathBuf,
}

/// The identity graph over local files, with the local applier.
pub struct LocalController {
    controller: Controller,
    paths: LocalPaths,
    secrets: SecretFiles,
    material: Box<dyn KeyMaterial + Send>,
    remover: Box<dyn CredentialsRemover>,
    /// Objects read from the manifest tree (without in-memory status).
    manifests: BTreeMap<ObjectKey, Object>,
    /// Status writes kept in memory, per object.
    statuses: BTreeMap<ObjectKey, Value>,
    credentials: Option<Vec<String>>,
    resource_version: u64,
    /// A failed apply: the next tick asks again for the effects still outstanding.
    reissue: bool,
}

/// Merges `patch` into `base`: objects recursively, everything else replaced (server-side apply
/// of the fields the patch owns).
fn merge_into(base: &mut Value, patch: &Value) {
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

impl LocalController {
    /// A controller over `paths`, generating keys with `material` and removing credentials
    /// entries with `remover`. Reads the stored Secrets and the synthesised Service; the tree is
    /// read by the first [`LocalController::tick`].
    ///
    /// # Errors
    /// The graph did not build, or the Secrets directory cannot be read.
    pub fn new(
        paths: LocalPaths,
        material: Box<dyn KeyMaterial + Send>,
        remover: Box<dyn CredentialsRemover>,
    ) -> Result<Self, LocalError> {
        let secrets = SecretFiles::new(&paths.secrets);
        let mut this = LocalController {
            controller: Controller::new()?,
            paths,
            secrets,
            material,
            remover,
            manifests: BTreeMap::new(),
            statuses: BTreeMap::new(),
            credentials: None,
            resource_version: 0,
            reissue: false,
        };
        this.push(Event::Applied(issuer_service()));
        for secret in this.secrets.read_all()? {
            this.push(Event::Applied(secret.to_object()));
        }
        Ok(this)
    }

    /// The graph and its World (reports, tests).
    pub fn controller(&self) -> &Controller {
        &self.controller
    }

    /// Where Secret `name` is stored.
    pub fn secret_dir(&self, name: &str) -> PathBuf {
        self.secrets.dir_of(name)
    }

    fn push(&mut self, event: Event) {
        let event = match event {
            Event::Applied(mut o) => {
                self.resource_version += 1;
                o.resource_version = Some(self.resource_version.to_string());
                Event::Applied(o)
            }
            other => other,
        };
        self.controller.fold(event);
    }

    /// The object as the World should see it: the file's content with the in-memory status.
    fn with_status(&self, mut object: Object) -> Object {
        if let Some(status) = self.statuses.get(&object.key())
            && let Some(map) = object.value.as_object_mut()
        {
            map.insert("status".to_owned(), status.clone());
        }
        object
    }

    /// Re-reads the manifest tree and folds what changed; returns the events folded.
    fn poll_manifests(&mut self, report: &mut TickReport) {
        let manifests = match load_dir(&self.paths.manifests) {
            Ok(m) => m,
            Err(ManifestErrors(errors)) => {
                report.problems.extend(
                    errors
                        .iter()
                        .map(|e| format!("{e} (the previous manifests stay in effect)")),
                );
                return;
            }
        };
        let now: BTreeMap<ObjectKey, Object> = manifest_objects(&manifests)
            .into_iter()
            .map(|o| (o.key(), o))
            .collect();
        let gone: Vec<ObjectKey> = self
            .manifests
            .keys()
            .filter(|k| !now.contains_key(*k))
            .cloned()
            .collect();
        for key in gone {
            self.manifests.remove(&key);
            self.statuses.remove(&key);
            self.push(Event::Deleted(key));
            report.events += 1;
        }
        for (key, object) in now {
            if self.manifests.get(&key).is_some_and(|o| o.value == object.value) {
                continue;
            }
            self.manifests.insert(key, object.clone());
            let merged = self.with_status(object);
            self.push(Event::Applied(merged));
            report.events += 1;
        }
    }

    fn poll_credentials(&mut self, report: &mut TickReport) {
        let users = credentials_users(&self.paths.credentials);
        if users == self.credentials {
            return;
        }
        self.credentials = users.clone();
        if let Some(users) = users {
            self.push(Event::Applied(credentials_secret(&users)));
            report.events += 1;
        }
    }

    /// Reads the sources, folds their changes and `now`, then evaluates and applies until the
    /// graph decides nothing (at most [`MAX_ROUNDS`] rounds).
    pub fn tick(&mut self, now: Timestamp) -> TickReport {
        let mut report = TickReport::default();
        self.poll_manifests(&mut report);
        self.poll_credentials(&mut report);
        self.push(Event::Tick(now));
        for _ in 0..MAX_ROUNDS {
            let (eval, _renders) = self.controller.evaluate();
            report
                .problems
                .extend(eval.failures.iter().map(|f| format!("node failure: {f:?}")));
            let mut actions = eval.actions;
            if std::mem::take(&mut self.reissue) {
                let outstanding = self.controller.outstanding_effects(&actions, REISSUE_NODE);
                actions.extend(outstanding);
            }
            if actions.is_empty() {
                report.settled = true;
                break;
            }
            report.actions.extend(actions.iter().map(ToString::to_string));
            if let Err(e) = self.apply(&actions, &mut report) {
                report.problems.push(e);
                // The graph announces an effect once: the next tick asks again for those still
                // outstanding, and re-diffs every object.
                self.reissue = true;
                self.controller.resync();
                break;
            }
        }
        report
    }

    /// Applies one evaluation's actions.
    fn apply(&mut self, actions: &[Action], report: &mut TickReport) -> Result<(), String> {
        let mut effects = Vec::new();
        for action in actions {
            match action {
                Action::Apply { object, .. } => {
                    let key = object.key();
                    if let Some(status) = object.value.get("status")
                        && self.manifests.contains_key(&key)
                    {
                        let mut merged = self.statuses.get(&key).cloned().unwrap_or_else(|| json!({}));
                        merge_into(&mut merged, status);
                        self.statuses.insert(key.clone(), merged);
                        let base = self
                            .manifests
                            .get(&key)
                            .cloned()
                            .unwrap_or_else(|| object.clone());
                        let merged = self.with_status(base);
                        self.push(Event::Applied(merged));
                    } else {
                        let mut value = self
                            .controller
                            .world()
                            .get(&key)
                            .map(|o| o.value.clone())
                            .unwrap_or_else(|| json!({}));
                        merge_into(&mut value, &object.value);
                        self.push(Event::Applied(Object::new(
                            object.kind.clone(),
                            object.namespace.clone(),
                            object.name.clone(),
                            value,
                        )));
                    }
                }
                Action::Delete { key, .. } => self.push(Event::Deleted(key.clone())),
                Action::Effect { request, .. } => effects.push(request),
            }
        }
        if effects.is_empty() {
            return Ok(());
        }
        let outcomes = perform::perform(self.controller.world(), &effects, self.material.as_mut())
            .map_err(|e: PerformError| e.to_string())?;
        for outcome in outcomes {
            match outcome {
                Outcome::Secret(secret) => {
                    self.secrets.write(&secret).map_err(|e| e.to_string())?;
                    report.secrets_written.push(secret.name.clone());
                    self.push(Event::Applied(secret.to_object()));
                }
                Outcome::RemoveCredentialsKey(r) => {
                    self.remover.remove(&r)?;
                    let mut empty = TickReport::default();
                    self.poll_credentials(&mut empty);
                }
            }
        }
        Ok(())
    }
}

/// The set of Secret names a settled local controller has written (tests, start-up checks).
pub fn stored_secret_names(dir: &Path) -> BTreeSet<String> {
    SecretFiles::new(dir)
        .read_all()
        .map(|all| all.into_iter().map(|s| s.name).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::perform::OsKeyMaterial;
    use ichor_renderers::trust::keys::KeysDocument;
    use ichor_renderers::trust::tls::{CertFacts, San};
    use ichor_renderers::trust::{KEYS_JSON, SIGNING_SECRET};
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Removed(Arc<Mutex<Vec<String>>>);

    impl CredentialsRemover for Removed {
        fn remove(&mut self, request: &RemoveCredentialsKeyRequest) -> Result<(), String> {
            self.0.lock().unwrap().push(request.key.clone());
            Ok(())
        }
    }

    const ADMIN: &str = "apiVersion: ichor.maesh.dev/v1alpha1\nkind: IchorUser\nmetadata:\n  name: admin\nspec:\n  roles: [admin]\n";

    fn setup() -> (tempfile::TempDir, LocalPaths, Removed) {
        let tmp = tempfile::tempdir().unwrap();
        let paths = LocalPaths {
            manifests: tmp.path().join("manifests"),
            secrets: tmp.path().join("secrets"),
            credentials: tmp.path().join("credentials.json"),
        };
        fs::create_dir_all(paths.manifests.join("users")).unwrap();
        fs::write(paths.manifests.join("users/admin.yaml"), ADMIN).unwrap();
        (tmp, paths, Removed::default())
    }

    fn read(path: &Path) -> String {
        fs::read_to_string(path).unwrap()
    }

    #[test]
    fn a_first_tick_writes_keys_a_ca_and_a_leaf_for_127_0_0_1_and_settles() {
        let (_tmp, paths, removed) = setup();
        let mut c = LocalController::new(paths.clone(), Box::new(OsKeyMaterial), Box::new(removed)).unwrap();
        let report = c.tick(Timestamp::now());
        assert!(report.settled, "{report:?}");
        assert!(report.problems.is_empty(), "{report:?}");
        let names = stored_secret_names(&paths.secrets);
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            [CA_SECRET, SIGNING_SECRET, TLS_SECRET]
        );
        let doc = KeysDocument::parse(&fs::read(paths.secrets.join(SIGNING_SECRET).join(KEYS_JSON)).unwrap())
            .unwrap();
        assert_eq!((doc.keys().len(), doc.hmac().len()), (1, 1));
        let ca = CertFacts::from_pem(&read(&paths.secrets.join(CA_SECRET).join("tls.crt")), "ca").unwrap();
        let leaf =
            CertFacts::from_pem(&read(&paths.secrets.join(TLS_SECRET).join("tls.crt")), "leaf").unwrap();
        assert!(leaf.is_issued_by(&ca));
        assert!(
            leaf.sans.contains(&San::Ip("127.0.0.1".parse().unwrap())),
            "{:?}",
            leaf.sans
        );
        assert!(
            leaf.sans.contains(&San::Dns("localhost".into())),
            "{:?}",
            leaf.sans
        );
        let mode = fs::metadata(paths.secrets.join(TLS_SECRET).join("tls.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let mode = fs::metadata(paths.secrets.join(TLS_SECRET))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);

        let again = c.tick(Timestamp::now());
        assert!(
            again.actions.is_empty() && again.secrets_written.is_empty(),
            "{again:?}"
        );
    }

    #[test]
    fn a_restart_reads_the_stored_secrets_and_generates_nothing() {
        let (_tmp, paths, removed) = setup();
        let now = Timestamp::now();
        let mut first =
            LocalController::new(paths.clone(), Box::new(OsKeyMaterial), Box::new(removed.clone())).unwrap();
        assert!(first.tick(now).settled);
        let keys = read(&paths.secrets.join(SIGNING_SECRET).join(KEYS_JSON));
        let mut second =
            LocalController::new(paths.clone(), Box::new(OsKeyMaterial), Box::new(removed)).unwrap();
        let report = second.tick(now);
        assert!(report.secrets_written.is_empty(), "{report:?}");
        assert_eq!(read(&paths.secrets.join(SIGNING_SECRET).join(KEYS_JSON)), keys);
    }

    #[test]
    fn an_edited_user_file_reaches_the_world_and_a_broken_one_keeps_the_previous_objects() {
        let (_tmp, paths, removed) = setup();
        let mut c = LocalController::new(paths.clone(), Box::new(OsKeyMaterial), Box::new(removed)).unwrap();
        c.tick(Timestamp::now());
        let key = ObjectKey::new("IchorUser", NAMESPACE, "admin");
        fs::write(
            paths.manifests.join("users/admin.yaml"),
            format!("{ADMIN}  disabled: true\n"),
        )
        .unwrap();
        let report = c.tick(Timestamp::now());
        assert_eq!(report.events, 1, "{report:?}");
        let user = c.controller().world().get(&key).unwrap();
        assert_eq!(user.value["spec"]["disabled"], json!(true));
        assert!(user.value.get("status").is_some(), "the in-memory status is kept");

        fs::write(paths.manifests.join("users/admin.yaml"), "kind: IchorUsers\n").unwrap();
        let report = c.tick(Timestamp::now());
        assert!(!report.problems.is_empty());
        assert!(c.controller().world().get(&key).is_some());
        assert_eq!(
            read(&paths.manifests.join("users/admin.yaml")),
            "kind: IchorUsers\n"
        );
    }

    #[test]
    fn a_credentials_entry_without_its_user_is_handed_to_the_remover() {
        let (_tmp, paths, removed) = setup();
        fs::write(
            &paths.credentials,
            r#"{"generation": 3, "entries": {"admin": {}, "ghost": {}}}"#,
        )
        .unwrap();
        let mut c = LocalController::new(paths, Box::new(OsKeyMaterial), Box::new(removed.clone())).unwrap();
        c.tick(Timestamp::now());
        assert_eq!(*removed.0.lock().unwrap(), ["ghost"]);
    }

    /// Fails its first `failures` removals.
    struct Flaky {
        failures: usize,
        removed: Removed,
    }

    impl CredentialsRemover for Flaky {
        fn remove(&mut self, request: &RemoveCredentialsKeyRequest) -> Result<(), String> {
            if self.failures > 0 {
                self.failures -= 1;
                return Err("the credentials store is unavailable".to_owned());
            }
            self.removed.remove(request)
        }
    }

    #[test]
    fn a_failed_effect_is_asked_for_again_on_the_next_tick() {
        let (_tmp, paths, removed) = setup();
        fs::write(
            &paths.credentials,
            r#"{"generation": 3, "entries": {"admin": {}, "ghost": {}}}"#,
        )
        .unwrap();
        let flaky = Flaky {
            failures: 1,
            removed: removed.clone(),
        };
        let mut c = LocalController::new(paths, Box::new(OsKeyMaterial), Box::new(flaky)).unwrap();
        let first = c.tick(Timestamp::now());
        assert!(
            first.problems.iter().any(|p| p.contains("unavailable")),
            "{first:?}"
        );
        assert!(removed.0.lock().unwrap().is_empty());
        let second = c.tick(Timestamp::now());
        assert!(
            second.actions.iter().any(|a| a.contains(REISSUE_NODE)),
            "{second:?}"
        );
        assert_eq!(*removed.0.lock().unwrap(), ["ghost"]);
        let third = c.tick(Timestamp::now());
        assert!(third.actions.is_empty(), "{third:?}");
    }

    #[test]
    fn a_secret_key_that_cannot_be_a_file_name_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let files = SecretFiles::new(tmp.path());
        let secret = SecretData {
            name: "s".into(),
            type_: OPAQUE.into(),
            data: BTreeMap::from([("../escape".to_owned(), b"x".to_vec())]),
        };
        assert!(matches!(files.write(&secret), Err(LocalError::BadKey { .. })));
        assert!(!tmp.path().join("escape").exists());
    }
}
