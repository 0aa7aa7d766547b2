//! The Secret `<cluster>-talosconfig` in `ichor-system`: the Talos credentials the controller's
//! rollout reads (key `talosconfig`, an `os:admin` talosconfig of the cluster; key `ca.crt`, the
//! cluster's Kubernetes CA, which verifies each `/readyz`). `ichor init` creates it from
//! `--talosconfig FILE --kube-ca FILE` when it is missing, else prints the exact command that
//! does ([`create_command`]). Both files are checked before anything is written, and neither's
//! content ever reaches an error or the terminal.

use std::path::{Path, PathBuf};

use ichor_reconcile::identity::rollout::{KUBE_CA_KEY, TALOS_CREDENTIALS_SUFFIX, TALOSCONFIG_KEY};
use ichor_renderers::{crd::NAMESPACE, trust::tls::CertFacts};
use ichor_talos::talosconfig::{self, TalosConfigError};
use k8s_openapi::{ByteString, api::core::v1::Secret};

use super::InitError;

/// The largest file read for either key (a real one is a few kilobytes).
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The name of cluster `cluster`'s Talos credentials Secret.
pub fn secret_name(cluster: &str) -> String {
    format!("{cluster}{TALOS_CREDENTIALS_SUFFIX}")
}

/// The `kubectl` command that creates the Secret from a talosconfig in `./talosconfig` and the
/// Kubernetes CA in `./kube-ca.crt` (the file names the chart's README uses).
pub fn create_command(cluster: &str) -> String {
    format!(
        "kubectl -n {NAMESPACE} create secret generic {} --from-file={TALOSCONFIG_KEY}=./talosconfig \
         --from-file={KUBE_CA_KEY}=./kube-ca.crt",
        secret_name(cluster)
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
    /// Reads and checks both files: the talosconfig must select a context with a CA, a client
    /// certificate and key (as the controller reads it); the CA must be a PEM X.509
    /// certificate.
    ///
    /// # Errors
    /// [`InitError::CredentialsFile`] naming the flag, the file and what is wrong.
    pub fn load(talosconfig_path: &Path, kube_ca_path: &Path) -> Result<Self, InitError> {
        let talosconfig = read_bounded("--talosconfig", talosconfig_path)?;
        let bad_config = |reason: String| InitError::CredentialsFile {
            flag: "--talosconfig",
            path: talosconfig_path.display().to_string(),
            reason,
        };
        let text = std::str::from_utf8(&talosconfig).map_err(|_| bad_config("not UTF-8 text".to_owned()))?;
        let shown = talosconfig_path.display().to_string();
        let context = talosconfig::parse(text, &shown, None).map_err(|e| {
            bad_config(match e {
                // The YAML parser may quote a scalar of the file: say only what is expected.
                TalosConfigError::Yaml { .. } => {
                    "not a talosconfig (YAML with `context` and `contexts`, as talosctl writes it)".to_owned()
                }
                TalosConfigError::NoContext { .. } => {
                    "`context` is empty: the controller uses the file's own context; set it with \
                     `talosctl config context NAME`"
                        .to_owned()
                }
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
        secret.metadata.labels = Some([("app.kubernetes.io/part-of".to_owned(), "ichor".to_owned())].into());
        secret
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_command_names_the_secret_and_both_keys() {
        assert_eq!(
            create_command("prod"),
            "kubectl -n ichor-system create secret generic prod-talosconfig \
             --from-file=talosconfig=./talosconfig --from-file=ca.crt=./kube-ca.crt"
        );
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
        let e = TalosCredentials::load(&config, &ca).unwrap_err().to_string();
        assert!(e.starts_with("--talosconfig "), "{e}");
        assert!(e.contains("not a talosconfig"), "{e}");
        assert!(!e.contains("xyz"), "{e}");
        let missing = TalosCredentials::load(&dir.path().join("nope"), &ca)
            .unwrap_err()
            .to_string();
        assert!(missing.contains("cannot read it"), "{missing}");
    }

    fn b64(pem: &str) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(pem)
    }

    #[test]
    fn only_the_selected_context_and_the_ca_certificates_reach_the_secret() {
        let cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let key = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n";
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
        let loaded = TalosCredentials::load(&config, &ca_file).unwrap();
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
        let e = TalosCredentials::load(&config, &ca_file).unwrap_err().to_string();
        assert!(e.starts_with("--kube-ca "), "{e}");
        assert!(e.contains("PRIVATE KEY block"), "{e}");
        assert!(!e.contains(&ca.signing_key.serialize_pem()[30..60]), "{e}");
    }
}
