//! `ichor user create NAME --bootstrap`: the first user on an existing install, written with the
//! caller's OWN kubeconfig (no `UserService`, which needs a user to sign in as).
//!
//! # Guarantees
//! - Refuses an installation without Ichor users (neither the namespace `ichor-credentials`,
//!   which `ichor init` creates, nor the one credentials Secret of earlier releases exists), an
//!   existing `IchorUser` and existing credentials of that name, before anything is written.
//! - The password is hashed (argon2id, `ichor_renderers::auth::hash`) before any write; the
//!   entry says `mustChange: true`.
//! - Writes the `IchorUser`, then the entry through the issuer's store, conditionally on what
//!   it read (retried on a conflict); the store decides where the entry lives (the user's own
//!   Secret, or a key of the legacy Secret while an installation still uses it). If the entry
//!   cannot be written, the `IchorUser` is deleted again, so the command leaves neither behind.

use ichor_issuer::{
    oidc::passwords::hash_password_random,
    store::{StoreError, UserStore, Version, kube::KubeStore},
};
use ichor_renderers::{
    auth::{
        Password, UserName,
        credentials::{CREDENTIALS_SECRET_NAME, CredentialsEntry},
        policy::check_password,
        roles::validate_roles,
    },
    contract::{CREDENTIALS_NAMESPACE, USER_CREDENTIALS_PREFIX},
    crd::{IchorUser, IchorUserSpec, NAMESPACE},
};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DeleteParams, PostParams};

/// The field manager of the CLI's writes.
pub use ichor_renderers::contract::CLI_FIELD_MANAGER as FIELD_MANAGER;
/// How often a credentials write is retried after a conflict.
const MAX_CONFLICT_RETRIES: usize = 3;

/// The user a bootstrap creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewUser {
    /// The name (the identity `ichor:<name>`).
    pub name: String,
    /// The roles.
    pub roles: Vec<String>,
    /// Informational.
    pub display_name: Option<String>,
    /// Informational.
    pub email: Option<String>,
}

/// Why a bootstrap refused or failed. Never carries a password or a hash.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// The name, a role or the password is invalid.
    #[error("{0}")]
    Invalid(String),
    /// Neither the credentials namespace nor the legacy credentials Secret exists.
    #[error(
        "Ichor users are not installed here: Namespace {CREDENTIALS_NAMESPACE} does not exist (nor \
         Secret {NAMESPACE}/{CREDENTIALS_SECRET_NAME} of earlier releases); run `ichor init --ui-url <url> \
         --cluster <name>` first"
    )]
    NotInstalled,
    /// The user exists already.
    #[error(
        "IchorUser {NAMESPACE}/{0} exists already: --bootstrap only creates a first user; use \
         `ichor user set-password` as an administrator instead"
    )]
    UserExists(String),
    /// Credentials of that name are stored without a user.
    #[error(
        "credentials of {0:?} are stored already without an IchorUser (Secret \
         {CREDENTIALS_NAMESPACE}/{USER_CREDENTIALS_PREFIX}{0}, or the key {0:?} of Secret \
         {NAMESPACE}/{CREDENTIALS_SECRET_NAME} of earlier releases); remove them first or choose another name"
    )]
    EntryExists(String),
    /// The Kubernetes API refused or failed.
    #[error("{0}")]
    Kube(String),
    /// The entry write failed; the IchorUser was removed again (or could not be).
    #[error("{cause}; {cleanup}")]
    CredentialsWrite {
        /// Why the write failed.
        cause: String,
        /// What happened to the IchorUser.
        cleanup: String,
    },
}

/// A store error as one sentence. Whether users are installed at all was decided before
/// ([`check_installed`]), so a store that finds no credentials object says so in its own words.
fn store_error(e: StoreError) -> BootstrapError {
    BootstrapError::Kube(e.to_string())
}

fn kube_error(action: &str, name: &str, e: &kube::Error) -> BootstrapError {
    let reason = match e {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    };
    BootstrapError::Kube(format!("cannot {action} IchorUser {NAMESPACE}/{name}: {reason}"))
}

/// Checks a bootstrap's input (name, roles, password policy) without touching anything.
///
/// # Errors
/// [`BootstrapError::Invalid`] naming the field.
pub fn check_input(user: &NewUser, password: &Password) -> Result<(), BootstrapError> {
    UserName::parse(&user.name).map_err(|e| BootstrapError::Invalid(format!("NAME: {e}")))?;
    validate_roles(&user.roles).map_err(|e| BootstrapError::Invalid(format!("--role: {e}")))?;
    check_password(password).map_err(|e| BootstrapError::Invalid(e.to_string()))?;
    Ok(())
}

