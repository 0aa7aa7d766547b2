//! Someone who may write `IchorUser`s with `kubectl` puts a terminal escape sequence into
//! `spec.displayName` or `spec.email`, to have it run in the terminal of every admin who types
//! `ichor user list`. Beside the CRD's CEL rules (`tests/cluster`), the webhook refuses such a
//! create or change with the API's words, whoever writes it (an admin too); an update that
//! leaves an older value as it is still passes, as the apiserver ratchets its own rules.

use ichor_controller::admission::fixtures::{OPERATOR, ROOT, user};
use ichor_controller::admission::users::KIND as USER;
use serde_json::{Value, json};

use crate::admission::Fakes;

fn with(spec: Value) -> Value {
    let mut u = user("eve", &["viewer"], false);
    for (k, v) in spec.as_object().unwrap() {
        u["spec"][k] = v.clone();
    }
    u
}

#[tokio::test]
async fn the_webhook_refuses_an_escape_sequence_in_a_display_name_or_email_from_anyone() {
    let f = Fakes::none();
    let cases = [
        (
            json!({"displayName": "Eve\u{1b}]0;pwned\u{7}"}),
            "spec.displayName: must not contain control characters",
        ),
        (
            json!({"displayName": "Eve\u{9b}2J"}),
            "spec.displayName: must not contain control characters",
        ),
        (
            json!({"email": "eve@example.com\u{1b}[8m"}),
            "spec.email: must not contain control characters",
        ),
        (
            json!({"email": "eve @example.com"}),
            "spec.email: must not contain spaces",
        ),
        (
            json!({"displayName": "d".repeat(257)}),
            "spec.displayName: is 257 bytes, at most 256 are allowed",
        ),
    ];
    for (spec, message) in cases {
        for who in [&ROOT, &OPERATOR] {
            let got = f
                .decide(USER, "CREATE", who, with(spec.clone()), Value::Null)
                .await;
            assert_eq!(got, Err(message.to_owned()), "create {spec} by {}", who.user);
            let old = user("eve", &["viewer"], false);
            let got = f.decide(USER, "UPDATE", who, with(spec.clone()), old).await;
            assert_eq!(got, Err(message.to_owned()), "update to {spec} by {}", who.user);
        }
    }
    // Ordinary text passes; an older value left as it is does not block another change.
    let fine = with(json!({"displayName": "Ann Bø 安", "email": "ann@example.com"}));
    assert_eq!(f.decide(USER, "CREATE", &ROOT, fine, Value::Null).await, Ok(()));
    let old = with(json!({"displayName": "Eve\u{1b}[2J"}));
    let mut new = old.clone();
    new["spec"]["disabled"] = json!(true);
    assert_eq!(f.decide(USER, "UPDATE", &ROOT, new, old).await, Ok(()));
}
