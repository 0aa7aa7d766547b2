//! The Talos machine API reply the rollout reads before every step: the COSI `State.Get`
//! response for the node's `MachineConfig` (`ichor_talos::client::decode_machine_config`,
//! prost-decoded from what the node sent), then the machine configuration in it, split into its
//! documents (`machine_config::extract_document`, `remove_document`, `replace_document` with
//! the `KubeAuthenticationConfig` kind, as `reconcilers::apply::rollout` calls them).
//!
//! Input: the bytes of a `GetResponse` message as the node sends them.
//!
//! Properties: no panic; an extracted document is part of the configuration; the configuration
//! without its document has none of that kind left, keeps the main document, and putting the
//! extracted document back yields the same document again.

use ichor_renderers::authn::talos::TALOS_KIND;
use ichor_talos::{
    client::decode_machine_config,
    machine_config::{Merge, extract_document, remove_document, replace_document},
    proto::cosi::GetResponse,
};
use prost::Message as _;

const FILE: &str = "the machine configuration of m1";

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let Ok(reply) = GetResponse::decode(data) else {
        return;
    };
    let Ok(config) = decode_machine_config("10.0.0.2", reply) else {
        return;
    };
    assert!(!config.is_empty(), "an accepted reply holds a configuration");
    let Ok(config) = String::from_utf8(config) else {
        return;
    };
    let Ok(previous) = extract_document(&config, TALOS_KIND) else {
        return;
    };
    if let Some(doc) = &previous {
        assert!(
            config.contains(doc.as_str()),
            "the extracted document is part of the configuration"
        );
    }
    let Ok(removed) = remove_document(FILE, &config, TALOS_KIND) else {
        return;
    };
    assert_eq!(
        extract_document(&removed, TALOS_KIND).expect("the rest parses"),
        None,
        "no document of the kind is left"
    );
    let Some(doc) = previous else {
        return;
    };
    let (restored, merge) = replace_document(FILE, &removed, TALOS_KIND, &doc, false)
        .expect("the extracted document goes back in");
    assert_eq!(merge, Merge::Appended, "the document was removed before");
    assert_eq!(
        extract_document(&restored, TALOS_KIND).expect("the restored configuration parses"),
        Some(doc),
        "the restored configuration holds the extracted document"
    );
}
