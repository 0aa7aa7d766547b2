//! The login cache file `ichor auth token` reads on every kubectl call
//! (`cli::commands::auth::cache::parse`, `~/.ichor/auth/<key>.json`): written by ichor, but a
//! local file any process of the user (or a disk error) may have changed.
//!
//! Properties: no panic; a refusal quotes nothing of the input (it holds tokens: only a line and
//! a column are named); an accepted entry serialises to JSON that parses back to itself; its
//! freshness and cache key are total.

use ichor_cli::commands::auth::cache;

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let entry = match cache::parse(data) {
        Ok(entry) => entry,
        Err(refusal) => {
            let text = refusal.to_string();
            assert!(
                !text.contains('"') && !text.contains('`'),
                "a refusal quotes the input: {text}"
            );
            return;
        }
    };
    let json = serde_json::to_vec(&entry).expect("serialise");
    let back = cache::parse(&json).expect("a serialised entry parses");
    assert!(back == entry, "parse(render(x)) != x");
    let _ = entry.is_fresh(crate::fixtures::now());
    let _ = entry.key().file_stem();
}
