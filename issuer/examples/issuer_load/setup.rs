//! `setup --dir D --users N`: the files an issuer needs for the benchmark (test CA and leaf, the
//! controller's key timeline, the users and their credentials), written once before any load.

use crate::client::PASSWORD;
use anyhow::{Context as _, Result};
use ichor_renderers::{
    auth::{
        Password,
        credentials::{CredentialsEntry, Factors, TotpFactor},
        hash::hash_password,
    },
    trust::{
        HmacKey, KeyEffect, RsaKey, TimelineSettings,
        keys::{HmacSecret, PrivateKeyPem},
    },
};
use jiff::{SignedDuration, Timestamp};
use std::path::Path;

pub(crate) const RSA_PEM: &str = include_str!("../../tests/fixtures/rsa3072-1.pkcs8.pem");

/// The lifetime of the families `setup --families` seeds (the chart's default refresh lifetime).
const SEEDED_LIFETIME: SignedDuration = SignedDuration::from_hours(24);

/// The id of the `k`-th seeded family of user `i`: 22 characters, as long as a real one.
fn seeded_family_id(i: usize, k: usize) -> String {
    format!("seed{i:07}x{k:010}")
}

/// The authenticator app's secret of every user `setup --factors` gives one (160 bits, base32).
pub(crate) const TOTP_SECRET: &str = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP";

/// Writes the benchmark's files in `dir`: `users` users with `families` seeded families each,
/// the first `factors` of them with an authenticator app of [`TOTP_SECRET`].
pub(crate) fn setup(dir: &Path, users: usize, families: usize, factors: usize) -> Result<()> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let (tls, users_dir, state) = (dir.join("tls"), dir.join("users"), dir.join("state"));
    for d in [&tls, &users_dir, &state] {
        std::fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
    }
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "ichor bench CA");
    std::fs::write(dir.join("ca.crt"), ca.self_signed(&ca_key)?.pem())?;
    let issuer = Issuer::new(ca, ca_key);
    let leaf_key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])?;
    leaf.use_authority_key_identifier_extension = true;
    std::fs::write(tls.join("tls.crt"), leaf.signed_by(&leaf_key, &issuer)?.pem())?;
    std::fs::write(tls.join("tls.key"), leaf_key.serialize_pem())?;

    // keys.json as the controller's timeline makes it, one hour old.
    let at = Timestamp::now() - SignedDuration::from_hours(1);
    let settings = TimelineSettings::new(SignedDuration::from_mins(15), SignedDuration::from_hours(48))?;
    let plan = ichor_renderers::trust::plan(at, None, &settings);
    let mut doc = plan.apply_changes(None);
    for effect in &plan.effects {
        let k = effect.key();
        match effect {
            KeyEffect::GenerateRsa(_) => doc.insert_rsa(RsaKey::new(
                k.kid.clone(),
                PrivateKeyPem::new(RSA_PEM.to_owned())?,
                k.created_at,
                k.active_from,
                k.retire_after,
            )?)?,
            KeyEffect::GenerateHmac(_) => doc.insert_hmac(HmacKey::new(
                k.kid.clone(),
                HmacSecret::new(*b"bench hmac secret, 32 bytes long"),
                k.created_at,
                k.active_from,
                k.retire_after,
            )?)?,
        }
    }
    std::fs::write(dir.join("keys.json"), doc.to_json())?;

    let hash = hash_password(&Password::new(PASSWORD), &[9; 16])?;
    let mut entries = serde_json::Map::new();
    for i in 0..users {
        let name = format!("bench-{i}");
        std::fs::write(
            users_dir.join(format!("{name}.yaml")),
            format!(
                "apiVersion: ichor.maesh.dev/v1alpha1\nkind: IchorUser\nmetadata:\n  name: {name}\n  \
                 namespace: ichor-system\nspec:\n  roles: [viewer]\n"
            ),
        )?;
        let mut entry = CredentialsEntry::new(hash.clone(), at, false);
        if i < factors {
            entry.factors = Factors {
                totp: Some(TotpFactor {
                    secret: TOTP_SECRET.to_owned(),
                    created_at: at,
                    last_step: 0,
                }),
                ..Factors::default()
            };
        }
        for k in 0..families {
            entry = entry.start_family(
                &seeded_family_id(i, k),
                ichor_renderers::contract::CLI_CLIENT_ID,
                ichor_renderers::contract::KUBE_AUDIENCE,
                at,
                SEEDED_LIFETIME,
            )?;
        }
        entries.insert(name.clone(), serde_json::from_str(&entry.to_json(&name)?)?);
    }
    let credentials = serde_json::json!({"generation": 1, "entries": entries});
    std::fs::write(state.join("credentials.json"), credentials.to_string())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700))?;
    }
    println!(
        "setup: {users} users with {families} refresh families each ({factors} with an \
         authenticator app) in {}",
        dir.display()
    );
    Ok(())
}
