//! The Secret `<cluster>-talosconfig` in `ichor-system`: the Talos credentials the controller's
//! rollout reads (key `talosconfig`, an `os:admin` talosconfig of the cluster; key `ca.crt`, the
//! cluster's Kubernetes CA, which verifies each `/readyz`). `ichor init` creates it from
//! `--talosconfig FILE --kube-ca FILE` when it is missing, else prints the `ichor init` command
//! that does ([`create_command`]). Both files are checked before anything is written, and
//! neither's content ever reaches an error or the terminal. Of the talosconfig only the
//! cluster's own context is stored (`choose_context`), of the CA file only its `CERTIFICATE`
//! blocks: a talosctl config file commonly holds the `os:admin` keys of every cluster its owner
//! manages, which is why the printed fallback is not `kubectl create secret --from-file`.

use std::path::{Path, PathBuf};

use ichor_controller_core::identity::rollout::{KUBE_CA_KEY, TALOS_CREDENTIALS_SUFFIX, TALOSCONFIG_KEY};
use ichor_renderers::contract::{PART_OF_LABEL, PART_OF_VALUE};
use ichor_renderers::{crd::NAMESPACE, trust::tls::CertFacts};
use ichor_talos::talosconfig::{self, TalosConfigError};
use k8s_openapi::{ByteString, api::core::v1::Secret};

use super::InitError;

/// The largest file read for either key (a real one is a few kilobytes).
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// What an unparsable talosconfig is called (the YAML parser's own message may quote the file).
const NOT_A_TALOSCONFIG: &str =
    "not a talosconfig (YAML with `context` and `contexts`, as talosctl writes it)";

/// How many of a file's context names an error lists, and how much of each.
const MAX_LISTED_CONTEXTS: usize = 20;
const MAX_LISTED_NAME: usize = 64;

/// The name of cluster `cluster`'s Talos credentials Secret.
pub fn secret_name(cluster: &str) -> String {
    format!("{cluster}{TALOS_CREDENTIALS_SUFFIX}")
}

/// The `ichor init` command that creates the Secret from a talosconfig in `./talosconfig` and the
/// Kubernetes CA in `./kube-ca.crt` (the file names the chart's README uses), for the issuer at
/// `ui_url` (the release's; `None`, or a URL with characters a shell would read, gives the
/// placeholder `URL`). Not `kubectl create secret --from-file`, which would store the whole
/// talosconfig: init keeps only the cluster's context and the CA file's certificates.
pub fn create_command(cluster: &str, ui_url: Option<&str>) -> String {
    let url = ui_url
        .filter(|u| {
            !u.is_empty()
                && u.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._~:/%".contains(&b))
        })
        .unwrap_or("URL");
    format!(
        "ichor init --ui-url {url} --cluster {cluster} --talosconfig ./talosconfig --kube-ca ./kube-ca.crt"
    )
}

/// The two checked files, ready to be written. `Debug` shows the paths only.
#[derive(Clone)]
pub struct TalosCredentials {
    talosconfig_path: PathBuf,
    kube_ca_path: PathBuf,
    talosconfig: Vec<u8>,
    kube_ca: Vec<u8>,
}

impl std::fmt::Debug for TalosCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TalosCredentials")
            .field("talosconfig", &self.talosconfig_path)
            .field("kube_ca", &self.kube_ca_path)
            .finish_non_exhaustive()
    }
}

impl PartialEq for TalosCredentials {
    fn eq(&self, other: &Self) -> bool {
        self.talosconfig == other.talosconfig && self.kube_ca == other.kube_ca
    }
}

impl Eq for TalosCredentials {}

fn read_bounded(flag: &'static str, path: &Path) -> Result<Vec<u8>, InitError> {
    use std::io::Read as _;
    let bad = |reason: String| InitError::CredentialsFile {
        flag,
        path: path.display().to_string(),
        reason,
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| bad(format!("cannot read it ({e})")))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(bad(format!("larger than {MAX_FILE_BYTES} bytes")));
    }
    Ok(bytes)
}

