//! Version-2 credentials entries (docs/mfa.md): the `factors` object and a refresh family's
//! `amr`, spliced into an otherwise valid entry so that every input reaches the version-2 parser
//! (`CredentialsEntry::parse`), and then the factor checks an accepted entry feeds.
//!
//! Input: up to three lines: the JSON of `factors`; the JSON of the family's `amr` (absent or
//! empty: no `amr`); a typed code, tried as an authenticator-app code and as a recovery code.
//!
//! Properties: no panic; an accepted entry renders (`to_json`) to bytes that parse back to the
//! same entry, and rendering is a fixed point; it is written as version 2 exactly when it has a
//! factor or a family `amr` beyond the password; `Debug` of the TOTP factor and of the recovery
//! codes shows neither the secret nor a digest; the current TOTP code is accepted exactly when
//! its step is after `lastStep`, and a code the check accepts is the code of the step it
//! returns; a recovery code removes at most one digest and leaves a valid entry; a factor reset
//! writes version 1.

use ichor_renderers::auth::{credentials::CredentialsEntry, recovery, totp};

const HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$BwcHBwcHBwcHBwcHBwcHBw$\
                    9hZ+8cNJ3lSgdrc6q6DqUHmaLfmeEgKqRTZn9xpSXWg";

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.splitn(3, '\n');
    let factors = lines.next().unwrap_or_default();
    let amr = lines.next().filter(|amr| !amr.is_empty());
    let code = lines.next().unwrap_or_default();
    let amr_field = amr.map(|amr| format!(r#","amr":{amr}"#)).unwrap_or_default();
    let json = format!(
        r#"{{"v":2,"hash":"{HASH}","notBefore":"2026-05-01T00:00:00Z","mustChange":false,"factors":{factors},"families":{{"f1":{{"gen":1,"client":"ichor-cli","aud":"ichor-kube","iat":"2026-05-31T00:00:00Z","exp":"2026-06-01T12:00:00Z"{amr_field}}}}}}}"#
    );
    let Ok(entry) = CredentialsEntry::parse("alice", json.as_bytes()) else {
        return;
    };
    let rendered = entry.to_json("alice").expect("an accepted entry renders");
    let back = CredentialsEntry::parse("alice", rendered.as_bytes()).expect("a rendered entry parses");
    assert!(back == entry, "parse(render(x)) != x for {rendered}");
    assert_eq!(back.to_json("alice").expect("render again"), rendered);
    let needs_v2 = !entry.factors.is_empty() || entry.families.values().any(|f| !f.amr.is_empty());
    assert_eq!(rendered.starts_with(r#"{"v":2,"#), needs_v2, "{rendered}");
    assert_eq!(entry.version(), if needs_v2 { 2 } else { 1 });

    let now = crate::fixtures::now();
    if let Some(factor) = &entry.factors.totp {
        assert!(
            !format!("{factor:?}").contains(&factor.secret),
            "Debug shows the TOTP secret"
        );
        let current = totp::current_step(now).expect("now is after 1970");
        let code_now = totp::code_at(&factor.secret, now).expect("a stored secret makes codes");
        let expected = if current > factor.last_step {
            Ok(current)
        } else {
            Err(totp::TotpError::Replayed)
        };
        assert_eq!(
            totp::verify(&factor.secret, &code_now, now, factor.last_step),
            expected
        );
        if let Ok(step) = totp::verify(&factor.secret, code, now, factor.last_step) {
            assert!(step > factor.last_step && (step == current || step + 1 == current));
            let at = jiff::Timestamp::from_second((step * totp::STEP_SECONDS) as i64).expect("step time");
            assert_eq!(totp::code_at(&factor.secret, at).expect("code"), code.trim());
        }
    }
    if let Some(codes) = &entry.factors.recovery {
        let printed = format!("{codes:?}");
        assert!(
            codes.digests.iter().all(|d| !printed.contains(d.as_str())),
            "Debug shows a digest"
        );
        let mut after = codes.clone();
        let used = recovery::consume(&mut after, code);
        assert_eq!(after.digests.len() + usize::from(used), codes.digests.len());
        let mut written = entry.clone();
        written.factors.recovery = Some(after);
        written
            .to_json("alice")
            .expect("an entry after a recovery code renders");
    }
    let reset = entry.with_factors_reset(now);
    assert!(
        reset
            .to_json("alice")
            .expect("a reset entry renders")
            .starts_with(r#"{"v":1,"#)
    );
}
