//! The issuer on a real control plane (`ichor_testkit::control_plane`), Ichor installed from its
//! chart (the webhook configuration removed: no controller serves it here, so RBAC alone decides
//! the writes), every request authenticated with a TokenRequest token of the chart's issuer
//! ServiceAccount:
//! - [`store`]: the Kubernetes store's credentials writes on the real Secret — one key per write,
//!   the apiserver's own 409 and 422 answers as conflicts, concurrent writers losing nothing;
//! - [`full_secret`]: the Secret filled to the apiserver's 1 MiB limit — growing writes refused
//!   as a full store with nothing written, shrinking ones (alone or grouped with a refused one)
//!   landing, and the size gauge;
//! - [`rotation`]: two in-process issuers, each with its own store, racing refresh rotations of
//!   one family, and the `UserService` backend writing `IchorUser`s as the caller;
//! - [`busy_user`]: one user's many sessions refreshing at once through one issuer's store, waiting
//!   in the user's line for the real Secret: no 503, each rotation committed once;
//! - [`processes`]: two `ichor-issuer --store kube` processes as the chart runs them, with sign-ins,
//!   the runtime settings of `IchorInstallation`, `RevokeSessions`, a password change and the
//!   `UserService` — and the chart's issuer RBAC exactly what they use;
//! - [`nothing_stored`]: one such process walked from the authorization request to a failed
//!   sign-in writes nothing: reads only in the audit log, no file, no cookie.
//!
//! Every test is `#[ignore = "needs the control plane: hack/kube/build.sh"]`: `cargo nextest run
//! --run-ignored all` (as `hack/test.sh` runs it) runs them, and fails one whose binaries are
//! missing with the command that builds them.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod attacks;
mod busy_user;
mod external;
mod full_secret;
mod nothing_stored;
mod prerequisites;
mod processes;
mod rotation;
mod second_factor;
mod store;
mod store_kube_per_user;

use base64::Engine as _;
use ichor_renderers::auth::credentials::{CREDENTIALS_SECRET_NAME, CredentialsEntry};
use ichor_testkit::control_plane::{ControlPlane, Options};
use ichor_testkit::install::{self, NAMESPACE};
use serde_json::{Value, json};

/// A multi-threaded runtime of `workers` threads for a test's async part (the plane's own calls
/// block, so they stay outside it).
fn runtime(workers: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?)
}

/// A credentials entry with the password of the conformance tests' issuer
/// ([`crate::conformance_common::password_hash`]), valid since an hour ago.
fn password_entry() -> CredentialsEntry {
    CredentialsEntry::new(
        crate::conformance_common::password_hash(),
        jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1),
        false,
    )
}

/// A control plane with an audit log and Ichor installed, the `IchorUser`s `users` (name and
/// role) applied, and the legacy credentials Secret holding `entries`; `None` only when the
/// binaries are missing under `ICHOR_REQUIRE_CONSUMERS=0` (otherwise that fails the test).
fn cluster(
    users: &[(&str, &str)],
    entries: &[(&str, &CredentialsEntry)],
) -> anyhow::Result<Option<ControlPlane>> {
    let Some(plane) = fresh_cluster(users)? else {
        return Ok(None);
    };
    let mut data = serde_json::Map::new();
    for (name, entry) in entries {
        data.insert(
            (*name).to_owned(),
            json!(base64::engine::general_purpose::STANDARD.encode(entry.to_json(name)?)),
        );
    }
    plane.apply(
        &json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": CREDENTIALS_SECRET_NAME, "namespace": NAMESPACE}, "data": data})
        .to_string(),
    )?;
    Ok(Some(plane))
}

/// A control plane with an audit log and Ichor installed as a fresh installation has it: the
/// `IchorUser`s `users` applied, the namespace of the per-user credentials Secrets (made before
/// the chart, as `ichor init` makes it) and no legacy credentials Secret.
fn fresh_cluster(users: &[(&str, &str)]) -> anyhow::Result<Option<ControlPlane>> {
    let Some(plane) = ControlPlane::start(Options {
        audit: true,
        ..Options::default()
    })?
    else {
        return Ok(None);
    };
    install::install(&plane)?;
    plane.kubectl_run(
        &["delete", "validatingwebhookconfiguration", "ichor-identity"],
        None,
    )?;
    for (name, role) in users {
        plane.apply(
            &json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
                "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"roles": [role]}})
            .to_string(),
        )?;
    }
    Ok(Some(plane))
}