/// The talosconfig `text` with `context` as its only context (and the selected one): what the
/// Secret holds. Every field of that context is kept as written.
fn only_context(text: &str, context: &str) -> Result<Vec<u8>, String> {
    let config: serde_yaml::Value = serde_yaml::from_str(text)
        .map_err(|_| "not a talosconfig (YAML with `context` and `contexts`)".to_owned())?;
    let entry = config
        .get("contexts")
        .and_then(|c| c.get(context))
        .cloned()
        .ok_or_else(|| format!("no context {context:?} under `contexts`"))?;
    let mut contexts = serde_yaml::Mapping::new();
    contexts.insert(context.into(), entry);
    let mut only = serde_yaml::Mapping::new();
    only.insert("context".into(), context.into());
    only.insert("contexts".into(), contexts.into());
    serde_yaml::to_string(&only)
        .map(String::into_bytes)
        .map_err(|_| "its context cannot be written back as YAML".to_owned())
}

/// Which context of the talosconfig `text` holds cluster `cluster`'s credentials: `wanted`
/// (`--talos-context`) when given; else the context named like the cluster; else the file's
/// current context, only when its name is the cluster's. Anything else is refused: the current
/// context of a file that serves several clusters may well be another cluster's, and its
/// `os:admin` keys do not belong in this cluster's Secret.
fn choose_context(text: &str, cluster: &str, wanted: Option<&str>) -> Result<String, String> {
    match wanted {
        Some("") => return Err("--talos-context is empty: name a context of the file".to_owned()),
        Some(name) => return Ok(name.to_owned()),
        None => {}
    }
    let config: serde_yaml::Value = serde_yaml::from_str(text).map_err(|_| NOT_A_TALOSCONFIG.to_owned())?;
    let names: Vec<&str> = config
        .get("contexts")
        .and_then(serde_yaml::Value::as_mapping)
        .map(|m| m.keys().filter_map(serde_yaml::Value::as_str).collect())
        .unwrap_or_default();
    let current = config
        .get("context")
        .and_then(serde_yaml::Value::as_str)
        .unwrap_or("");
    if names.contains(&cluster) || current == cluster {
        return Ok(cluster.to_owned());
    }
    let shown = |name: &str| format!("{:?}", name.chars().take(MAX_LISTED_NAME).collect::<String>());
    let mut listed: Vec<String> = names
        .iter()
        .copied()
        .take(MAX_LISTED_CONTEXTS)
        .map(shown)
        .collect();
    if names.len() > MAX_LISTED_CONTEXTS {
        listed.push(format!("and {} more", names.len() - MAX_LISTED_CONTEXTS));
    }
    let listed = if listed.is_empty() {
        "none".to_owned()
    } else {
        listed.join(", ")
    };
    Err(format!(
        "it has no context named {cluster:?} and its current context is {}, not {cluster:?} (its \
         contexts: {listed}); pass --talos-context NAME with the context of cluster {cluster}, so that \
         no other cluster's credentials are stored",
        shown(current)
    ))
}

/// Whether `label` is a PEM label as RFC 7468 writes them (upper-case letters, digits and
/// spaces, on one line): only such a label is quoted in an error, since the text after a
/// malformed `-----BEGIN ` may run on into the file's content, such as a key.
fn is_pem_label(label: &str) -> bool {
    (1..=40).contains(&label.len())
        && label
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b' ')
}

/// The `CERTIFICATE` blocks of `pem`, and nothing else: a CA file that also holds a key is
/// refused rather than stored (the key must not reach the cluster).
fn only_certificates(pem: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = pem;
    let mut found = 0;
    while let Some(begin) = rest.find("-----BEGIN ") {
        let label_end = rest[begin + 11..]
            .find("-----")
            .ok_or_else(|| "a PEM header is not closed".to_owned())?;
        let label = &rest[begin + 11..begin + 11 + label_end];
        if !is_pem_label(label) {
            return Err("a PEM header is malformed".to_owned());
        }
        let end_marker = format!("-----END {label}-----");
        let end = rest[begin..]
            .find(&end_marker)
            .ok_or_else(|| format!("the {label} block has no end line"))?;
        if label != "CERTIFICATE" {
            return Err(format!(
                "it holds a {label} block: give the CA certificate(s) only"
            ));
        }
        out.push_str(&rest[begin..begin + end + end_marker.len()]);
        out.push('\n');
        found += 1;
        rest = &rest[begin + end + end_marker.len()..];
    }
    if found == 0 {
        return Err("no CERTIFICATE block".to_owned());
    }
    Ok(out)
}

