//! A software WebAuthn authenticator and the browser around it, for the issuer's own tests of
//! what a real browser will not produce: an assertion for another origin (a phishing site relaying
//! the sign-in), a copied authenticator whose signature counter went back, a synced passkey. The
//! browser path with a real authenticator is Chromium's virtual authenticator
//! (`ui/e2e/passkeys.mjs`); this one speaks the same wire format (WebAuthn Level 3: the
//! `clientDataJSON`, the authenticator data, a "none" attestation in CBOR, ES256 signatures in
//! DER), which `webauthn-rs` verifies as it verifies a browser's.
//!
//! Its CBOR is written by hand: only the few shapes an attestation object needs (maps, small
//! integers, byte and text strings).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256, SigningKey};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The authenticator data flags (WebAuthn §6.1).
const UP: u8 = 0x01;
const UV: u8 = 0x04;
const BE: u8 = 0x08;
const BS: u8 = 0x10;
const AT: u8 = 0x40;

/// One P-256 credential on a software authenticator, used from one browser origin.
pub struct SoftAuthenticator {
    key: std::sync::Arc<KeyPair>,
    credential_id: Vec<u8>,
    /// The signature counter: the next assertion carries this plus one.
    pub counter: u32,
    /// The origin the "browser" reports in `clientDataJSON`.
    pub origin: String,
    /// The relying-party id whose hash the authenticator data carries.
    pub rp_id: String,
    /// Whether the credential is backup-eligible (a synced passkey).
    pub backup_eligible: bool,
    /// Whether the user was verified (a PIN or biometrics).
    pub user_verified: bool,
    user_handle: Option<String>,
}

impl SoftAuthenticator {
    /// A new credential for `origin`, whose host is the relying-party id.
    pub fn new(origin: &str) -> Self {
        let rp_id = url::Url::parse(origin)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .expect("an origin with a host");
        Self {
            key: std::sync::Arc::new(KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("P-256 key")),
            credential_id: rand::random::<[u8; 32]>().to_vec(),
            counter: 0,
            origin: origin.to_owned(),
            rp_id,
            backup_eligible: false,
            user_verified: true,
            user_handle: None,
        }
    }

    /// A copy of this credential (the same key and id), as a cloned authenticator holds it.
    pub fn clone_credential(&self) -> Self {
        Self {
            key: std::sync::Arc::clone(&self.key),
            credential_id: self.credential_id.clone(),
            counter: self.counter,
            origin: self.origin.clone(),
            rp_id: self.rp_id.clone(),
            backup_eligible: self.backup_eligible,
            user_verified: self.user_verified,
            user_handle: self.user_handle.clone(),
        }
    }

    /// The credential id, base64url without padding.
    pub fn id(&self) -> String {
        URL_SAFE_NO_PAD.encode(&self.credential_id)
    }

    /// The browser's answer to `navigator.credentials.create(options)`: the registration
    /// response as `PublicKeyCredential.toJSON()` gives it.
    pub fn register(&mut self, options: &Value) -> Value {
        let pk = &options["publicKey"];
        self.user_handle = pk["user"]["id"].as_str().map(str::to_owned);
        let client_data = self.client_data("webauthn.create", pk["challenge"].as_str().unwrap_or(""));
        let public = self.public_point();
        let cose_key = cbor_map(&[
            (cbor_uint(1), cbor_uint(2)),
            (cbor_uint(3), cbor_neg(-7)),
            (cbor_neg(-1), cbor_uint(1)),
            (cbor_neg(-2), cbor_bytes(&public[1..33])),
            (cbor_neg(-3), cbor_bytes(&public[33..65])),
        ]);
        let mut auth_data = self.auth_data(AT);
        auth_data.extend_from_slice(&[0u8; 16]);
        auth_data.extend_from_slice(
            &u16::try_from(self.credential_id.len())
                .expect("short id")
                .to_be_bytes(),
        );
        auth_data.extend_from_slice(&self.credential_id);
        auth_data.extend_from_slice(&cose_key);
        let attestation = cbor_map(&[
            (cbor_text("fmt"), cbor_text("none")),
            (cbor_text("attStmt"), cbor_map(&[])),
            (cbor_text("authData"), cbor_bytes(&auth_data)),
        ]);
        json!({
            "id": self.id(), "rawId": self.id(), "type": "public-key",
            "response": {
                "attestationObject": URL_SAFE_NO_PAD.encode(attestation),
                "clientDataJSON": URL_SAFE_NO_PAD.encode(client_data),
                "transports": ["internal"]
            },
            "clientExtensionResults": {}
        })
    }

