//! A passkey as the credentials entry stores it, from `webauthn-rs`'s own test vectors (a P-256
//! key whose private half nobody here holds): for tests of what the issuer does with a stored
//! passkey short of a real signature (the browser test makes real ones).

use ichor_renderers::auth::credentials::StoredPasskey;
use jiff::Timestamp;
use serde_json::json;

/// The stored passkey's credential id (webauthn-rs-core's test vector).
pub const CREDENTIAL_ID: &str =
    "uZcVDBVS68E_MtAgeQpElJxldF_6cY9sSvbWqx_qRh8wiu42lyRBRmh5yFeD_r9k130dMbFHBHI9RTFgdJQIzQ";

/// The stored passkey: webauthn-rs-core's serialised test credential, without its attestation
/// (this issuer asks for none).
pub fn stored_passkey() -> StoredPasskey {
    let x = [
        194, 126, 127, 109, 252, 23, 131, 21, 252, 6, 223, 99, 44, 254, 140, 27, 230, 17, 94, 5, 133, 28,
        104, 41, 144, 69, 171, 149, 161, 26, 200, 243,
    ];
    let y = [
        143, 123, 183, 156, 24, 178, 21, 248, 117, 159, 162, 69, 171, 52, 188, 252, 26, 59, 6, 47, 103, 92,
        19, 58, 117, 103, 249, 0, 219, 8, 95, 196,
    ];
    StoredPasskey {
        id: CREDENTIAL_ID.to_owned(),
        name: "fuzz".to_owned(),
        passkey: json!({"cred": {
            "cred_id": CREDENTIAL_ID,
            "cred": {"type_": "ES256", "key": {"EC_EC2": {"curve": "SECP256R1", "x": x, "y": y}}},
            "counter": 2, "user_verified": true, "backup_eligible": false, "backup_state": false,
            "registration_policy": "required",
            "extensions": {"cred_protect": "NotRequested", "hmac_create_secret": "NotRequested"},
            "attestation": {"data": "None", "metadata": "None"},
            "attestation_format": "none"
        }}),
        created_at: Timestamp::UNIX_EPOCH,
        last_used_at: None,
        backup_eligible: false,
        cloned_at: None,
    }
}