/// [`fresh_cluster`] with `entries` in their users' own Secrets, written as the admin (as `ichor
/// init` writes the first administrator's).
fn per_user_cluster(
    users: &[(&str, &str)],
    entries: &[(&str, &CredentialsEntry)],
) -> anyhow::Result<Option<ControlPlane>> {
    use ichor_renderers::contract;
    let Some(plane) = fresh_cluster(users)? else {
        return Ok(None);
    };
    for (name, entry) in entries {
        plane.apply(
            &json!({"apiVersion": "v1", "kind": "Secret", "type": contract::USER_CREDENTIALS_TYPE,
                "metadata": {"name": contract::user_credentials_secret(name),
                    "namespace": contract::CREDENTIALS_NAMESPACE,
                    "labels": {contract::USER_LABEL: name}},
                "data": {contract::USER_CREDENTIALS_KEY:
                    base64::engine::general_purpose::STANDARD.encode(entry.to_json(name)?)}})
            .to_string(),
        )?;
    }
    Ok(Some(plane))
}

/// A Kubernetes client authenticated as the chart's issuer ServiceAccount.
async fn issuer_client(plane: &ControlPlane) -> anyhow::Result<kube::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let path = install::component_kubeconfig(plane, 0, install::ISSUER_SERVICE_ACCOUNT)?;
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&path)?,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    Ok(kube::Client::try_from(config)?)
}

/// The credentials entry of `user` as the apiserver holds it.
fn stored_entry(plane: &ControlPlane, user: &str) -> anyhow::Result<Option<CredentialsEntry>> {
    let secret = plane
        .get_json(0, "secret", NAMESPACE, CREDENTIALS_SECRET_NAME)?
        .ok_or_else(|| anyhow::anyhow!("no credentials Secret"))?;
    let Some(b64) = secret["data"][user].as_str() else {
        return Ok(None);
    };
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64)?;
    Ok(Some(CredentialsEntry::parse(user, &bytes)?))
}

/// The credentials entry of `user` in its own Secret as the apiserver holds it.
fn own_entry(plane: &ControlPlane, user: &str) -> anyhow::Result<Option<CredentialsEntry>> {
    let Some(secret) = plane.get_json(
        0,
        "secret",
        install::CREDENTIALS_NAMESPACE,
        &ichor_renderers::contract::user_credentials_secret(user),
    )?
    else {
        return Ok(None);
    };
    let b64 = secret["data"][ichor_renderers::contract::USER_CREDENTIALS_KEY]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("the Secret of {user} has no entry"))?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64)?;
    Ok(Some(CredentialsEntry::parse(user, &bytes)?))
}

/// The roles of IchorUser `name` as the apiserver holds it.
fn roles(plane: &ControlPlane, name: &str) -> anyhow::Result<Option<Value>> {
    Ok(plane
        .get_json(0, "ichoruser", NAMESPACE, name)?
        .map(|u| u["spec"]["roles"].clone()))
}

/// The refresh family the store tests rotate.
const FAMILY: &str = "fam1";

/// A user's entry with a password and one CLI family, [`FAMILY`], at generation 1.
fn family_entry() -> CredentialsEntry {
    let now: jiff::Timestamp = "2026-11-05T10:00:00Z".parse().unwrap();
    ichor_testkit::issuer::harness::cli_family_entry(
        "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$SECRETHASHVALUE",
        now,
        FAMILY,
        now,
    )
}

/// How many times [`bump`] asks again after a refresh's conflicts outlasted the store's retries.
const CLIENT_RETRIES: usize = 5;

/// Adds one to the generation of `user`'s [`FAMILY`] as a refresh does: through
/// `modify_credentials` (which retries conflicts from a fresh read), and, when the conflicts
/// outlast its retries (the issuer's 503, which wrote nothing), again a second later as the client
/// does with the same token, at most [`CLIENT_RETRIES`] times. Returns how many times it asked
/// again.
async fn bump(store: &ichor_issuer::store::kube::KubeStore, user: &str) -> anyhow::Result<usize> {
    use ichor_issuer::store::{Change, StoreError, modify_credentials};
    for retries in 0..=CLIENT_RETRIES {
        if retries > 0 {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
        let rotated = modify_credentials(store, user, |current| {
            let mut next = current.cloned().ok_or(StoreError::Missing(user.to_owned()))?;
            next.families.get_mut(FAMILY).unwrap().generation += 1;
            Ok::<_, StoreError>(Change::Put(next, ()))
        })
        .await;
        match rotated {
            Err(StoreError::Conflict(_)) => {}
            other => return other.map(|()| retries).map_err(Into::into),
        }
    }
    anyhow::bail!("every refresh of {user} conflicted, asked {CLIENT_RETRIES} more times")
}

/// The `refresh_token` of a token response.
fn refresh_of(v: &Value) -> String {
    v["refresh_token"].as_str().expect("refresh_token").to_owned()
}