impl TalosCredentials {
    /// Reads and checks both files: the talosconfig must hold cluster `cluster`'s context
    /// (`context`, `--talos-context`, else as `choose_context` finds it) with a CA, a client
    /// certificate and key (as the controller reads it); the CA must be a PEM X.509
    /// certificate.
    ///
    /// # Errors
    /// [`InitError::CredentialsFile`] naming the flag, the file and what is wrong.
    pub fn load(
        talosconfig_path: &Path,
        kube_ca_path: &Path,
        cluster: &str,
        context: Option<&str>,
    ) -> Result<Self, InitError> {
        let talosconfig = read_bounded("--talosconfig", talosconfig_path)?;
        let bad_config = |reason: String| InitError::CredentialsFile {
            flag: "--talosconfig",
            path: talosconfig_path.display().to_string(),
            reason,
        };
        let text = std::str::from_utf8(&talosconfig).map_err(|_| bad_config("not UTF-8 text".to_owned()))?;
        let shown = talosconfig_path.display().to_string();
        let chosen = choose_context(text, cluster, context).map_err(bad_config)?;
        let context = talosconfig::parse(text, &shown, Some(&chosen)).map_err(|e| {
            bad_config(match e {
                // The YAML parser may quote a scalar of the file: say only what is expected.
                TalosConfigError::Yaml { .. } => NOT_A_TALOSCONFIG.to_owned(),
                other => {
                    let text = other.to_string();
                    let prefix = format!("talosconfig {shown}: ");
                    text.strip_prefix(&prefix).unwrap_or(&text).to_owned()
                }
            })
        })?;
        // Only the context the controller uses goes into the cluster: a talosctl config file
        // commonly holds the os:admin keys of every cluster its owner manages.
        let talosconfig = only_context(text, &context.name).map_err(bad_config)?;
        let kube_ca = read_bounded("--kube-ca", kube_ca_path)?;
        let bad_ca = |reason: String| InitError::CredentialsFile {
            flag: "--kube-ca",
            path: kube_ca_path.display().to_string(),
            reason,
        };
        let pem = std::str::from_utf8(&kube_ca).map_err(|_| bad_ca("not PEM text".to_owned()))?;
        let kube_ca = only_certificates(pem).map_err(bad_ca)?;
        CertFacts::from_pem(&kube_ca, "the file").map_err(|e| bad_ca(e.to_string()))?;
        let kube_ca = kube_ca.into_bytes();
        Ok(Self {
            talosconfig_path: talosconfig_path.to_path_buf(),
            kube_ca_path: kube_ca_path.to_path_buf(),
            talosconfig,
            kube_ca,
        })
    }

