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
    if current.len() > MAX_BYTES {
        return Err(MachineConfigError::TooLarge {
            file: file.to_owned(),
            max: MAX_BYTES,
        });
    }
    let docs = split_documents(current);
    let mut kept: Vec<&str> = Vec::new();
    let mut replaced_at: Option<usize> = None;
    let mut has_main = false;
    for (i, doc) in docs.iter().enumerate() {
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
        if field("kind").as_deref() == Some(kind) {
            if let Some(first) = replaced_at {
                return Err(MachineConfigError::Duplicate {
                    file: file.to_owned(),
                    kind: kind.to_owned(),
                    first: first + 1,
                    second: i + 1,
                });
            }
            if adopting {
                let rendered: Vec<String> = serde_yaml::from_str::<serde_yaml::Value>(document)
                    .map(|v| jwt_issuers(&v))
                    .unwrap_or_default();
                let foreign: Vec<String> = jwt_issuers(&value)
                    .into_iter()
                    .filter(|url| !rendered.contains(url))
                    .collect();
                if !foreign.is_empty() {
                    return Err(MachineConfigError::ForeignJwt {
                        file: file.to_owned(),
                        document: i + 1,
                        issuers: foreign.join(", "),
                    });
                }
            }
            replaced_at = Some(i);
            kept.push(document);
            continue;
        }
        if field("kind").is_none() && field("version").as_deref() == Some("v1alpha1") {
            has_main = true;
        }
        kept.push(doc.text);
    }
    if !has_main {
        return Err(MachineConfigError::NoMainDocument {
            file: file.to_owned(),
        });
    }
    let merge = if replaced_at.is_some() {
        Merge::Replaced
    } else {
        kept.push(document);
        Merge::Appended
    };
    let mut out = String::new();
    for (i, doc) in kept.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(doc);
        if !doc.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok((out, merge))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const MAIN: &str = "# the node\nversion: v1alpha1\nmachine:\n  type: controlplane\n";
    const AUTH_OLD: &str = "apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfig:\n  jwt: []\n";
    const AUTH_NEW: &str =
        "apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfig:\n  anonymous: {enabled: true}\n";
    const OTHER: &str = "apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: cp-1 # keep me\n";

    #[test]
    fn the_document_of_the_kind_is_replaced_whole_and_the_others_kept_byte_for_byte() {
        let current = format!("{MAIN}---\n{AUTH_OLD}---\n{OTHER}");
        let (out, merge) =
            replace_document("cp-1.yaml", &current, "KubeAuthenticationConfig", AUTH_NEW, false).unwrap();
        assert_eq!(merge, Merge::Replaced);
        assert_eq!(out, format!("{MAIN}---\n{AUTH_NEW}---\n{OTHER}"));
        assert!(!out.contains("jwt: []"), "nothing of the old document is kept");
    }

    #[test]
    fn the_document_is_appended_when_the_configuration_has_none() {
        let current = format!("---\n{MAIN}---\n{OTHER}---\n");
        let (out, merge) =
            replace_document("cp-1.yaml", &current, "KubeAuthenticationConfig", AUTH_NEW, false).unwrap();
        assert_eq!(merge, Merge::Appended);
        assert_eq!(out, format!("{MAIN}---\n{OTHER}---\n{AUTH_NEW}"));
    }

    #[test]
    fn a_configuration_without_the_v1alpha1_document_is_refused_as_a_patch() {
        let err =
            replace_document("cp-1.yaml", AUTH_OLD, "KubeAuthenticationConfig", AUTH_NEW, false).unwrap_err();
        assert_eq!(
            err,
            MachineConfigError::NoMainDocument {
                file: "cp-1.yaml".into()
            }
        );
    }

    #[test]
    fn two_documents_of_the_kind_are_refused_naming_both() {
        let current = format!("{MAIN}---\n{AUTH_OLD}---\n{AUTH_OLD}");
        let err = replace_document("cp-1.yaml", &current, "KubeAuthenticationConfig", AUTH_NEW, false)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "cp-1.yaml: documents 2 and 3 are both KubeAuthenticationConfig; keep one"
        );
    }

    #[test]
    fn invalid_yaml_names_the_document() {
        let current = format!("{MAIN}---\nkind: [unclosed\n");
        let err =
            replace_document("cp-1.yaml", &current, "KubeAuthenticationConfig", AUTH_NEW, false).unwrap_err();
        assert!(
            matches!(err, MachineConfigError::Yaml { document: 2, .. }),
            "{err}"
        );
    }

    const AUTH_FOREIGN: &str = "apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfiguration:\n  jwt:\n  \
                                - issuer: {url: https://dex.example.com}\n  - issuer: {url: https://ichor.example.com}\n";
    const AUTH_ICHOR: &str = "apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfiguration:\n  jwt:\n  \
                              - issuer: {url: https://ichor.example.com}\n";

    #[test]
    fn adopting_a_node_whose_document_trusts_another_issuer_is_refused_naming_it() {
        let current = format!("{MAIN}---\n{AUTH_FOREIGN}");
        let err = replace_document(
            "cp-1.yaml",
            &current,
            "KubeAuthenticationConfig",
            AUTH_ICHOR,
            true,
        )
        .unwrap_err();
        assert_eq!(
            err,
            MachineConfigError::ForeignJwt {
                file: "cp-1.yaml".into(),
                document: 2,
                issuers: "https://dex.example.com".into()
            }
        );
        assert!(err.to_string().contains("spec.authentication.external"), "{err}");
    }

    #[test]
    fn adoption_goes_ahead_when_the_render_keeps_every_issuer_and_later_applies_may_drop_one() {
        let current = format!("{MAIN}---\n{AUTH_ICHOR}");
        let (_, merge) =
            replace_document("f", &current, "KubeAuthenticationConfig", AUTH_ICHOR, true).unwrap();
        assert_eq!(merge, Merge::Replaced);
        let current = format!("{MAIN}---\n{AUTH_FOREIGN}");
        let (out, _) =
            replace_document("f", &current, "KubeAuthenticationConfig", AUTH_ICHOR, false).unwrap();
        assert!(
            !out.contains("dex"),
            "Ichor's own earlier document is replaced whole"
        );
        let (_, merge) = replace_document("f", MAIN, "KubeAuthenticationConfig", AUTH_ICHOR, true).unwrap();
        assert_eq!(
            merge,
            Merge::Appended,
            "a node with no document has nothing to lose"
        );
    }

    #[test]
    fn a_separator_with_a_comment_still_separates() {
        let current = format!("{MAIN}--- # auth\n{AUTH_OLD}");
        let (out, merge) =
            replace_document("f", &current, "KubeAuthenticationConfig", AUTH_NEW, false).unwrap();
        assert_eq!(merge, Merge::Replaced);
        assert_eq!(out, format!("{MAIN}---\n{AUTH_NEW}"));
    }
}
