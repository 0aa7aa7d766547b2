//! `keys.json` (`KeysDocument::parse`), the signing keys document the controller writes and
//! every issuer replica loads (and reloads on change).
//!
//! Properties: no panic; an accepted document renders (`to_json`) to bytes that parse back to
//! the same document; loading it as signing material (`LoadedKeys::from_document`) and
//! publishing its JWKS do not panic.

use ichor_issuer::keys::LoadedKeys;
use ichor_renderers::trust::KeysDocument;

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let Ok(doc) = KeysDocument::parse(data) else {
        return;
    };
    let json = doc.to_json();
    let back = KeysDocument::parse(json.as_bytes()).expect("a rendered document parses");
    assert_eq!(back, doc);
    assert_eq!(back.to_json(), json);
    if let Ok(keys) = LoadedKeys::from_document(&doc) {
        let _ = keys.jwks(crate::fixtures::now());
        let _ = keys.signing_key(crate::fixtures::now());
        let _ = keys.signing_hmac(crate::fixtures::now());
    }
}
