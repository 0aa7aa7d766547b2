//! JSON paths of findings, written the way a user reads them in `kubectl explain` style:
//! `spec.cni.cilium.values.bpf.masquerade`, `…nodeSelector["kubernetes.io/os"]`, `…items[2]`.

/// The path of the Cilium values layer inside a `TalosCluster`.
pub const VALUES_FIELD: &str = "spec.cni.cilium.values";
/// The path of the kube-proxy mode inside a `TalosCluster`.
pub const KUBE_PROXY_FIELD: &str = "spec.cni.kubeProxy";
/// The path of the tunnel mode inside a `TalosCluster`.
pub const TUNNEL_FIELD: &str = "spec.cni.tunnel";

/// Appends an object key to `base`: `.key` for a plain identifier, `["key"]` (JSON-quoted)
/// for anything else, so a key holding `.` or `/` cannot be mistaken for two levels.
pub fn push_key(base: &str, key: &str) -> String {
    if is_plain(key) {
        format!("{base}.{key}")
    } else {
        // Quoting a `str` as JSON cannot fail; the fallback keeps this total anyway.
        let quoted = serde_json::to_string(key).unwrap_or_else(|_| String::from("\"?\""));
        format!("{base}[{quoted}]")
    }
}

/// Appends an array index to `base`: `[i]`.
pub fn push_index(base: &str, index: usize) -> String {
    format!("{base}[{index}]")
}

/// The path of a dotted chart key (`bpf.masquerade`) under the values field.
pub fn values_key(dotted: &str) -> String {
    dotted
        .split('.')
        .fold(VALUES_FIELD.to_owned(), |path, key| push_key(&path, key))
}

/// A key that reads unambiguously after a dot: ASCII letters, digits, `_` and `-`, not empty.
fn is_plain(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_plain_keys_with_dots_and_label_keys_in_quoted_brackets() {
        assert_eq!(
            values_key("bpf.masquerade"),
            "spec.cni.cilium.values.bpf.masquerade"
        );
        assert_eq!(
            push_key(&values_key("nodeSelector"), "kubernetes.io/os"),
            "spec.cni.cilium.values.nodeSelector[\"kubernetes.io/os\"]"
        );
        assert_eq!(push_key("a", ""), "a[\"\"]");
        assert_eq!(push_index("a.b", 3), "a.b[3]");
    }
}
