//! Putting the rendered `KubeAuthenticationConfig` document into a node's machine
//! configuration.
//!
//! `ApplyConfiguration` takes the FULL machine configuration (the v1alpha1 document and every
//! other document), not a patch, so the node's current configuration is read from a file
//! (`--machine-config-dir`, `<machine>.yaml`, multi-document YAML, e.g. from
//! `talosctl get machineconfig -o jsonpath='{.spec}'` or the file it was created from) and the
//! rendered document replaces the one of the same kind — a document-level replace, as Talos's
//! `merge: replace` semantics: nothing of the old document is kept — or is appended when there
//! is none. Every other document is sent byte for byte as read (comments and order kept), so
//! the apply changes nothing but that document.
//!
//! A node Ichor never applied its document to (adoption) may already trust issuers configured by
//! hand in its `KubeAuthenticationConfig`. Replacing that document would silently remove them, so
//! an adoption that drops an issuer is refused: the site's IdP belongs in the cluster's
//! `spec.authentication.external`, from where every render keeps it.

/// The largest machine configuration read: 4 MiB (apid takes up to 32 MiB per message; a real
/// configuration is tens of kilobytes).
pub const MAX_BYTES: usize = 4 * 1024 * 1024;

/// What the merge did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merge {
    /// An existing document of the kind was replaced.
    Replaced,
    /// The file had none; the document was appended.
    Appended,
}

/// Why a machine configuration cannot take the document.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum MachineConfigError {
    /// The file is larger than [`MAX_BYTES`].
    #[error("{file}: larger than {max} bytes; this is not a machine configuration")]
    TooLarge {
        /// The file.
        file: String,
        /// The bound.
        max: usize,
    },
    /// A document is not YAML.
    #[error("{file}: document {document}: not valid YAML ({reason})")]
    Yaml {
        /// The file.
        file: String,
        /// 1-based document number.
        document: usize,
        /// The parser's message.
        reason: String,
    },
    /// No v1alpha1 document: Talos would refuse the configuration.
    #[error(
        "{file}: no v1alpha1 document (`version: v1alpha1`); ApplyConfiguration needs the node's full \
         machine configuration, not a patch"
    )]
    NoMainDocument {
        /// The file.
        file: String,
    },
    /// The kind appears more than once.
    #[error("{file}: documents {first} and {second} are both {kind}; keep one")]
    Duplicate {
        /// The file.
        file: String,
        /// The kind.
        kind: String,
        /// 1-based document numbers.
        first: usize,
        /// 1-based.
        second: usize,
    },
    /// Adopting the node would remove issuers its current document trusts.
    #[error(
        "{file}: document {document} (KubeAuthenticationConfig) already trusts {issuers}, which the rendered \
         document does not; Ichor never applied this node's document, so replacing it would lock out \
         whoever signs in through that issuer. Move the IdP into the TalosCluster's \
         spec.authentication.external and render again"
    )]
    ForeignJwt {
        /// The file.
        file: String,
        /// 1-based document number.
        document: usize,
        /// The issuer URLs that would be removed, comma-separated.
        issuers: String,
    },
}

/// The `jwt[].issuer.url`s of an authentication document (Talos's `configuration` field, or a
/// bare `AuthenticationConfiguration`).
fn jwt_issuers(value: &serde_yaml::Value) -> Vec<String> {
    let config = value.get("configuration").unwrap_or(value);
    config
        .get("jwt")
        .and_then(serde_yaml::Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(|j| j.get("issuer")?.get("url")?.as_str().map(str::to_owned))
        .collect()
}

/// One document of a multi-document YAML text, as written.
struct RawDocument<'a> {
    text: &'a str,
}

/// Splits at lines that are exactly `---` (trailing spaces or a comment allowed). A leading
/// separator yields no empty document.
fn split_documents(text: &str) -> Vec<RawDocument<'_>> {
    let mut docs = Vec::new();
    let mut start = 0;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_end();
        let is_separator = trimmed == "---" || trimmed.starts_with("--- #");
        if is_separator {
            docs.push(RawDocument {
                text: &text[start..offset],
            });
            start = offset + line.len();
        }
        offset += line.len();
    }
    docs.push(RawDocument { text: &text[start..] });
    docs
}

/// Whether a YAML document holds nothing (only comments and blank lines).
fn is_blank(text: &str) -> bool {
    text.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#') || t == "..."
    })
}

/// One non-blank document of a machine configuration, parsed.
struct Parsed<'a> {
    /// As written (without the separator line).
    text: &'a str,
    /// The YAML value.
    value: serde_yaml::Value,
    /// Its `kind`, when it has one.
    kind: Option<String>,
    /// Whether it is the v1alpha1 document (`version: v1alpha1`, no `kind`).
    main: bool,
    /// 1-based document number in the text (blank documents counted).
    number: usize,
}

