//! The WebAuthn relying party (docs/mfa.md): Ichor's issuer as the site passkeys are made for.
//!
//! Every WebAuthn check — the challenge, the origin, the relying-party id hash, the signature,
//! user verification, the signature counter — is `webauthn-rs`'s (the Kanidm project's audited
//! library); nothing of the ceremony is verified by hand here. What this module adds is the
//! shape of a stateless issuer: the ceremony's state (`PasskeyRegistration`,
//! `PasskeyAuthentication`) travels inside a ticket the issuer signs, which is what the crate's
//! `danger-allow-state-serialisation` feature is for; the ticket cannot be altered, expires, and
//! is spent by the entry write that records the use (docs/mfa.md, "the sign-in").
//!
//! The relying-party id is the issuer URL's host and the only origin its own origin, so a
//! passkey made here answers nothing on another site: it cannot be phished. An issuer whose URL
//! names an IP address has no relying party (WebAuthn ids are domain names) and offers the
//! typed factors only.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ichor_renderers::auth::credentials::{
    FactorRefusal, MAX_CREDENTIAL_ID_BYTES, PasskeyRefusal, StoredPasskey, VerifiedPasskey,
};
use jiff::Timestamp;
use serde_json::Value;
use sha2::{Digest, Sha256};
use webauthn_rs::prelude::{
    CreationChallengeResponse, Passkey, PasskeyAuthentication, PasskeyRegistration, PublicKeyCredential,
    RegisterPublicKeyCredential, RequestChallengeResponse, Url, Uuid, Webauthn, WebauthnBuilder,
    WebauthnError,
};

/// The name authenticators show for the site.
pub const RP_NAME: &str = "Ichor";
/// The largest browser answer read (a registration with attestation stays well below).
pub const MAX_CREDENTIAL_JSON_BYTES: usize = 16 * 1024;

/// Why a passkey registration was refused, in words the user can act on.
#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    /// The browser's answer is not a WebAuthn registration response.
    #[error("credential is not a passkey registration response from the browser: {0}")]
    Malformed(String),
    /// The answer does not verify against the ceremony this issuer started.
    #[error(
        "the passkey could not be verified for this site: {0}; start again, and make sure user verification (a PIN or biometrics) is on"
    )]
    Refused(String),
    /// The verified passkey cannot be stored.
    #[error("the passkey cannot be stored: {0}")]
    Unstorable(String),
}

/// The relying party of one issuer URL.
pub struct RelyingParty {
    webauthn: Webauthn,
}

impl std::fmt::Debug for RelyingParty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelyingParty").finish_non_exhaustive()
    }
}

impl RelyingParty {
    /// The relying party of `issuer_url` (an `https` URL), or `None` when its host is not a
    /// domain name (an IP address): WebAuthn has no relying-party id for those.
    pub fn for_issuer(issuer_url: &str) -> Option<Self> {
        let origin = Url::parse(issuer_url).ok()?;
        let host = origin.domain()?.to_owned();
        let webauthn = WebauthnBuilder::new(&host, &origin)
            .ok()?
            .rp_name(RP_NAME)
            .build()
            .map_err(|e| tracing::error!(error = %e, "cannot set up the WebAuthn relying party"))
            .ok()?;
        Some(Self { webauthn })
    }

    /// Starts a registration for `user`, excluding the passkeys they have: the options for
    /// `navigator.credentials.create` and the state to sign into the enrolment ticket.
    pub fn begin_registration(
        &self,
        user: &str,
        existing: &[StoredPasskey],
    ) -> Result<(CreationChallengeResponse, Value), RegistrationError> {
        let exclude = existing
            .iter()
            .filter_map(|p| URL_SAFE_NO_PAD.decode(&p.id).ok())
            .collect::<Vec<_>>();
        let (options, state) = self
            .webauthn
            .start_passkey_registration(user_handle(user), user, user, Some(exclude))
            .map_err(|e| RegistrationError::Refused(e.to_string()))?;
        let state = serde_json::to_value(&state).map_err(|e| RegistrationError::Unstorable(e.to_string()))?;
        Ok((options, state))
    }

