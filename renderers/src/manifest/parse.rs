//! Parsing: bytes → documents → typed objects, collecting every error.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::Value;

use super::{MAX_DEPTH, MAX_DOCUMENTS, MAX_FILE_BYTES, ManifestError, Manifests};
use crate::crd::{GROUP, VERSION};

/// Which unknown fields of a kind are reported (identity's own parts); the rest belong to other
/// subsystems and are ignored.
#[derive(Clone, Copy)]
enum UnknownFields {
    /// Everywhere in the object.
    Everywhere,
    /// Under these field paths only.
    Under(&'static [&'static str]),
}

impl UnknownFields {
    fn reports(self, path: &str) -> bool {
        match self {
            Self::Everywhere => true,
            Self::Under(prefixes) => prefixes.iter().any(|p| {
                path.strip_prefix(p)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
            }),
        }
    }
}

/// Where a document came from.
#[derive(Clone)]
struct Origin {
    file: String,
    document: usize,
}

/// Accumulates objects and errors over the files of a directory.
#[derive(Default)]
pub(super) struct Collector {
    manifests: Manifests,
    seen: HashMap<(String, String, String), Origin>,
    documents: usize,
    stopped: bool,
    errors: Vec<ManifestError>,
}

impl Collector {
    pub(super) fn error(&mut self, error: ManifestError) {
        self.errors.push(error);
    }