/// The non-blank documents of `current` (named `file` in errors), bounded by [`MAX_BYTES`].
fn parse_documents<'a>(file: &str, current: &'a str) -> Result<Vec<Parsed<'a>>, MachineConfigError> {
    if current.len() > MAX_BYTES {
        return Err(MachineConfigError::TooLarge {
            file: file.to_owned(),
            max: MAX_BYTES,
        });
    }
    let mut parsed = Vec::new();
    for (i, doc) in split_documents(current).into_iter().enumerate() {
        if is_blank(doc.text) {
            continue;
        }
        let value: serde_yaml::Value =
            serde_yaml::from_str(doc.text).map_err(|e| MachineConfigError::Yaml {
                file: file.to_owned(),
                document: i + 1,
                reason: e.to_string(),
            })?;
        let field = |name: &str| {
            value
                .get(name)
                .and_then(serde_yaml::Value::as_str)
                .map(str::to_owned)
        };
        let kind = field("kind");
        let main = kind.is_none() && field("version").as_deref() == Some("v1alpha1");
        parsed.push(Parsed {
            text: doc.text,
            value,
            kind,
            main,
            number: i + 1,
        });
    }
    Ok(parsed)
}

/// The index in `docs` of the one document of kind `kind`.
///
/// # Errors
/// [`MachineConfigError::Duplicate`] when there are several.
fn find_kind(file: &str, docs: &[Parsed<'_>], kind: &str) -> Result<Option<usize>, MachineConfigError> {
    let mut found: Option<usize> = None;
    for (i, doc) in docs.iter().enumerate() {
        if doc.kind.as_deref() != Some(kind) {
            continue;
        }
        if let Some(first) = found {
            return Err(MachineConfigError::Duplicate {
                file: file.to_owned(),
                kind: kind.to_owned(),
                first: docs[first].number,
                second: doc.number,
            });
        }
        found = Some(i);
    }
    Ok(found)
}

/// The documents joined by `---` lines, each ending with a newline.
fn join(docs: &[&str]) -> String {
    let mut out = String::new();
    for (i, doc) in docs.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(doc);
        if !doc.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// `current` (the node's full machine configuration, named `file` in errors) with the document
/// of kind `kind` replaced by `document`, or `document` appended. `adopting`: Ichor has not
/// applied this kind to the node before, so a current document trusting an issuer `document`
/// does not is refused ([`MachineConfigError::ForeignJwt`]).
///
/// # Errors
/// See [`MachineConfigError`].
pub fn replace_document(
    file: &str,
    current: &str,
    kind: &str,
    document: &str,
    adopting: bool,
) -> Result<(String, Merge), MachineConfigError> {
    let docs = parse_documents(file, current)?;
    let replaced_at = find_kind(file, &docs, kind)?;
    if !docs.iter().any(|d| d.main) {
        return Err(MachineConfigError::NoMainDocument {
            file: file.to_owned(),
        });
    }
    if let (Some(at), true) = (replaced_at, adopting) {
        let rendered: Vec<String> = serde_yaml::from_str::<serde_yaml::Value>(document)
            .map(|v| jwt_issuers(&v))
            .unwrap_or_default();
        let foreign: Vec<String> = jwt_issuers(&docs[at].value)
            .into_iter()
            .filter(|url| !rendered.contains(url))
            .collect();
        if !foreign.is_empty() {
            return Err(MachineConfigError::ForeignJwt {
                file: file.to_owned(),
                document: docs[at].number,
                issuers: foreign.join(", "),
            });
        }
    }
    let mut kept: Vec<&str> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| if Some(i) == replaced_at { document } else { d.text })
        .collect();
    let merge = if replaced_at.is_some() {
        Merge::Replaced
    } else {
        kept.push(document);
        Merge::Appended
    };
    Ok((join(&kept), merge))
}

/// The document of kind `kind` in the machine configuration `config`, exactly as written
/// (comments kept, without the `---` line), or `None` when it has none: what a node ran before
/// a rollout step changed it, kept for a rollback.
///
/// # Errors
/// [`MachineConfigError::TooLarge`], [`MachineConfigError::Yaml`], or
/// [`MachineConfigError::Duplicate`] when the kind appears more than once.
pub fn extract_document(config: &str, kind: &str) -> Result<Option<String>, MachineConfigError> {
    const NAME: &str = "the machine configuration";
    let docs = parse_documents(NAME, config)?;
    Ok(find_kind(NAME, &docs, kind)?.map(|i| docs[i].text.to_owned()))
}

/// `current` (named `file` in errors) without its document of kind `kind`, every other
/// document kept byte for byte (when it has none, the same documents, re-joined as
/// [`replace_document`] joins them): the rollback of a node that had no document of the kind
/// before a rollout step.
///
/// # Errors
/// See [`MachineConfigError`]; a configuration without the v1alpha1 document is refused as in
/// [`replace_document`].
pub fn remove_document(file: &str, current: &str, kind: &str) -> Result<String, MachineConfigError> {
    let docs = parse_documents(file, current)?;
    let found = find_kind(file, &docs, kind)?;
    if !docs.iter().any(|d| d.main) {
        return Err(MachineConfigError::NoMainDocument {
            file: file.to_owned(),
        });
    }
    let kept: Vec<&str> = docs
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != found)
        .map(|(_, d)| d.text)
        .collect();
    Ok(join(&kept))
}

#[cfg(test)]
mod tests;