    /// Finishes a registration: the browser's answer `credential_json` against `state` (from
    /// the enrolment ticket). Returns the passkey to store, named `name`, made at `now`.
    pub fn finish_registration(
        &self,
        state: &Value,
        credential_json: &str,
        name: &str,
        now: Timestamp,
    ) -> Result<StoredPasskey, RegistrationError> {
        if credential_json.len() > MAX_CREDENTIAL_JSON_BYTES {
            return Err(RegistrationError::Malformed(format!(
                "it is {} bytes, at most {MAX_CREDENTIAL_JSON_BYTES} are read",
                credential_json.len()
            )));
        }
        let credential: RegisterPublicKeyCredential =
            serde_json::from_str(credential_json).map_err(|e| RegistrationError::Malformed(e.to_string()))?;
        let state: PasskeyRegistration = serde_json::from_value(state.clone())
            .map_err(|_| RegistrationError::Refused("the ticket holds no registration".to_owned()))?;
        let passkey = self
            .webauthn
            .finish_passkey_registration(&credential, &state)
            .map_err(|e| RegistrationError::Refused(e.to_string()))?;
        if passkey.cred_id().len() > MAX_CREDENTIAL_ID_BYTES {
            return Err(RegistrationError::Refused(format!(
                "the authenticator's credential id is {} bytes, at most {MAX_CREDENTIAL_ID_BYTES} are taken; use another authenticator",
                passkey.cred_id().len()
            )));
        }
        let mut stored =
            serde_json::to_value(&passkey).map_err(|e| RegistrationError::Unstorable(e.to_string()))?;
        without_attestation(&mut stored);
        Ok(StoredPasskey {
            id: credential_id(&passkey),
            name: name.to_owned(),
            backup_eligible: stored_flag(&stored, "backup_eligible"),
            passkey: stored,
            created_at: now,
            last_used_at: None,
            cloned_at: None,
        })
    }

    /// Starts a sign-in's passkey step over the user's `passkeys`: the options for
    /// `navigator.credentials.get` and the state to sign into the second-factor ticket. `None`
    /// (logged) when none of them can be read.
    pub fn begin_authentication(
        &self,
        passkeys: &[StoredPasskey],
    ) -> Option<(RequestChallengeResponse, Value)> {
        let readable: Vec<Passkey> = passkeys.iter().filter_map(read_passkey).collect();
        if readable.is_empty() {
            return None;
        }
        let (options, state) = self
            .webauthn
            .start_passkey_authentication(&readable)
            .map_err(|e| tracing::error!(error = %e, "cannot start a passkey sign-in"))
            .ok()?;
        let state = serde_json::to_value(&state)
            .map_err(|e| tracing::error!(error = %e, "cannot keep a passkey sign-in's state"))
            .ok()?;
        Some((options, state))
    }

    /// Verifies a sign-in's passkey answer `credential_json` against `state` (from the
    /// second-factor ticket) and the user's `passkeys` as the entry holds them now. Returns the
    /// passkey that signed with its counter moved, for
    /// [`ichor_renderers::auth::credentials::CredentialsEntry::use_passkey`].
    ///
    /// # Errors
    /// [`FactorRefusal::PasskeyCloned`], naming the passkey, when its signature verified but its
    /// counter did not move forward (against the ticket's copy, by the library, and against the
    /// entry's, here); [`FactorRefusal::PasskeyRefused`] for every other failure.
    pub fn verify_assertion(
        &self,
        state: &Value,
        credential_json: &str,
        passkeys: &[StoredPasskey],
    ) -> Result<VerifiedPasskey, PasskeyRefusal> {
        let refused = || PasskeyRefusal::from(FactorRefusal::PasskeyRefused);
        if credential_json.len() > MAX_CREDENTIAL_JSON_BYTES {
            return Err(refused());
        }
        let credential: PublicKeyCredential = serde_json::from_str(credential_json).map_err(|_| refused())?;
        let state: PasskeyAuthentication = serde_json::from_value(state.clone()).map_err(|_| refused())?;
        // Only a signature that verified reaches the counter check (the library checks it
        // first), so a refusal as cloned names a passkey whose key signed.
        let cloned = |id: String| PasskeyRefusal {
            refusal: FactorRefusal::PasskeyCloned,
            cloned: Some(id),
        };
        let result = self
            .webauthn
            .finish_passkey_authentication(&credential, &state)
            .map_err(|e| match e {
                WebauthnError::CredentialPossibleCompromise => {
                    cloned(URL_SAFE_NO_PAD.encode(&credential.raw_id))
                }
                _ => refused(),
            })?;
        let id = URL_SAFE_NO_PAD.encode(result.cred_id());
        let stored = passkeys.iter().find(|p| p.id == id).ok_or_else(refused)?;
        let mut passkey = read_passkey(stored).ok_or_else(refused)?;
        let counter = stored_counter(&stored.passkey);
        if (result.counter() > 0 || counter > 0) && result.counter() <= counter {
            return Err(cloned(id));
        }
        passkey.update_credential(&result).ok_or_else(refused)?;
        let mut updated = serde_json::to_value(&passkey).map_err(|_| refused())?;
        without_attestation(&mut updated);
        Ok(VerifiedPasskey {
            id,
            backup_eligible: stored_flag(&updated, "backup_eligible"),
            passkey: updated,
        })
    }
}

