//! Reading users (list, get, the caller's kubeconfig) without any secret, and deleting one with its credentials entry.

use super::*;

#[tokio::test]
async fn deleting_a_user_removes_its_file_and_credentials_entry() {
    let e = env();
    e.cast().await;
    e.api
        .delete_user(req(
            &token("admin", e.clock.now_ts()),
            DeleteUserRequest {
                name: "target".into(),
            },
        ))
        .await
        .unwrap();
    assert!(e.user("target").await.is_none());
    assert!(e.entry("target").await.is_none());
}

#[tokio::test]
async fn list_and_get_show_users_without_any_secret() {
    let e = env();
    e.cast().await;
    let t = token("admin", e.clock.now_ts());
    let list = e
        .api
        .list_users(req(&t, ListUsersRequest {}))
        .await
        .unwrap()
        .into_inner();
    let names: Vec<_> = list.users.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["admin", "nobody", "op", "target", "view"]);
    assert!(list.users.iter().all(|u| u.password_set && !u.must_change));
    let printed = format!("{list:?}");
    assert!(!printed.contains("argon2"), "{printed}");
    let got = e
        .api
        .get_user(req(&t, GetUserRequest { name: "op".into() }))
        .await
        .unwrap()
        .into_inner()
        .user
        .unwrap();
    assert_eq!(got.email, "op@example.com");
    assert_eq!(got.roles, ["operator"]);
}

/// The `server` of the kubeconfig `GetMyKubeconfig` gives the bearer of `t`.
async fn kubeconfig_server(e: &Env, t: &str) -> String {
    let kubeconfig = e
        .api
        .get_my_kubeconfig(req(t, GetMyKubeconfigRequest::default()))
        .await
        .unwrap()
        .into_inner()
        .kubeconfig;
    let doc: serde_yaml::Value = serde_yaml::from_str(&kubeconfig).unwrap();
    doc["clusters"][0]["cluster"]["server"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn get_my_kubeconfig_names_the_talos_cluster_endpoint_unless_kube_api_server_url_is_set() {
    let e = env();
    e.cast().await;
    let t = token("view", e.clock.now_ts());
    assert_eq!(
        kubeconfig_server(&e, &t).await,
        "https://10.0.0.10:6443",
        "unknown: the fallback"
    );
    e.talos_endpoint.apply(&std::collections::BTreeMap::from([(
        "prod".to_owned(),
        "https://cp.prod.example.com:6443/".to_owned(),
    )]));
    assert_eq!(
        kubeconfig_server(&e, &t).await,
        "https://cp.prod.example.com:6443"
    );
    let mut settings = (*e.config_settings.get()).clone();
    settings.kube_api_server_url = Some("https://kube.example.com:6443".into());
    e.config_settings.store(settings);
    assert_eq!(
        kubeconfig_server(&e, &t).await,
        "https://kube.example.com:6443",
        "the override wins"
    );
}

fn two_clusters() -> std::collections::BTreeMap<String, String> {
    std::collections::BTreeMap::from([
        ("east".to_owned(), "https://east.example.com:6443".to_owned()),
        ("west".to_owned(), "https://west.example.com:6443/".to_owned()),
    ])
}

#[tokio::test]
async fn with_several_clusters_and_none_chosen_get_my_kubeconfig_names_the_chart_value_to_set() {
    let e = env();
    e.cast().await;
    let t = token("view", e.clock.now_ts());
    e.talos_endpoint.apply(&two_clusters());
    let refused = e
        .api
        .get_my_kubeconfig(req(&t, GetMyKubeconfigRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert_eq!(
        refused.message(),
        "no kubeconfig can be made: 2 TalosClusters in ichor-system (east, west) and none is chosen for \
         kubeconfigs: set the chart value ichorUI.users.kubeconfigCluster (ichor-issuer \
         --kubeconfig-cluster) to the cluster whose spec.endpoint users reach, or \
         ichorUI.users.kubeAPIServerURL"
    );
    // kubeAPIServerURL still wins: the choice is then not needed.
    let mut settings = (*e.config_settings.get()).clone();
    settings.kube_api_server_url = Some("https://kube.example.com:6443".into());
    e.config_settings.store(settings);
    assert_eq!(kubeconfig_server(&e, &t).await, "https://kube.example.com:6443");
}

#[tokio::test]
async fn the_chosen_cluster_names_the_kubeconfig_server_among_several_and_the_override_still_wins() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(local_store(&dir));
    let e = env_following(
        dir,
        store,
        None,
        ichor_issuer::talos_cluster::ClusterEndpoint::with_choice("prod", Some("west".to_owned())),
    );
    e.cast().await;
    let t = token("view", e.clock.now_ts());
    e.talos_endpoint.apply(&two_clusters());
    assert_eq!(kubeconfig_server(&e, &t).await, "https://west.example.com:6443");
    // The chosen cluster goes away: refused, naming the value, never the fallback.
    e.talos_endpoint.apply(&std::collections::BTreeMap::from([(
        "east".to_owned(),
        "https://east.example.com:6443".to_owned(),
    )]));
    let refused = e
        .api
        .get_my_kubeconfig(req(&t, GetMyKubeconfigRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(
        refused
            .message()
            .contains("TalosCluster \"west\" (ichorUI.users.kubeconfigCluster) does not exist"),
        "{refused:?}"
    );
    let mut settings = (*e.config_settings.get()).clone();
    settings.kube_api_server_url = Some("https://kube.example.com:6443".into());
    e.config_settings.store(settings);
    assert_eq!(
        kubeconfig_server(&e, &t).await,
        "https://kube.example.com:6443",
        "the override wins"
    );
}

#[tokio::test]
async fn with_one_cluster_and_no_choice_get_my_kubeconfig_names_that_one() {
    let e = env();
    e.cast().await;
    let t = token("view", e.clock.now_ts());
    e.talos_endpoint.apply(&std::collections::BTreeMap::from([(
        "west".to_owned(),
        "https://west.example.com:6443".to_owned(),
    )]));
    assert_eq!(kubeconfig_server(&e, &t).await, "https://west.example.com:6443");
}

#[tokio::test]
async fn get_my_kubeconfig_uses_the_settings_and_the_ca_file() {
    let e = env();
    e.cast().await;
    let t = token("view", e.clock.now_ts());
    let plain = e
        .api
        .get_my_kubeconfig(req(&t, GetMyKubeconfigRequest::default()))
        .await
        .unwrap()
        .into_inner()
        .kubeconfig;
    assert!(plain.contains("server: https://10.0.0.10:6443"), "{plain}");
    assert!(plain.contains("name: ichor-view@prod"), "{plain}");
    assert!(!plain.contains("--ca-file") && !plain.contains("tls-server-name"));
    let mut settings = (*e.config_settings.get()).clone();
    settings.kube_api_server_url = Some("https://kube.example.com:6443".into());
    settings.kube_api_tls_server_name = Some("kube-apiserver.prod.internal".into());
    e.config_settings.store(settings);
    let custom = e
        .api
        .get_my_kubeconfig(req(
            &t,
            GetMyKubeconfigRequest {
                ca_file: "/home/view/ca.pem".into(),
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .kubeconfig;
    assert!(
        custom.contains("server: https://kube.example.com:6443"),
        "{custom}"
    );
    assert!(
        custom.contains("tls-server-name: kube-apiserver.prod.internal"),
        "{custom}"
    );
    assert!(
        custom.contains("- --ca-file\n      - /home/view/ca.pem"),
        "{custom}"
    );
}
