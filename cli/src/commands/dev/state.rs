//! The dev state directory: its layout, the private directories and the sample tree written on
//! the first run, and the first admin's generated password.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use ichor_issuer::oidc::passwords::{generate_password, hash_password_random};
use ichor_issuer::store::local::LocalStore;
use ichor_issuer::store::{Change, StoreError, UserStore, modify_credentials};
use ichor_renderers::auth::credentials::CredentialsEntry;
use ichor_renderers::trust::TLS_SECRET;

/// The first admin's user name.
pub const FIRST_ADMIN: &str = "admin";

const SAMPLE_ADMIN: &str = "\
# The first admin of `ichor dev`. Edit or add IchorUser files in this directory: changes take
# effect within seconds. (Passwords are not kept here: they live in the state directory.)
apiVersion: ichor.maesh.dev/v1alpha1
kind: IchorUser
metadata:
  name: admin
spec:
  displayName: First admin
  roles: [admin]
";

/// The files and directories of a dev state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The state directory.
    pub root: PathBuf,
    /// The GitOps tree.
    pub manifests: PathBuf,
    /// Produced Secrets, `<name>/<key>`.
    pub secrets: PathBuf,
    /// The issuer's local store state (credentials).
    pub issuer: PathBuf,
}

impl Layout {
    /// The layout under `root`.
    pub fn new(root: &Path) -> Self {
        Layout {
            root: root.to_owned(),
            manifests: root.join("manifests"),
            secrets: root.join("secrets"),
            issuer: root.join("issuer"),
        }
    }

    /// The CA certificate clients trust.
    pub fn ca_file(&self) -> PathBuf {
        self.secrets.join(TLS_SECRET).join("ca.crt")
    }
}

pub(super) fn default_state_dir() -> anyhow::Result<PathBuf> {
    let home = std::env::var_os("HOME").context("HOME is not set: give --state-dir")?;
    Ok(PathBuf::from(home).join(".ichor").join("dev"))
}

fn private_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("cannot make {} private (0700)", dir.display()))
}

/// Creates the state directories and, when the tree does not exist yet, the sample tree with
/// the first admin. Returns whether the tree was created.
///
/// # Errors
/// The file system refused.
pub fn prepare(layout: &Layout) -> anyhow::Result<bool> {
    private_dir(&layout.root)?;
    private_dir(&layout.secrets)?;
    private_dir(&layout.issuer)?;
    if layout.manifests.exists() {
        return Ok(false);
    }
    let users = layout.manifests.join("users");
    std::fs::create_dir_all(&users).with_context(|| format!("cannot create {}", users.display()))?;
    let file = users.join(format!("{FIRST_ADMIN}.yaml"));
    std::fs::write(&file, SAMPLE_ADMIN).with_context(|| format!("cannot write {}", file.display()))?;
    Ok(true)
}

/// Gives the first admin a generated password (`mustChange`) when the credentials store holds
/// no entry at all; returns the password to print once.
pub(super) async fn bootstrap_admin(store: &LocalStore) -> anyhow::Result<Option<String>> {
    let users = store.list_users().await.context("cannot read the users")?;
    if !users.iter().any(|u| u.name == FIRST_ADMIN) {
        return Ok(None);
    }
    for u in &users {
        if store
            .read_credentials(&u.name)
            .await
            .context("cannot read the credentials")?
            .0
            .is_some()
        {
            return Ok(None);
        }
    }
    let password = generate_password().context("cannot generate a password")?;
    let hash = tokio::task::block_in_place(|| hash_password_random(&password))
        .context("cannot hash the generated password")?;
    let entry = CredentialsEntry::new(hash, jiff::Timestamp::now(), true);
    modify_credentials(store, FIRST_ADMIN, |current| {
        Ok::<_, StoreError>(match current {
            Some(_) => Change::Keep(false),
            None => Change::Put(entry.clone(), true),
        })
    })
    .await
    .map(|written| written.then(|| password.expose().to_owned()))
    .context("cannot store the first admin's credentials")
}
