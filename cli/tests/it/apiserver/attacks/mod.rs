//! Attacks that go through a real kube-apiserver, one file per attack, each named by it.

mod credentials_namespace;
mod external_prefix_spelling_ichor;
