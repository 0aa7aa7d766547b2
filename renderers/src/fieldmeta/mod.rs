//! fieldmeta: what a machine-configuration change costs the machine — nothing, a kube-apiserver
//! restart, or a reboot.
//!
//! [`classify`] compares two whole machine configurations (lists of Talos documents), lists
//! every changed field path, and classifies each by the [`RULES`] table (longest matching
//! prefix, else [`DEFAULT_RULE`]); the class of the change is the most expensive of its paths.
//! [`classify_hashes`] does the same at document granularity from the per-kind sha256 map a
//! `TalosMachine` reports, for the graph, which never sees the applied documents themselves.
//!
//! # Guarantees
//! Total and deterministic: any input classifies (a value that is not a proper document is
//! compared as a whole and falls to the conservative default), and changes are listed in
//! (document, path) order.

mod diff;
mod rules;

use std::{collections::BTreeMap, fmt};

use serde::{Serialize, Serializer};

pub use rules::{ChangeClass, DEFAULT_RULE, RULES, Rule, rule_for};

/// Which document of a machine configuration: Talos matches documents by (apiVersion, kind,
/// name) when it patches a configuration (spec talos-kube-authentication-config.md §5).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentKey {
    /// `apiVersion` (`v1alpha1` for the Talos document kinds); absent for the legacy main
    /// document and in hash maps, which are keyed by kind only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// The document kind. The legacy main document has no `kind` field; it is called `v1alpha1`
    /// (its `version`), which is also what rules name it by.
    pub kind: String,
    /// `name`, for the document kinds that have one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl DocumentKey {
    /// The kind a document without `kind` is given: the legacy v1alpha1 main document.
    pub const LEGACY_KIND: &'static str = "v1alpha1";

    /// The key of one document value (anything not an object keys as the legacy document,
    /// which is compared as a whole).
    pub fn of(document: &serde_json::Value) -> Self {
        let text = |field: &str| {
            document
                .get(field)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        Self {
            api_version: text("apiVersion"),
            kind: text("kind").unwrap_or_else(|| Self::LEGACY_KIND.to_owned()),
            name: text("name"),
        }
    }
}

impl fmt::Display for DocumentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.kind)?;
        if let Some(name) = &self.name {
            write!(f, "/{name}")?;
        }
        Ok(())
    }
}

/// A field path inside a document, as segments (object keys). Empty: the whole document.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FieldPath(pub Vec<String>);

impl FieldPath {
    /// Whether the path is the whole document.
    pub fn is_whole_document(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for FieldPath {
    /// `a.b.c`; a segment that is empty or holds a `.` is written quoted (`labels."x.y/z"`);
    /// the whole document is `(whole document)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(whole document)");
        }
        for (i, seg) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            if seg.is_empty() || seg.contains('.') || seg.contains('"') {
                write!(f, "{seg:?}")?;
            } else {
                f.write_str(seg)?;
            }
        }
        Ok(())
    }
}

impl Serialize for FieldPath {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// How a path changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ChangeKind {
    /// Present only in the new configuration.
    Added,
    /// Present only in the old configuration.
    Removed,
    /// Present in both with different values (an array counts as one value).
    Modified,
}

impl fmt::Display for ChangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Added => "added",
            Self::Removed => "removed",
            Self::Modified => "changed",
        })
    }
}

/// One changed path with its class and the rule that decided it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    /// The document.
    pub document: DocumentKey,
    /// The path inside it.
    pub path: FieldPath,
    /// Added, removed or modified.
    pub change: ChangeKind,
    /// What applying it costs.
    pub class: ChangeClass,
    /// The rule that decided the class (so `ichor render` can say why).
    pub rule: Rule,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}: {} — {}",
            self.document, self.path, self.change, self.class, self.rule.why
        )
    }
}

/// The classification of a configuration change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Classification {
    /// The most expensive class among the changes; `None` when nothing changed.
    pub class: Option<ChangeClass>,
    /// Every changed path, in (document, path) order.
    pub changes: Vec<Change>,
}

impl Classification {
    fn from_changes(mut changes: Vec<Change>) -> Self {
        changes.sort_by(|a, b| (&a.document, &a.path, a.change).cmp(&(&b.document, &b.path, b.change)));
        Self {
            class: changes.iter().map(|c| c.class).max(),
            changes,
        }
    }

    /// Whether nothing changed.
    pub fn is_unchanged(&self) -> bool {
        self.changes.is_empty()
    }

    /// The distinct documents that changed, in order.
    pub fn documents(&self) -> Vec<&DocumentKey> {
        let mut docs: Vec<&DocumentKey> = self.changes.iter().map(|c| &c.document).collect();
        docs.dedup();
        docs
    }
}

impl fmt::Display for Classification {
    /// One line with the class, then one indented line per change.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.class {
            None => f.write_str("unchanged"),
            Some(class) => {
                write!(f, "{class}")?;
                for change in &self.changes {
                    write!(f, "\n  {change}")?;
                }
                Ok(())
            }
        }
    }
}

/// Classify the change from `old` to `new` (whole machine configurations, one JSON value per
/// document) by the Ichor rule table.
pub fn classify(old: &[serde_json::Value], new: &[serde_json::Value]) -> Classification {
    classify_with(RULES, old, new)
}

/// [`classify`] with another rule table (tests, and callers that audit a candidate table).
pub fn classify_with(table: &[Rule], old: &[serde_json::Value], new: &[serde_json::Value]) -> Classification {
    let changes = diff::changed_paths(old, new)
        .into_iter()
        .map(|(document, path, change)| {
            let rule = rule_for(table, &document.kind, &path.0);
            Change {
                document,
                path,
                change,
                class: rule.class,
                rule,
            }
        })
        .collect();
    Classification::from_changes(changes)
}

/// Classify at document granularity from two maps of document kind → sha256 (hex), the form a
/// `TalosMachine` reports in `status.appliedDocumentHashes`. A kind in only one map is added or
/// removed; a kind whose hash differs is modified. Each changed document is classified by its
/// whole-document rule (a field rule cannot apply: which fields changed is unknown).
pub fn classify_hashes(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> Classification {
    classify_hashes_with(RULES, old, new)
}

/// [`classify_hashes`] with another rule table.
pub fn classify_hashes_with(
    table: &[Rule],
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> Classification {
    let kinds: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let changes = kinds
        .into_iter()
        .filter_map(|kind| {
            let change = match (old.get(kind), new.get(kind)) {
                (Some(a), Some(b)) if a == b => return None,
                (Some(_), Some(_)) => ChangeKind::Modified,
                (None, _) => ChangeKind::Added,
                (_, None) => ChangeKind::Removed,
            };
            let rule = rule_for(table, kind, &[]);
            Some(Change {
                document: DocumentKey {
                    api_version: None,
                    kind: kind.clone(),
                    name: None,
                },
                path: FieldPath::default(),
                change,
                class: rule.class,
                rule,
            })
        })
        .collect();
    Classification::from_changes(changes)
}

#[cfg(test)]
mod tests;
