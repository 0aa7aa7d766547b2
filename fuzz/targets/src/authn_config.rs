//! `AuthenticationConfiguration` files as `ichor authn validate` reads them: the strict YAML or
//! JSON parser (`renderers::authn::parse`) and then the kube-apiserver-equivalent validator
//! (`renderers::authn::validate`, including the CEL expression checks).
//!
//! Input: one selector byte (file name `.yaml` or `.json`, with or without a disallowed issuer),
//! then the file.
//!
//! Properties: no panic; an accepted configuration serialised as JSON parses back to itself.

use ichor_renderers::authn::{self, ValidationOptions};

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let Some((&selector, file)) = data.split_first() else {
        return;
    };
    let name = if selector & 1 == 0 {
        "config.yaml"
    } else {
        "config.json"
    };
    let Ok(config) = authn::parse(file, name) else {
        return;
    };
    let options = ValidationOptions {
        disallowed_issuers: if selector & 2 == 0 {
            Vec::new()
        } else {
            vec!["https://10.0.0.5:6443".to_owned()]
        },
    };
    let _ = authn::validate(&config, &options);
    let json = serde_json::to_vec(&config).expect("serialise");
    let back = authn::parse(&json, "config.json").expect("a serialised configuration parses");
    assert_eq!(back, config);
}
