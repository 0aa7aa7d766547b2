//! The credentials entry of one user (`CredentialsEntry::parse`, the JSON the issuer stores per
//! user in the credentials Secret and reads back on every sign-in and refresh).
//!
//! Properties: no panic; an accepted entry renders (`to_json`) to bytes that parse back to the
//! same entry, and rendering is a fixed point.

use ichor_renderers::auth::credentials::CredentialsEntry;

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let Ok(entry) = CredentialsEntry::parse("alice", data) else {
        return;
    };
    let json = entry.to_json("alice").expect("an accepted entry renders");
    let back = CredentialsEntry::parse("alice", json.as_bytes()).expect("a rendered entry parses");
    assert!(back == entry, "parse(render(x)) != x for {json}");
    assert_eq!(back.to_json("alice").expect("render again"), json);
    let _ = entry.accepts_issued_at(crate::fixtures::now());
}