    /// The browser's answer to `navigator.credentials.get(options)`: an assertion with the
    /// counter moved on by one.
    pub fn assert(&mut self, options: &Value) -> Value {
        self.counter += 1;
        let client_data = self.client_data(
            "webauthn.get",
            options["publicKey"]["challenge"].as_str().unwrap_or(""),
        );
        let auth_data = self.auth_data(0);
        let mut signed = auth_data.clone();
        signed.extend_from_slice(&Sha256::digest(client_data.as_bytes()));
        let signature = self.key.sign(&signed).expect("ES256 signature");
        json!({
            "id": self.id(), "rawId": self.id(), "type": "public-key",
            "response": {
                "authenticatorData": URL_SAFE_NO_PAD.encode(auth_data),
                "clientDataJSON": URL_SAFE_NO_PAD.encode(client_data),
                "signature": URL_SAFE_NO_PAD.encode(signature),
                "userHandle": self.user_handle
            },
            "clientExtensionResults": {}
        })
    }

    fn client_data(&self, kind: &str, challenge: &str) -> String {
        json!({"type": kind, "challenge": challenge, "origin": self.origin, "crossOrigin": false}).to_string()
    }

    fn auth_data(&self, extra_flags: u8) -> Vec<u8> {
        let mut flags = UP | extra_flags;
        if self.user_verified {
            flags |= UV;
        }
        if self.backup_eligible {
            flags |= BE | BS;
        }
        let mut data = Sha256::digest(self.rp_id.as_bytes()).to_vec();
        data.push(flags);
        data.extend_from_slice(&self.counter.to_be_bytes());
        data
    }

    /// The public key as an uncompressed point (0x04, x, y).
    fn public_point(&self) -> Vec<u8> {
        let raw = self.key.public_key_raw().to_vec();
        assert_eq!(raw.len(), 65, "an uncompressed P-256 point");
        raw
    }
}

fn cbor_head(major: u8, n: u64) -> Vec<u8> {
    let m = major << 5;
    match n {
        0..=23 => vec![m | u8::try_from(n).expect("small")],
        24..=0xff => vec![m | 24, u8::try_from(n).expect("byte")],
        0x100..=0xffff => {
            let mut v = vec![m | 25];
            v.extend_from_slice(&u16::try_from(n).expect("u16").to_be_bytes());
            v
        }
        _ => {
            let mut v = vec![m | 26];
            v.extend_from_slice(&u32::try_from(n).expect("u32").to_be_bytes());
            v
        }
    }
}

fn cbor_uint(n: u64) -> Vec<u8> {
    cbor_head(0, n)
}

fn cbor_neg(n: i64) -> Vec<u8> {
    cbor_head(1, u64::try_from(-1 - n).expect("negative"))
}

fn cbor_bytes(b: &[u8]) -> Vec<u8> {
    let mut v = cbor_head(2, b.len() as u64);
    v.extend_from_slice(b);
    v
}

fn cbor_text(t: &str) -> Vec<u8> {
    let mut v = cbor_head(3, t.len() as u64);
    v.extend_from_slice(t.as_bytes());
    v
}

fn cbor_map(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut v = cbor_head(5, entries.len() as u64);
    for (k, val) in entries {
        v.extend_from_slice(k);
        v.extend_from_slice(val);
    }
    v
}
