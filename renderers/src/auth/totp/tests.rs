use super::*;
use proptest::prelude::*;

/// RFC 6238's SHA-1 test secret, "12345678901234567890", in base32.
const SECRET: &str = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ";

/// RFC 6238 appendix B, SHA-1: (time, 8-digit code).
const RFC_6238_SHA1: [(i64, &str); 6] = [
    (59, "94287082"),
    (1_111_111_109, "07081804"),
    (1_111_111_111, "14050471"),
    (1_234_567_890, "89005924"),
    (2_000_000_000, "69279037"),
    (20_000_000_000, "65353130"),
];

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap()
}

/// The 6-digit code of RFC 6238's vector: truncation is mod 10^digits, so its last 6 digits.
fn six(code: &str) -> &str {
    &code[2..]
}

#[test]
fn the_crate_agrees_with_rfc_6238_appendix_b_on_8_digits() {
    let totp = Builder::new()
        .with_algorithm(Algorithm::SHA1)
        .with_digits(8)
        .with_secret(Secret::new_stack(*b"12345678901234567890"))
        .build()
        .unwrap();
    for (time, code) in RFC_6238_SHA1 {
        assert_eq!(totp.generate(time as u64).to_string(), code, "T = {time}");
    }
}

#[test]
fn six_digit_codes_are_the_last_six_digits_of_the_rfc_vectors() {
    assert_eq!(generate_secret(b"12345678901234567890"), SECRET);
    for (time, code) in RFC_6238_SHA1 {
        assert_eq!(code_at(SECRET, at(time)).unwrap(), six(code), "T = {time}");
        assert_eq!(
            verify(SECRET, six(code), at(time), 0),
            Ok(time as u64 / STEP_SECONDS),
            "T = {time}"
        );
    }
}

#[test]
fn a_code_is_accepted_once() {
    let (time, code) = RFC_6238_SHA1[3];
    let step = verify(SECRET, six(code), at(time), 0).unwrap();
    assert_eq!(
        verify(SECRET, six(code), at(time), step),
        Err(TotpError::Replayed)
    );
    assert_eq!(
        verify(SECRET, six(code), at(time + 30), step),
        Err(TotpError::Replayed),
        "nor as the previous step"
    );
}

#[test]
fn the_previous_step_is_accepted_and_two_steps_back_or_one_ahead_are_not() {
    let now = at(1_234_567_890);
    let step = current_step(now).unwrap();
    let code_of = |step: u64| code_at(SECRET, at((step * STEP_SECONDS) as i64)).unwrap();
    assert_eq!(verify(SECRET, &code_of(step), now, 0), Ok(step));
    assert_eq!(verify(SECRET, &code_of(step - 1), now, 0), Ok(step - 1));
    assert_eq!(verify(SECRET, &code_of(step - 2), now, 0), Err(TotpError::Wrong));
    assert_eq!(verify(SECRET, &code_of(step + 1), now, 0), Err(TotpError::Wrong));
    // Once the current step is accepted, the previous one is a replay too.
    assert_eq!(
        verify(SECRET, &code_of(step - 1), now, step),
        Err(TotpError::Replayed)
    );
    // The previous step is still accepted when only older ones were used.
    assert_eq!(verify(SECRET, &code_of(step - 1), now, step - 2), Ok(step - 1));
}

#[test]
fn surrounding_whitespace_is_trimmed() {
    let (time, code) = RFC_6238_SHA1[1];
    let padded = format!(" \t{}\r\n", six(code));
    assert_eq!(verify(SECRET, &padded, at(time), 0), Ok(time as u64 / 30));
}

#[test]
fn malformed_codes_are_refused_as_malformed() {
    let long = "1".repeat(10_000);
    for code in [
        "",
        " ",
        "28708",
        "2870822",
        "94287082",
        "28708a",
        "+28708",
        "-28708",
        "287 082",
        "２８７０８２",
        "28708\u{0}",
        &long,
    ] {
        assert_eq!(
            verify(SECRET, code, at(59), 0),
            Err(TotpError::Malformed),
            "{code:?}"
        );
    }
}