    /// Parse one file's bytes (YAML, multi-document; JSON is read as the YAML it also is).
    pub(super) fn add_file(&mut self, file: &str, bytes: &[u8]) {
        if self.stopped {
            return;
        }
        if bytes.len() > MAX_FILE_BYTES {
            self.errors.push(ManifestError::FileTooLarge {
                file: file.to_owned(),
                max: MAX_FILE_BYTES,
            });
            return;
        }
        if is_json_name(file) {
            // JSON is read as the YAML it also is (which refuses duplicate keys), but its syntax
            // is checked strictly first: YAML would accept `{"kind": }` as a null.
            if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                let (line, column) = (e.line(), e.column());
                let message = e.to_string();
                let suffix = format!(" at line {line} column {column}");
                self.errors.push(ManifestError::Syntax {
                    file: file.to_owned(),
                    document: 1,
                    position: format!("line {line} column {column}"),
                    message: message.strip_suffix(&suffix).unwrap_or(&message).to_owned(),
                });
                return;
            }
        }
        for (index, doc) in serde_yaml::Deserializer::from_slice(bytes).enumerate() {
            let document = index + 1;
            let origin = Origin {
                file: file.to_owned(),
                document,
            };
            let value = match serde_yaml::Value::deserialize(doc) {
                Ok(value) => value,
                Err(e) => {
                    // The parser cannot resynchronise after a syntax error: stop this file.
                    self.errors.push(syntax_error(&origin, &e));
                    return;
                }
            };
            if value.is_null() {
                continue; // an empty document (`---` at the end of a file)
            }
            self.documents += 1;
            if self.documents > MAX_DOCUMENTS {
                self.errors.push(ManifestError::TooManyDocuments {
                    file: origin.file,
                    document,
                    max: MAX_DOCUMENTS,
                });
                self.stopped = true;
                return;
            }
            self.add_document(&origin, value);
        }
    }

    fn add_document(&mut self, origin: &Origin, value: serde_yaml::Value) {
        let value = match serde_json::to_value(value) {
            Ok(v) => v,
            Err(e) => return self.invalid(origin, "(document)", &format!("not representable as JSON: {e}")),
        };
        if depth(&value) > MAX_DEPTH {
            return self.errors.push(ManifestError::TooDeep {
                file: origin.file.clone(),
                document: origin.document,
                max: MAX_DEPTH,
            });
        }
        let Value::Object(map) = &value else {
            return self.invalid(origin, "(document)", "must be an object with apiVersion and kind");
        };
        let text = |field: &str| map.get(field).map(|v| v.as_str().map(str::to_owned));
        let (api_version, kind) = match (text("apiVersion"), text("kind")) {
            (Some(Some(a)), Some(Some(k))) => (a, k),
            (None, _) => return self.invalid(origin, "apiVersion", "required field is missing"),
            (Some(None), _) => return self.invalid(origin, "apiVersion", "must be a string"),
            (_, None) => return self.invalid(origin, "kind", "required field is missing"),
            (_, Some(None)) => return self.invalid(origin, "kind", "must be a string"),
        };
        let ichor = format!("{GROUP}/{VERSION}");
        const CLUSTER_OWNED: &[&str] = &["spec.authentication", "spec.cni"];
        const MACHINE_OWNED: &[&str] = &["spec.cluster", "spec.role", "spec.address", "status.conditions"];
        const INSTALLATION_OWNED: &[&str] = &["spec.users"];
        match (api_version.as_str(), kind.as_str()) {
            (a, "TalosCluster") if a == ichor => {
                if let Some(o) = self.keep(origin, &kind, value, UnknownFields::Under(CLUSTER_OWNED), true) {
                    self.manifests.clusters.push(o);
                }
            }
            (a, "TalosMachine") if a == ichor => {
                if let Some(o) = self.keep(origin, &kind, value, UnknownFields::Under(MACHINE_OWNED), true) {
                    self.manifests.machines.push(o);
                }
            }
            (a, "IchorUser") if a == ichor => {
                if let Some(o) = self.keep(origin, &kind, value, UnknownFields::Everywhere, true) {
                    self.manifests.users.push(o);
                }
            }
            (a, "IchorInstallation") if a == ichor => {
                let owned = UnknownFields::Under(INSTALLATION_OWNED);
                if let Some(o) = self.keep(origin, &kind, value, owned, false) {
                    self.manifests.installations.push(o);
                }
            }
            ("v1", "ConfigMap") => {
                if let Some(o) = self.keep(origin, &kind, value, UnknownFields::Everywhere, true) {
                    self.manifests.configmaps.push(o);
                }
            }
            _ => self.errors.push(ManifestError::UnsupportedKind {
                file: origin.file.clone(),
                document: origin.document,
                api_version: truncate(&api_version),
                kind: truncate(&kind),
            }),
        }
    }

    fn invalid(&mut self, origin: &Origin, path: &str, message: &str) {
        self.errors.push(ManifestError::Invalid {
            file: origin.file.clone(),
            document: origin.document,
            path: path.to_owned(),
            message: message.to_owned(),
        });
    }

    /// [`Self::typed`] then [`Self::register`]: the object when it is to be kept.
    fn keep<T: DeserializeOwned + Resource>(
        &mut self,
        origin: &Origin,
        kind: &str,
        value: Value,
        unknown: UnknownFields,
        namespaced: bool,
    ) -> Option<T> {
        let object: T = self.typed(origin, value, unknown)?;
        self.register(origin, kind, object.meta(), namespaced)
            .then_some(object)
    }

    /// Deserialize `value` as `T`, recording a wrong type or missing field with its path, and the
    /// unknown fields `unknown` reports. `None` when the object is unusable.
    fn typed<T: DeserializeOwned>(
        &mut self,
        origin: &Origin,
        value: Value,
        unknown: UnknownFields,
    ) -> Option<T> {
        let mut ignored = Vec::new();
        let mut record = |p: serde_ignored::Path<'_>| ignored.push(ignored_path(&p));
        let result: Result<T, _> =
            serde_path_to_error::deserialize(serde_ignored::Deserializer::new(value, &mut record));
        // apiVersion and kind were checked before; some derived types skip them as unknown.
        let checked = |p: &String| p != "apiVersion" && p != "kind";
        for path in ignored.into_iter().filter(|p| checked(p) && unknown.reports(p)) {
            self.errors.push(ManifestError::UnknownField {
                file: origin.file.clone(),
                document: origin.document,
                path,
            });
        }
        match result {
            Ok(object) => Some(object),
            Err(e) => {
                let (path, message) = field_error(e.path(), &e.inner().to_string());
                self.invalid(origin, &path, &message);
                None
            }
        }
    }

    /// Check the name and that no earlier document defined the same object; false when the
    /// object must not be kept.
    fn register(&mut self, origin: &Origin, kind: &str, meta: &ObjectMeta, namespaced: bool) -> bool {
        let Some(name) = meta.name.as_deref().filter(|n| !n.is_empty()) else {
            self.invalid(origin, "metadata.name", "required field is missing");
            return false;
        };
        let namespace = if namespaced {
            meta.namespace.clone().unwrap_or_default()
        } else {
            String::new()
        };
        let key = (kind.to_owned(), namespace, name.to_owned());
        if let Some(first) = self.seen.get(&key) {
            let object = if key.1.is_empty() {
                key.2.clone()
            } else {
                format!("{}/{}", key.1, key.2)
            };
            self.errors.push(ManifestError::Duplicate {
                file: origin.file.clone(),
                document: origin.document,
                kind: kind.to_owned(),
                object,
                first_file: first.file.clone(),
                first_document: first.document,
            });
            return false;
        }
        self.seen.insert(key, origin.clone());
        true
    }

    /// Everything read, sorted, or every error.
    pub(super) fn finish(mut self) -> Result<Manifests, Vec<ManifestError>> {
        if !self.errors.is_empty() {
            return Err(self.errors);
        }
        let m = &mut self.manifests;
        fn key(meta: &ObjectMeta) -> (String, String) {
            (
                meta.namespace.clone().unwrap_or_default(),
                meta.name.clone().unwrap_or_default(),
            )
        }
        m.clusters.sort_by_key(|o| key(&o.metadata));
        m.machines.sort_by_key(|o| key(&o.metadata));
        m.users.sort_by_key(|o| key(&o.metadata));
        m.installations.sort_by_key(|o| key(&o.metadata));
        m.configmaps.sort_by_key(|o| key(&o.metadata));
        Ok(self.manifests)
    }
}

