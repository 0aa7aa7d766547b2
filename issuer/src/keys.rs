//! The issuer's signing material, loaded from the controller's `keys.json` (read-only).
//!
//! [`LoadedKeys`] turns a checked [`KeysDocument`] into RS256 signers and verifiers (one per RSA
//! key: signing through [`Rs256Signer`] (AWS-LC), verifying through josekit) and HMAC-SHA256
//! keys, and answers the questions the token code asks at an instant `now`: which key signs,
//! which keys verify, what the JWKS publishes. The selection rules are the document's own
//! ([`KeysDocument::signing_key`], [`KeysDocument::published`], [`KeysDocument::signing_hmac`],
//! [`KeysDocument::verifying_hmacs`]), so the controller and the issuer can never disagree.
//!
//! [`KeyRing`] is the shared handle: the server's file watcher [`KeyRing::store`]s a freshly
//! loaded document, request handlers [`KeyRing::load`] the current one without locking.
//!
//! # Guarantees
//! - No error, `Debug` output or log line of this module contains key material: errors name the
//!   kid and the list, never the PEM or the secret.
//! - The JWKS holds public parameters only (`kty`, `kid`, `use`, `alg`, `n`, `e`).

use std::{collections::BTreeMap, fmt, sync::Arc};

use arc_swap::ArcSwapOption;
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use ichor_renderers::trust::{
    KeysDocument,
    keys::{HMAC_SECRET_BYTES, KeyTimes},
};
use jiff::Timestamp;
use josekit::{
    jwk::{KeyPair, alg::rsa::RsaKeyPair},
    jws::{JwsVerifier, RS256, alg::rsassa::RsassaJwsVerifier},
};
use serde::Serialize;

mod rs256;

pub use rs256::{Rs256KeyError, Rs256SignError, Rs256Signer};

/// Why a keys document could not be loaded. Never contains key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyLoadError {
    /// The RS256 signer refused the private key of an RSA entry (the parser accepted it, so this means
    /// the PEM is damaged in a way only a full key load detects).
    #[error(
        "keys.json: RSA key {kid:?} (field keys[].pem) could not be loaded as an RS256 signing key; \
         the controller must replace it"
    )]
    RsaKey {
        /// The key's kid.
        kid: String,
    },
}

/// One RSA key, ready to sign and verify, with its public JWK parameters.
struct LoadedRsa {
    signer: Rs256Signer,
    verifier: RsassaJwsVerifier,
    n: String,
    e: String,
}

/// A loaded keys document: every RSA key as an RS256 signer/verifier, every HMAC key as its
/// secret, with the document kept for the time-based selection. Cheap to share (`Arc`).
pub struct LoadedKeys {
    document: KeysDocument,
    rsa: BTreeMap<String, LoadedRsa>,
}

impl fmt::Debug for LoadedKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedKeys")
            .field("rsa", &self.rsa.keys().collect::<Vec<_>>())
            .field(
                "hmac",
                &self.document.hmac().iter().map(|k| k.kid()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// An RSA key that signs at some instant: its kid and the signer.
pub struct RsaSigningKey<'a> {
    /// The kid, for the JWS header.
    pub kid: &'a str,
    /// The RS256 signer.
    pub signer: &'a Rs256Signer,
}

/// An HMAC-SHA256 key: its kid and its 32-byte secret.
pub struct HmacSigningKey<'a> {
    /// The kid, for the JWS header.
    pub kid: &'a str,
    /// The secret. Never log it.
    pub secret: &'a [u8; HMAC_SECRET_BYTES],
}

/// One entry of the JWKS (RFC 7517), public parameters only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Jwk {
    /// Always `RSA`.
    pub kty: &'static str,
    /// The key id, as in the ID token header.
    pub kid: String,
    /// Always `sig`.
    #[serde(rename = "use")]
    pub use_: &'static str,
    /// Always `RS256`.
    pub alg: &'static str,
    /// The modulus, base64url without padding.
    pub n: String,
    /// The public exponent, base64url without padding.
    pub e: String,
}

/// The JWKS document served at `/oidc/jwks`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Jwks {
    /// The published keys.
    pub keys: Vec<Jwk>,
}

