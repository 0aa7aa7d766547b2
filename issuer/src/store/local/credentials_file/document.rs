//! The credentials document: what the file holds (one JSON object per user), each entry as held
//! in memory with its version, and the file's layout of one entry per line.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    sync::{Arc, OnceLock},
};

use ichor_renderers::auth::credentials::{CredentialsEntry, CredentialsError};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::ABSENT_VERSION;
use crate::store::StoreError;

/// The document on disk.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Document {
    /// Incremented by every rewrite of the file; 0 when the file does not exist. Informational:
    /// it is not a version (entries are versioned one by one).
    pub generation: u64,
    /// Each user's entry, as the entry's JSON object.
    #[serde(default)]
    pub entries: BTreeMap<String, serde_json::Value>,
}

/// One user's entry as held in memory: its compact JSON (what the file holds for it), its
/// version, and its parsed form once a read has needed it.
///
/// The version is `sha256:<hex>` of the compact JSON ([`ABSENT_VERSION`] for a user without an
/// entry). It depends on that entry alone, so another user's write never moves it; two equal
/// entries have the same version, which is sound because a change computed from an entry depends
/// only on its content.
///
/// The parsed form is kept so that a refresh, which reads its user's entry and writes the next
/// one, parses no JSON: a written entry keeps the entry it was serialized from, and an entry read
/// from the file is parsed on its first read only. `Debug` shows the version alone (the JSON
/// holds the password hash).
pub(crate) struct Entry {
    /// The entry's compact JSON object.
    pub json: String,
    /// The entry's version.
    pub version: String,
    parsed: OnceLock<CredentialsEntry>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.json == other.json && self.version == other.version
    }
}

impl Eq for Entry {}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl Entry {
    /// The entry of a JSON object.
    pub(crate) fn of(value: &serde_json::Value) -> Self {
        Self::of_compact(value.to_string(), OnceLock::new())
    }

    /// The entry `entry` written as `json`, which must be its compact serialization by
    /// [`CredentialsEntry::to_json`]: serde_json's compact output, which reads back as a
    /// [`serde_json::Value`] that prints as the same bytes (object keys keep their order), so the
    /// version is the one [`Entry::of`] gives any reader of the file.
    pub(crate) fn of_written(json: String, entry: CredentialsEntry) -> Self {
        Self::of_compact(json, OnceLock::from(entry))
    }

    fn of_compact(json: String, parsed: OnceLock<CredentialsEntry>) -> Self {
        let version = format!("sha256:{}", hex::encode(Sha256::digest(json.as_bytes())));
        Self {
            json,
            version,
            parsed,
        }
    }

    /// The parsed entry of `user` (parsed at most once while it parses).
    ///
    /// # Errors
    /// The entry is not a valid credentials entry.
    pub(crate) fn parsed(&self, user: &str) -> Result<CredentialsEntry, CredentialsError> {
        if let Some(entry) = self.parsed.get() {
            return Ok(entry.clone());
        }
        let entry = CredentialsEntry::parse(user, self.json.as_bytes())?;
        // A concurrent first read may have set it: both parsed the same bytes.
        let _ = self.parsed.set(entry.clone());
        Ok(entry)
    }
}

/// The document as this process holds it: every entry with its version.
#[derive(Clone, Debug, Default)]
pub(crate) struct Snapshot {
    /// The file's rewrite count (see [`Document::generation`]).
    pub generation: u64,
    /// Each user's entry.
    pub entries: BTreeMap<String, Arc<Entry>>,
}

impl Snapshot {
    pub(super) fn of(doc: &Document) -> Self {
        Self {
            generation: doc.generation,
            entries: doc
                .entries
                .iter()
                .map(|(user, value)| (user.clone(), Arc::new(Entry::of(value))))
                .collect(),
        }
    }

    /// The version of `user`'s entry (see [`Entry`]).
    pub(crate) fn version(&self, user: &str) -> &str {
        self.entries
            .get(user)
            .map_or(ABSENT_VERSION, |e| e.version.as_str())
    }

    /// The file's bytes: the document with one compact entry per line.
    pub(super) fn render(&self) -> Result<Vec<u8>, StoreError> {
        let size: usize = self
            .entries
            .iter()
            .map(|(u, e)| u.len() + e.json.len() + 12)
            .sum();
        let mut out = String::with_capacity(size + 64);
        let fmt =
            |e: std::fmt::Error| StoreError::Unavailable(format!("cannot render the credentials file: {e}"));
        write!(
            out,
            "{{\n  \"generation\": {},\n  \"entries\": {{",
            self.generation
        )
        .map_err(fmt)?;
        for (i, (user, entry)) in self.entries.iter().enumerate() {
            let key = serde_json::to_string(user)
                .map_err(|e| StoreError::Unavailable(format!("cannot render the credentials file: {e}")))?;
            let sep = if i == 0 { "" } else { "," };
            write!(out, "{sep}\n    {key}: {}", entry.json).map_err(fmt)?;
        }
        out.push_str(if self.entries.is_empty() {
            "}\n}\n"
        } else {
            "\n  }\n}\n"
        });
        Ok(out.into_bytes())
    }
}