/// Creates `user` with `password` (must change at first sign-in) through `client`, the
/// caller's own Kubernetes credentials.
///
/// # Errors
/// See [`BootstrapError`]; every refusal happens before the first write.
pub async fn bootstrap_user(
    client: kube::Client,
    user: &NewUser,
    password: &Password,
    now: Timestamp,
) -> Result<(), BootstrapError> {
    check_input(user, password)?;
    let name = user.name.as_str();
    check_installed(&client).await?;
    let store = KubeStore::new(client.clone()).with_user_ttl(std::time::Duration::ZERO);
    let (entry, _) = store.read_credentials(name).await.map_err(store_error)?;
    let users: Api<IchorUser> = Api::namespaced(client, NAMESPACE);
    if users
        .get_opt(name)
        .await
        .map_err(|e| kube_error("read", name, &e))?
        .is_some()
    {
        return Err(BootstrapError::UserExists(name.to_owned()));
    }
    if entry.is_some() {
        return Err(BootstrapError::EntryExists(name.to_owned()));
    }
    let hash = hash_password_random(password).map_err(|e| BootstrapError::Invalid(e.to_string()))?;
    let entry = CredentialsEntry::new(hash, now, true);
    let mut object = IchorUser::new(
        name,
        IchorUserSpec {
            display_name: user.display_name.clone(),
            email: user.email.clone(),
            roles: user.roles.clone(),
            disabled: false,
        },
    );
    object.metadata.namespace = Some(NAMESPACE.to_owned());
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    match users.create(&params, &object).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {
            return Err(BootstrapError::UserExists(name.to_owned()));
        }
        Err(e) => return Err(kube_error("create", name, &e)),
    }
    if let Err(cause) = write_entry(&store, name, &entry).await {
        let cleanup = match users.delete(name, &DeleteParams::default()).await {
            Ok(_) => format!("IchorUser {NAMESPACE}/{name} was removed again, nothing is left behind"),
            Err(e) => format!(
                "IchorUser {NAMESPACE}/{name} could not be removed again ({}); delete it with kubectl",
                match &e {
                    kube::Error::Api(status) => status.message.clone(),
                    other => other.to_string(),
                }
            ),
        };
        return Err(BootstrapError::CredentialsWrite {
            cause: cause.to_string(),
            cleanup,
        });
    }
    Ok(())
}

/// Writes the entry with the Secret's current version; retries a conflict from a fresh read;
/// refuses when an entry of that name appeared in between.
async fn write_entry(
    store: &KubeStore,
    name: &str,
    entry: &CredentialsEntry,
) -> Result<Version, BootstrapError> {
    for _ in 0..=MAX_CONFLICT_RETRIES {
        let (current, version) = store.read_credentials(name).await.map_err(store_error)?;
        if current.is_some() {
            return Err(BootstrapError::EntryExists(name.to_owned()));
        }
        match store.write_credentials(name, &version, Some(entry)).await {
            Ok(version) => return Ok(version),
            Err(StoreError::Conflict(_)) => continue,
            Err(e) => return Err(store_error(e)),
        }
    }
    Err(BootstrapError::Kube(format!(
        "the stored credentials of {name:?} kept changing while they were written; run the command again"
    )))
}

/// Whether Ichor users are installed: the namespace `ichor init` creates for the per-user
/// credentials Secrets exists, or else (an installation of an earlier release, before `ichor
/// init` ran again) the one credentials Secret does. Only a 404 of both is "not installed";
/// any other answer is the error it is.
async fn check_installed(client: &kube::Client) -> Result<(), BootstrapError> {
    let unreadable = |what: String, e: kube::Error| {
        BootstrapError::Kube(format!(
            "cannot read {what}: {}",
            match e {
                kube::Error::Api(status) => status.message,
                other => other.to_string(),
            }
        ))
    };
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces
        .get_opt(CREDENTIALS_NAMESPACE)
        .await
        .map_err(|e| unreadable(format!("Namespace {CREDENTIALS_NAMESPACE}"), e))?
        .is_some()
    {
        return Ok(());
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    match secrets
        .get_metadata_opt(CREDENTIALS_SECRET_NAME)
        .await
        .map_err(|e| unreadable(format!("Secret {NAMESPACE}/{CREDENTIALS_SECRET_NAME}"), e))?
    {
        Some(_) => Ok(()),
        None => Err(BootstrapError::NotInstalled),
    }
}