impl LoadedKeys {
    /// Loads every key of `document`.
    ///
    /// # Errors
    /// [`KeyLoadError::RsaKey`] naming the kid of an RSA key the signer cannot load. Nothing is
    /// partially loaded: the caller keeps its previous keys.
    pub fn from_document(document: &KeysDocument) -> Result<LoadedKeys, KeyLoadError> {
        let mut rsa = BTreeMap::new();
        for key in document.keys() {
            let err = || KeyLoadError::RsaKey {
                kid: key.kid().to_owned(),
            };
            let pem = key.pem().expose().as_bytes();
            let pair = RsaKeyPair::from_pem(pem).map_err(|_| err())?;
            let signer = Rs256Signer::from_pem(pem).map_err(|_| err())?;
            let verifier = RS256
                .verifier_from_der(pair.to_der_public_key())
                .map_err(|_| err())?;
            let public = pair.to_jwk_public_key();
            let param = |name: &str| {
                public
                    .parameter(name)
                    .and_then(|v| v.as_str())
                    .map(str::to_owned)
                    .ok_or_else(err)
            };
            let (n, e) = (param("n")?, param("e")?);
            rsa.insert(
                key.kid().to_owned(),
                LoadedRsa {
                    signer,
                    verifier,
                    n,
                    e,
                },
            );
        }
        Ok(LoadedKeys {
            document: document.clone(),
            rsa,
        })
    }

    /// The document these keys were loaded from.
    pub fn document(&self) -> &KeysDocument {
        &self.document
    }

    /// The RSA key that signs ID tokens at `now` (`None` before the first key is active).
    pub fn signing_key(&self, now: Timestamp) -> Option<RsaSigningKey<'_>> {
        let key = self.document.signing_key(now)?;
        let loaded = self.rsa.get(key.kid())?;
        Some(RsaSigningKey {
            kid: key.kid(),
            signer: &loaded.signer,
        })
    }

    /// The RS256 verifier for `kid` if that key is published at `now` (not retired).
    pub fn rsa_verifier(&self, kid: &str, now: Timestamp) -> Option<&dyn JwsVerifier> {
        let key = self.document.rsa_key(kid)?;
        if !key.is_live(now) {
            return None;
        }
        self.rsa.get(kid).map(|k| &k.verifier as &dyn JwsVerifier)
    }

    /// The HMAC key that signs internal artifacts at `now`.
    pub fn signing_hmac(&self, now: Timestamp) -> Option<HmacSigningKey<'_>> {
        self.document.signing_hmac(now).map(|k| HmacSigningKey {
            kid: k.kid(),
            secret: k.secret().expose(),
        })
    }

    /// The HMAC key that signed at `at`, if it is still live at `now`; used to re-create a
    /// deterministic artifact (the refresh token of a generation) exactly as it was first issued.
    pub fn hmac_signing_at(&self, at: Timestamp, now: Timestamp) -> Option<HmacSigningKey<'_>> {
        self.document
            .signing_hmac(at)
            .filter(|k| k.is_live(now))
            .map(|k| HmacSigningKey {
                kid: k.kid(),
                secret: k.secret().expose(),
            })
    }

    /// The secret of HMAC key `kid` if it verifies at `now` (published, not retired; a key not
    /// yet active verifies, so replicas with slightly different clocks agree).
    pub fn verifying_hmac(&self, kid: &str, now: Timestamp) -> Option<&[u8; HMAC_SECRET_BYTES]> {
        self.document
            .verifying_hmacs(now)
            .into_iter()
            .find(|k| k.kid() == kid)
            .map(|k| k.secret().expose())
    }

    /// The JWKS at `now`: every published RSA key (including keys not yet signing), in
    /// document order.
    pub fn jwks(&self, now: Timestamp) -> Jwks {
        let keys = self
            .document
            .published(now)
            .into_iter()
            .filter_map(|k| {
                self.rsa.get(k.kid()).map(|l| Jwk {
                    kty: "RSA",
                    kid: k.kid().to_owned(),
                    use_: "sig",
                    alg: "RS256",
                    n: l.n.clone(),
                    e: l.e.clone(),
                })
            })
            .collect();
        Jwks { keys }
    }
}