    /// The Secret `<cluster>-talosconfig` of `ichor-system` with both keys.
    pub fn secret(&self, cluster: &str) -> Secret {
        let mut secret = Secret {
            type_: Some("Opaque".to_owned()),
            data: Some(
                [
                    (TALOSCONFIG_KEY.to_owned(), ByteString(self.talosconfig.clone())),
                    (KUBE_CA_KEY.to_owned(), ByteString(self.kube_ca.clone())),
                ]
                .into(),
            ),
            ..Secret::default()
        };
        secret.metadata.name = Some(secret_name(cluster));
        secret.metadata.namespace = Some(NAMESPACE.to_owned());
        secret.metadata.labels = Some([(PART_OF_LABEL.to_owned(), PART_OF_VALUE.to_owned())].into());
        secret
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_printed_command_is_init_which_keeps_one_context_never_a_whole_file_upload() {
        assert_eq!(
            create_command("prod", Some("https://ichor.example.com")),
            "ichor init --ui-url https://ichor.example.com --cluster prod \
             --talosconfig ./talosconfig --kube-ca ./kube-ca.crt"
        );
        // A URL a shell would read more into is not printed as a command.
        for odd in [
            None,
            Some(""),
            Some("https://x.example/$(id)"),
            Some("https://x.example/a;b"),
        ] {
            assert_eq!(
                create_command("prod", odd),
                "ichor init --ui-url URL --cluster prod --talosconfig ./talosconfig --kube-ca ./kube-ca.crt"
            );
        }
        assert!(!create_command("prod", None).contains("kubectl"));
    }

    #[test]
    fn an_unusable_file_is_named_and_its_content_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("talosconfig");
        let ca = dir.path().join("ca.crt");
        std::fs::write(&config, "context: [not-a-secret-value-xyz\n").unwrap();
        std::fs::write(
            &ca,
            "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let e = TalosCredentials::load(&config, &ca, "prod", None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--talosconfig "), "{e}");
        assert!(e.contains("not a talosconfig"), "{e}");
        assert!(!e.contains("xyz"), "{e}");
        let missing = TalosCredentials::load(&dir.path().join("nope"), &ca, "prod", None)
            .unwrap_err()
            .to_string();
        assert!(missing.contains("cannot read it"), "{missing}");
    }

    fn b64(pem: &str) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(pem)
    }

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n";

    /// One context entry of a talosconfig, its key `KEY` with `marker` appended (so that each
    /// context's key can be told apart).
    fn context_entry(name: &str, marker: &str) -> String {
        format!(
            "  {name}:\n    endpoints: [10.0.0.1]\n    ca: {}\n    crt: {}\n    key: {}\n",
            b64(CERT),
            b64(CERT),
            b64(&format!("{KEY}{marker}"))
        )
    }

    /// A talosconfig whose current context is `current`, holding `names`, and a Kubernetes CA,
    /// written to a temporary directory.
    fn files(current: &str, names: &[&str]) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("talosconfig");
        let contexts: String = names.iter().map(|n| context_entry(n, n)).collect();
        std::fs::write(&config, format!("context: {current}\ncontexts:\n{contexts}")).unwrap();
        let ca = rcgen::generate_simple_self_signed(vec!["kubernetes".to_owned()]).unwrap();
        let ca_file = dir.path().join("ca.crt");
        std::fs::write(&ca_file, ca.cert.pem()).unwrap();
        (dir, config, ca_file)
    }

    /// The context names of a stored talosconfig, and its `context`.
    fn stored_contexts(loaded: &TalosCredentials) -> (String, Vec<String>) {
        let stored: serde_yaml::Value = serde_yaml::from_slice(&loaded.talosconfig).unwrap();
        let names = stored["contexts"]
            .as_mapping()
            .unwrap()
            .keys()
            .map(|k| k.as_str().unwrap().to_owned())
            .collect();
        (stored["context"].as_str().unwrap().to_owned(), names)
    }

    #[test]
    fn another_cluster_s_current_context_is_refused_naming_the_contexts_and_the_flag() {
        let (_dir, config, ca) = files("staging", &["staging", "dev"]);
        let e = TalosCredentials::load(&config, &ca, "prod", None).unwrap_err();
        assert!(
            matches!(
                e,
                InitError::CredentialsFile {
                    flag: "--talosconfig",
                    ..
                }
            ),
            "{e}"
        );
        let e = e.to_string();
        for expected in [
            "no context named \"prod\"",
            "current context is \"staging\", not \"prod\"",
            "\"staging\", \"dev\"",
            "pass --talos-context NAME",
            "nothing was written",
        ] {
            assert!(e.contains(expected), "{expected:?} not in: {e}");
        }
        assert!(!e.contains(&b64(CERT)), "{e}");
    }

    #[test]
    fn the_context_named_like_the_cluster_is_chosen_over_the_current_one() {
        let (_dir, config, ca) = files("staging", &["staging", "prod"]);
        let loaded = TalosCredentials::load(&config, &ca, "prod", None).unwrap();
        assert_eq!(
            stored_contexts(&loaded),
            ("prod".to_owned(), vec!["prod".to_owned()])
        );
        let stored: serde_yaml::Value = serde_yaml::from_slice(&loaded.talosconfig).unwrap();
        assert_eq!(
            stored["contexts"]["prod"]["key"],
            b64(&format!("{KEY}prod")).as_str(),
            "prod's own key, not staging's"
        );
        // The current context alone, named like the cluster, is taken too.
        let (_dir, config, ca) = files("prod", &["prod"]);
        let loaded = TalosCredentials::load(&config, &ca, "prod", None).unwrap();
        assert_eq!(stored_contexts(&loaded).0, "prod");
    }

    #[test]
    fn the_talos_context_flag_is_honoured_and_an_unknown_one_refused() {
        let (_dir, config, ca) = files("dev", &["dev", "staging"]);
        let loaded = TalosCredentials::load(&config, &ca, "prod", Some("staging")).unwrap();
        assert_eq!(
            stored_contexts(&loaded),
            ("staging".to_owned(), vec!["staging".to_owned()])
        );
        let e = TalosCredentials::load(&config, &ca, "prod", Some("nope"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("context \"nope\" is not in `contexts`"), "{e}");
        let e = TalosCredentials::load(&config, &ca, "prod", Some(""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--talos-context is empty"), "{e}");
    }

    #[test]
    fn a_malformed_pem_header_is_refused_without_quoting_what_follows_it() {
        let body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7";
        let pem = format!("-----BEGIN PRIVATE KEY\n{body}\n-----END PRIVATE KEY-----\n");
        let e = only_certificates(&pem).unwrap_err();
        assert_eq!(e, "a PEM header is malformed");
        let (dir, config, _) = files("prod", &["prod"]);
        let ca = dir.path().join("bad.crt");
        std::fs::write(&ca, &pem).unwrap();
        let e = TalosCredentials::load(&config, &ca, "prod", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("a PEM header is malformed"), "{e}");
        assert!(!e.contains(&body[..20]), "{e}");
        // A well-formed label is still named.
        let e = only_certificates(KEY).unwrap_err();
        assert!(e.contains("PRIVATE KEY block"), "{e}");
        assert!(is_pem_label("CERTIFICATE") && !is_pem_label("") && !is_pem_label("A\nB"));
        assert!(!is_pem_label(&"A".repeat(41)) && !is_pem_label("private key"));
    }

    #[test]
    fn only_the_selected_context_and_the_ca_certificates_reach_the_secret() {
        let (cert, key) = (CERT, KEY);
        let context = |name: &str| {
            format!(
                "  {name}:\n    endpoints: [10.0.0.1]\n    ca: {}\n    crt: {}\n    key: {}\n",
                b64(cert),
                b64(cert),
                b64(key)
            )
        };
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("talosconfig");
        std::fs::write(
            &config,
            format!(
                "context: prod\ncontexts:\n{}{}",
                context("prod"),
                context("staging")
            ),
        )
        .unwrap();
        let ca = rcgen::generate_simple_self_signed(vec!["kubernetes".to_owned()]).unwrap();
        let ca_file = dir.path().join("ca.crt");
        std::fs::write(&ca_file, ca.cert.pem()).unwrap();
        let loaded = TalosCredentials::load(&config, &ca_file, "prod", None).unwrap();
        let stored: serde_yaml::Value = serde_yaml::from_slice(&loaded.talosconfig).unwrap();
        assert_eq!(stored["context"], "prod");
        let names: Vec<_> = stored["contexts"]
            .as_mapping()
            .unwrap()
            .keys()
            .map(|k| k.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            names,
            ["prod"],
            "the other cluster's keys stay on the workstation"
        );
        assert_eq!(stored["contexts"]["prod"]["key"], b64(key).as_str());
        assert_eq!(String::from_utf8(loaded.kube_ca.clone()).unwrap(), ca.cert.pem());

        // A CA file that also holds the CA's key is refused, naming the block, not showing it.
        std::fs::write(
            &ca_file,
            format!("{}{}", ca.cert.pem(), ca.signing_key.serialize_pem()),
        )
        .unwrap();
        let e = TalosCredentials::load(&config, &ca_file, "prod", None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--kube-ca "), "{e}");
        assert!(e.contains("PRIVATE KEY block"), "{e}");
        assert!(!e.contains(&ca.signing_key.serialize_pem()[30..60]), "{e}");
    }
}
