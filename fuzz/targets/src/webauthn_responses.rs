//! The browser's WebAuthn answers as the issuer takes them from the network: a registration
//! (`FinishPasskeyRegistration`'s `credential_json`, `RegisterPublicKeyCredential`) and a sign-in
//! assertion (`/oidc/login/factor`'s `credential`, `PublicKeyCredential`), parsed and checked by
//! `webauthn-rs` through [`ichor_issuer::passkeys::RelyingParty`] against a ceremony this issuer
//! started, with a stored passkey of the library's own test vectors (a P-256 key).
//!
//! Input: the first byte picks the ceremony (even: registration, odd: assertion); the rest is the
//! answer's text (lossy UTF-8).
//!
//! Properties: no panic; nothing verifies — a registration needs the ceremony's fresh challenge
//! signed into the attestation and an assertion a P-256 signature over it by the stored key, so
//! an answer the fuzzer made is always refused, and an assertion never as a copy of the stored
//! passkey (which would disable it: only a verified signature may).

use std::sync::OnceLock;

use ichor_issuer::passkeys::RelyingParty;
use ichor_renderers::auth::credentials::{FactorRefusal, PasskeyRefusal, StoredPasskey};
use ichor_testkit::issuer::passkey::stored_passkey;
use jiff::Timestamp;
use serde_json::Value;

/// The relying party's URL.
const ISSUER: &str = "https://ichor.example.com";
struct Ceremonies {
    rp: RelyingParty,
    registration: Value,
    authentication: Value,
    passkeys: Vec<StoredPasskey>,
}

fn ceremonies() -> &'static Ceremonies {
    static CEREMONIES: OnceLock<Ceremonies> = OnceLock::new();
    CEREMONIES.get_or_init(|| {
        let rp = RelyingParty::for_issuer(ISSUER).expect("a domain issuer has a relying party");
        let passkeys = vec![stored_passkey()];
        let (_, registration) = rp
            .begin_registration("alice", &passkeys)
            .expect("registration starts");
        let (_, authentication) = rp
            .begin_authentication(&passkeys)
            .expect("the stored passkey reads");
        Ceremonies {
            rp,
            registration,
            authentication,
            passkeys,
        }
    })
}

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let c = ceremonies();
    if which % 2 == 0 {
        let registered =
            c.rp.finish_registration(&c.registration, &text, "fuzz", Timestamp::UNIX_EPOCH);
        assert!(registered.is_err(), "a made-up registration verified: {text:?}");
    } else {
        match c.rp.verify_assertion(&c.authentication, &text, &c.passkeys) {
            // Never "cloned": that marks a passkey disabled, and needs a signature that verified.
            Err(PasskeyRefusal {
                refusal: FactorRefusal::PasskeyRefused,
                cloned: None,
            }) => {}
            other => panic!("a made-up assertion came to {other:?}: {text:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ichor_testkit::issuer::passkey::CREDENTIAL_ID;

    #[test]
    fn the_stored_passkey_reads_and_an_assertion_for_it_is_refused() {
        let c = ceremonies();
        let options = c.authentication.to_string();
        assert!(
            options.contains(CREDENTIAL_ID),
            "the state names the stored passkey"
        );
        run(b"\x01{}");
    }
}
