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
        talosconfig::parse(text, &shown, None).map_err(|e| {
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
        let kube_ca = read_bounded("--kube-ca", kube_ca_path)?;
        let bad_ca = |reason: String| InitError::CredentialsFile {
            flag: "--kube-ca",
            path: kube_ca_path.display().to_string(),
            reason,
        };
        let pem = std::str::from_utf8(&kube_ca).map_err(|_| bad_ca("not PEM text".to_owned()))?;
        CertFacts::from_pem(pem, "the file").map_err(|e| bad_ca(e.to_string()))?;
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
}