fn is_json_name(file: &str) -> bool {
    file.to_ascii_lowercase().ends_with(".json")
}

fn truncate(s: &str) -> String {
    s.chars().take(128).collect()
}

/// `line L column C: message` from a YAML error (serde_yaml puts the position at the end of its
/// message; it is moved to the front, where every other error has its location).
fn syntax_error(origin: &Origin, e: &serde_yaml::Error) -> ManifestError {
    let message = e.to_string();
    let (position, message) = match e.location() {
        Some(loc) => {
            let suffix = format!(" at line {} column {}", loc.line(), loc.column());
            let message = match message.find(&suffix) {
                Some(i) => format!("{}{}", &message[..i], &message[i + suffix.len()..]),
                None => message,
            };
            (format!("line {} column {}", loc.line(), loc.column()), message)
        }
        None => ("unknown position".to_owned(), message),
    };
    ManifestError::Syntax {
        file: origin.file.clone(),
        document: origin.document,
        position,
        message,
    }
}

/// Nesting depth of a value (a scalar is 0), without recursion.
fn depth(value: &Value) -> usize {
    let mut max = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, d)) = stack.pop() {
        max = max.max(d);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, d + 1))),
            Value::Object(map) => stack.extend(map.values().map(|i| (i, d + 1))),
            _ => {}
        }
    }
    max
}

/// Append a segment to a field path (`a.b`, `a[0]`).
fn push_segment(path: &mut String, segment: &str, index: Option<usize>) {
    match index {
        Some(i) => path.push_str(&format!("[{i}]")),
        None => {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(segment);
        }
    }
}

/// The field path and message of a deserialization error. serde reports a missing field at its
/// parent (`spec: missing field `cluster``); the path is moved onto the field itself.
fn field_error(path: &serde_path_to_error::Path, message: &str) -> (String, String) {
    let mut out = String::new();
    for segment in path {
        match segment {
            serde_path_to_error::Segment::Seq { index } => push_segment(&mut out, "", Some(*index)),
            serde_path_to_error::Segment::Map { key } => push_segment(&mut out, key, None),
            serde_path_to_error::Segment::Enum { variant } => push_segment(&mut out, variant, None),
            serde_path_to_error::Segment::Unknown => {}
        }
    }
    if let Some(field) = message
        .strip_prefix("missing field `")
        .and_then(|r| r.strip_suffix('`'))
    {
        push_segment(&mut out, field, None);
        return (out, "required field is missing".to_owned());
    }
    if out.is_empty() {
        out.push_str("(document)");
    }
    (out, message.to_owned())
}

/// serde_ignored's path in the same `a.b[0]` form.
fn ignored_path(path: &serde_ignored::Path<'_>) -> String {
    let mut segments = Vec::new();
    let mut cur = path;
    loop {
        match cur {
            serde_ignored::Path::Root => break,
            serde_ignored::Path::Seq { parent, index } => {
                segments.push((String::new(), Some(*index)));
                cur = parent;
            }
            serde_ignored::Path::Map { parent, key } => {
                segments.push((key.clone(), None));
                cur = parent;
            }
            serde_ignored::Path::Some { parent }
            | serde_ignored::Path::NewtypeStruct { parent }
            | serde_ignored::Path::NewtypeVariant { parent } => cur = parent,
        }
    }
    let mut out = String::new();
    for (key, index) in segments.iter().rev() {
        push_segment(&mut out, key, *index);
    }
    out
}