#[test]
fn a_bad_secret_or_clock_is_refused_without_checking() {
    for secret in [
        "",
        &SECRET.to_lowercase(),
        &SECRET[1..],
        &format!("{}1", &SECRET[1..]),
    ] {
        assert_eq!(
            verify(secret, "287082", at(59), 0),
            Err(TotpError::InvalidSecret),
            "{secret:?}"
        );
    }
    assert_eq!(
        verify(SECRET, "287082", at(-1), 0),
        Err(TotpError::ClockBeforeEpoch)
    );
    assert_eq!(code_at(SECRET, at(-30)), Err(TotpError::ClockBeforeEpoch));
}

#[test]
fn the_errors_name_no_code_or_secret() {
    for err in [
        TotpError::Malformed,
        TotpError::Wrong,
        TotpError::Replayed,
        TotpError::InvalidSecret,
        TotpError::ClockBeforeEpoch,
        TotpError::InvalidLabel { field: "issuer" },
    ] {
        let message = err.to_string();
        assert!(
            !message.contains(SECRET) && !message.contains("287082"),
            "{message}"
        );
    }
    assert_eq!(
        TotpError::InvalidSecret.to_string(),
        "the stored authenticator-app secret is not 32 base32 characters; remove the factor and enrol again"
    );
}

#[test]
fn the_otpauth_uri_names_issuer_user_and_parameters() {
    assert_eq!(
        otpauth_uri("Ichor prod", "alice", SECRET).unwrap(),
        "otpauth://totp/Ichor%20prod:alice?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&issuer=Ichor%20prod&algorithm=SHA1&digits=6&period=30"
    );
    assert_eq!(
        otpauth_uri("Ichor & co/é", "a", SECRET).unwrap(),
        "otpauth://totp/Ichor%20%26%20co%2F%C3%A9:a?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&issuer=Ichor%20%26%20co%2F%C3%A9&algorithm=SHA1&digits=6&period=30"
    );
    assert_eq!(
        otpauth_uri("a:b", "alice", SECRET),
        Err(TotpError::InvalidLabel { field: "issuer" })
    );
    assert_eq!(
        otpauth_uri("Ichor", "", SECRET),
        Err(TotpError::InvalidLabel { field: "user" })
    );
    assert_eq!(
        otpauth_uri("Ichor", "al\nice", SECRET),
        Err(TotpError::InvalidLabel { field: "user" })
    );
    assert_eq!(
        otpauth_uri("Ichor", "alice", "short"),
        Err(TotpError::InvalidSecret)
    );
}

#[test]
fn a_generated_secret_is_a_valid_stored_secret() {
    let secret = generate_secret(&[0xff; SECRET_BYTES]);
    assert_eq!(secret, "7".repeat(32));
    assert!(code_at(&secret, at(59)).is_ok());
}

proptest! {
    #[test]
    fn any_input_is_answered_without_panic(code in any::<String>(), now in -100i64..30_000_000_000, last in any::<u64>()) {
        let outcome = verify(SECRET, &code, at(now), last);
        if let Ok(step) = outcome {
            prop_assert!(step > last);
            prop_assert_eq!(code.trim().len(), DIGITS);
        }
    }

    #[test]
    fn the_current_code_is_accepted_for_any_time(now in 30i64..30_000_000_000, random in any::<[u8; SECRET_BYTES]>()) {
        let secret = generate_secret(&random);
        let code = code_at(&secret, at(now)).unwrap();
        let step = verify(&secret, &code, at(now), 0).unwrap();
        prop_assert_eq!(step, now as u64 / STEP_SECONDS);
        prop_assert_eq!(verify(&secret, &code, at(now), step), Err(TotpError::Replayed));
    }
}