/// The base64url (no padding) encoding used in every JWS segment.
pub(crate) fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The shared, hot-swappable keys of the issuer. Empty until the first document is loaded; the
/// endpoints answer 503 while it is empty.
#[derive(Debug, Default)]
pub struct KeyRing {
    current: ArcSwapOption<LoadedKeys>,
}

impl KeyRing {
    /// An empty ring.
    pub fn new() -> Self {
        Self::default()
    }

    /// A ring holding `keys`.
    pub fn with_keys(keys: LoadedKeys) -> Self {
        let ring = Self::new();
        ring.store(keys);
        ring
    }

    /// Replaces the keys (the file watcher calls this after a successful load).
    pub fn store(&self, keys: LoadedKeys) {
        self.current.store(Some(Arc::new(keys)));
    }

    /// The current keys, if any were loaded.
    pub fn load(&self) -> Option<Arc<LoadedKeys>> {
        self.current.load_full()
    }
}

/// The creation instants of the keys of `doc` signing at `now`, for the key-age gauges.
pub fn signing_key_times(doc: &KeysDocument, now: Timestamp) -> ichor_server::metrics::SigningKeyTimes {
    ichor_server::metrics::SigningKeyTimes {
        rsa: doc.signing_key(now).map(|k| k.created_at()),
        hmac: doc.signing_hmac(now).map(|k| k.created_at()),
    }
}

/// The key-age gauges' source: the times of the watched `keys.json` at each scrape.
pub fn key_times_source(
    keys: ichor_server::reload::Watched<KeysDocument>,
) -> Arc<ichor_server::metrics::KeyTimesFn> {
    Arc::new(move |now| {
        keys.current()
            .map(|doc| signing_key_times(&doc, now))
            .unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ichor_renderers::trust::{HmacKey, RsaKey, keys::HmacSecret, keys::PrivateKeyPem};

    const PEM: &str = include_str!("../tests/fixtures/rsa3072-1.pkcs8.pem");

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn doc() -> KeysDocument {
        let rsa = RsaKey::new(
            "k-1".into(),
            PrivateKeyPem::new(PEM.into()).expect("pem"),
            ts("2026-01-01T00:00:00Z"),
            ts("2026-01-01T00:00:00Z"),
            Some(ts("2026-03-01T00:00:00Z")),
        )
        .expect("rsa");
        let hmac = HmacKey::new(
            "h-1".into(),
            HmacSecret::new([7; 32]),
            ts("2026-01-01T00:00:00Z"),
            ts("2026-01-01T00:00:00Z"),
            None,
        )
        .expect("hmac");
        KeysDocument::new(vec![rsa], vec![hmac]).expect("doc")
    }

    #[test]
    fn the_jwks_publishes_public_parameters_only_and_drops_retired_keys() {
        let keys = LoadedKeys::from_document(&doc()).expect("load");
        let jwks = serde_json::to_value(keys.jwks(ts("2026-02-01T00:00:00Z"))).expect("json");
        let key = &jwks["keys"][0];
        assert_eq!(key["kty"], "RSA");
        assert_eq!(key["kid"], "k-1");
        assert_eq!(key["use"], "sig");
        assert_eq!(key["alg"], "RS256");
        assert_eq!(key["e"], "AQAB");
        assert!(key.get("d").is_none());
        assert_eq!(key.as_object().map(|o| o.len()), Some(6));
        assert!(keys.jwks(ts("2026-03-01T00:00:00Z")).keys.is_empty());
        assert!(keys.rsa_verifier("k-1", ts("2026-03-01T00:00:00Z")).is_none());
    }

    #[test]
    fn debug_output_names_kids_but_no_secret() {
        let keys = LoadedKeys::from_document(&doc()).expect("load");
        let printed = format!("{keys:?}");
        assert!(printed.contains("k-1") && printed.contains("h-1"), "{printed}");
        assert!(!printed.contains("PRIVATE"), "{printed}");
    }

    #[test]
    fn the_ring_is_empty_until_keys_are_stored() {
        let ring = KeyRing::new();
        assert!(ring.load().is_none());
        ring.store(LoadedKeys::from_document(&doc()).expect("load"));
        assert!(ring.load().is_some());
    }
}