/// The WebAuthn user handle of `user`: a UUID derived from the name, so it is the same on every
/// replica and registration without being stored (it reveals nothing the name does not).
fn user_handle(user: &str) -> Uuid {
    let digest = Sha256::digest(format!("ichor-user:{user}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    Uuid::from_bytes(bytes)
}

/// A stored passkey as the library's credential; `None` (logged) when the entry's copy does
/// not read.
fn read_passkey(stored: &StoredPasskey) -> Option<Passkey> {
    serde_json::from_value(stored.passkey.clone())
        .map_err(|e| tracing::error!(passkey = %stored.id, error = %e, "a stored passkey cannot be read"))
        .ok()
}

/// The credential id of `passkey`, base64url without padding as the entry keeps it.
fn credential_id(passkey: &Passkey) -> String {
    URL_SAFE_NO_PAD.encode(passkey.cred_id())
}

/// Replaces the attestation of the library's stored credential (`{"cred":{…}}`) by "none".
/// Ichor asks for none and trusts none (no attestation CA list): what an authenticator sent
/// anyway (a certificate chain of a few KiB) would only make the entry and every sign-in's
/// ticket larger.
fn without_attestation(passkey: &mut Value) {
    if let Some(cred) = passkey.get_mut("cred").and_then(Value::as_object_mut) {
        cred.insert(
            "attestation".to_owned(),
            serde_json::json!({"data": "None", "metadata": "None"}),
        );
        cred.insert("attestation_format".to_owned(), Value::from("none"));
    }
}

/// A flag of the library's stored credential (`{"cred":{…}}`).
fn stored_flag(passkey: &Value, name: &str) -> bool {
    passkey["cred"][name].as_bool().unwrap_or(false)
}

/// The signature counter of the library's stored credential.
fn stored_counter(passkey: &Value) -> u32 {
    passkey["cred"]["counter"]
        .as_u64()
        .and_then(|c| u32::try_from(c).ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_domain_issuer_has_a_relying_party_and_an_ip_issuer_none() {
        assert!(RelyingParty::for_issuer("https://ichor.example.com:8443").is_some());
        assert!(RelyingParty::for_issuer("https://localhost:8443").is_some());
        assert!(RelyingParty::for_issuer("https://127.0.0.1:8443").is_none());
        assert!(RelyingParty::for_issuer("not a url").is_none());
    }

    #[test]
    fn registration_options_name_the_site_the_user_and_require_verification() {
        let rp = RelyingParty::for_issuer("https://ichor.example.com").unwrap();
        let (options, state) = rp.begin_registration("alice", &[]).unwrap();
        let options = serde_json::to_value(&options).unwrap();
        let pk = &options["publicKey"];
        assert_eq!(pk["rp"]["id"], "ichor.example.com");
        assert_eq!(pk["rp"]["name"], RP_NAME);
        assert_eq!(pk["user"]["name"], "alice");
        assert_eq!(pk["authenticatorSelection"]["userVerification"], "required");
        assert!(state.is_object());
        // The same user handle on every replica.
        let (again, _) = rp.begin_registration("alice", &[]).unwrap();
        assert_eq!(
            serde_json::to_value(&again).unwrap()["publicKey"]["user"]["id"],
            pk["user"]["id"]
        );
        assert_ne!(
            serde_json::to_value(&again).unwrap()["publicKey"]["challenge"],
            pk["challenge"],
            "a new challenge every time"
        );
    }

    #[test]
    fn garbage_from_the_browser_is_refused_not_a_panic() {
        let rp = RelyingParty::for_issuer("https://ichor.example.com").unwrap();
        let (_, state) = rp.begin_registration("alice", &[]).unwrap();
        for junk in [
            "",
            "{}",
            "null",
            "[1,2]",
            &"x".repeat(MAX_CREDENTIAL_JSON_BYTES + 1),
        ] {
            assert!(
                rp.finish_registration(&state, junk, "k", Timestamp::UNIX_EPOCH)
                    .is_err()
            );
            assert_eq!(
                rp.verify_assertion(&state, junk, &[]).unwrap_err(),
                PasskeyRefusal::from(FactorRefusal::PasskeyRefused)
            );
        }
        assert!(rp.begin_authentication(&[]).is_none());
    }
}
