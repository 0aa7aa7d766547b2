//! The kubeconfig the `ichor` CLI reads (`KUBECONFIG` or `~/.kube/config`, for
//! `ichor user create --bootstrap`, `ichor init` and `ichor config apply`): the CLI hands it to
//! `kube::Client::try_default`, which parses it with `Kubeconfig::from_yaml` (multi-document
//! YAML, merged) and resolves the current context, cluster and user with
//! `Config::from_custom_kubeconfig`. Both run here on the input, as the CLI's client would.
//!
//! File references (`certificate-authority`, `client-certificate`, `client-key`,
//! `tokenFile`) are dropped before the resolution, so the fuzzer reads no file of the machine;
//! the inline `*-data` fields are decoded as usual.
//!
//! Properties: no panic; an accepted kubeconfig serialises to JSON (which is YAML) that parses
//! back to the same kubeconfig; a resolved configuration has the cluster URL of the current
//! context's cluster.

use std::sync::OnceLock;

use kube::config::{KubeConfigOptions, Kubeconfig};

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    })
}

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(mut kubeconfig) = Kubeconfig::from_yaml(text) else {
        return;
    };
    let json = serde_json::to_value(&kubeconfig).expect("a kubeconfig serialises");
    let back = Kubeconfig::from_yaml(&json.to_string()).expect("a serialised kubeconfig parses");
    assert_eq!(
        serde_json::to_value(&back).expect("serialise"),
        json,
        "parse(render(x)) != x"
    );
    for cluster in kubeconfig.clusters.iter_mut().filter_map(|c| c.cluster.as_mut()) {
        cluster.certificate_authority = None;
    }
    for user in kubeconfig
        .auth_infos
        .iter_mut()
        .filter_map(|u| u.auth_info.as_mut())
    {
        user.client_certificate = None;
        user.client_key = None;
        user.token_file = None;
    }
    let server = kubeconfig
        .current_context
        .as_ref()
        .and_then(|name| kubeconfig.contexts.iter().find(|c| &c.name == name))
        .and_then(|c| c.context.as_ref())
        .and_then(|c| kubeconfig.clusters.iter().find(|k| k.name == c.cluster))
        .and_then(|k| k.cluster.as_ref())
        .and_then(|k| k.server.clone());
    let resolved = runtime().block_on(kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &KubeConfigOptions::default(),
    ));
    if let Ok(config) = resolved {
        let server = server.expect("a resolved configuration has its cluster's server");
        assert_eq!(
            config.cluster_url,
            server.parse::<axum::http::Uri>().expect("the server parsed once"),
            "the cluster URL is the current context's cluster's server"
        );
    }
}
