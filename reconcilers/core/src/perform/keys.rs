//! The signing keys' performer: the document changes a plan carries and the keys it requests,
//! applied to `keys.json` as one write.

use super::{KeyMaterial, PerformError, crypto};
use crate::identity::effects::{GenerateKeyRequest, KeyDocumentChange, KeyKind};
use ichor_renderers::trust::keys::{HmacKey, HmacSecret, KeyTimes as _, KeysDocument, PrivateKeyPem, RsaKey};

/// `current` with the document changes applied: `SetRetireAfter` sets a key's `retireAfter`,
/// `Drop` removes it; a change naming a key that is not there is a no-op (so applying the same
/// changes twice is harmless).
///
/// # Errors
/// The rebuilt document breaks a list rule (cannot happen for a document that parsed).
pub fn apply_document_changes(
    current: &KeysDocument,
    changes: &[KeyDocumentChange],
) -> Result<KeysDocument, ichor_renderers::trust::keys::KeysError> {
    let mut rsa: Vec<RsaKey> = current.keys().to_vec();
    let mut hmac: Vec<HmacKey> = current.hmac().to_vec();
    for change in changes {
        match change {
            KeyDocumentChange::Drop {
                kind: KeyKind::Rsa,
                kid,
            } => rsa.retain(|k| k.kid() != kid),
            KeyDocumentChange::Drop {
                kind: KeyKind::Hmac,
                kid,
            } => hmac.retain(|k| k.kid() != kid),
            KeyDocumentChange::SetRetireAfter {
                kind: KeyKind::Rsa,
                kid,
                retire_after,
            } => {
                for k in rsa.iter_mut().filter(|k| k.kid() == kid) {
                    *k = RsaKey::new(
                        k.kid().to_owned(),
                        k.pem().clone(),
                        k.created_at(),
                        k.active_from(),
                        Some(*retire_after),
                    )?;
                }
            }
            KeyDocumentChange::SetRetireAfter {
                kind: KeyKind::Hmac,
                kid,
                retire_after,
            } => {
                for k in hmac.iter_mut().filter(|k| k.kid() == kid) {
                    *k = HmacKey::new(
                        k.kid().to_owned(),
                        k.secret().clone(),
                        k.created_at(),
                        k.active_from(),
                        Some(*retire_after),
                    )?;
                }
            }
        }
    }
    KeysDocument::new(rsa, hmac)
}

/// The new `keys.json` for the key requests of one evaluation: `current` (or an empty document)
/// with every request's document changes, plus one generated key per request (a kid already in
/// the document is not generated twice).
///
/// # Errors
/// [`PerformError::Crypto`] when generation fails or a key is refused by the document rules.
pub fn signing_keys(
    current: Option<&KeysDocument>,
    requests: &[GenerateKeyRequest],
    material: &mut dyn KeyMaterial,
) -> Result<KeysDocument, PerformError> {
    let mut doc = current.cloned().unwrap_or_default();
    for r in requests {
        doc = apply_document_changes(&doc, &r.document_changes).map_err(|e| crypto(&r.id(), e))?;
    }
    for r in requests {
        let id = r.id();
        match r.kind {
            KeyKind::Rsa if doc.rsa_key(&r.kid).is_none() => {
                let pem = material.rsa_pkcs8_pem().map_err(|e| crypto(&id, e))?;
                let pem = PrivateKeyPem::new(pem).map_err(|e| crypto(&id, format!("{e:?}")))?;
                let key = RsaKey::new(r.kid.clone(), pem, r.created_at, r.active_from, None)
                    .map_err(|e| crypto(&id, e))?;
                doc.insert_rsa(key).map_err(|e| crypto(&id, e))?;
            }
            KeyKind::Hmac if doc.hmac_key(&r.kid).is_none() => {
                let bytes = material.hmac_secret(&r.kid).map_err(|e| crypto(&id, e))?;
                let key = HmacKey::new(
                    r.kid.clone(),
                    HmacSecret::new(bytes),
                    r.created_at,
                    r.active_from,
                    None,
                )
                .map_err(|e| crypto(&id, e))?;
                doc.insert_hmac(key).map_err(|e| crypto(&id, e))?;
            }
            KeyKind::Rsa | KeyKind::Hmac => {}
        }
    }
    Ok(doc)
}
