#![allow(clippy::unwrap_used)]
use super::*;
use serde_json::json;

fn b64(s: &str) -> String {
    STANDARD.encode(s)
}

fn record(config: Value) -> Value {
    json!({
        "name": "ichor", "version": 3, "namespace": "ichor-system",
        "chart": {
            "metadata": {"apiVersion": "v2", "name": "ichor", "version": "0.1.0", "appVersion": "0.1.0"},
            "templates": [
                {"name": "templates/issuer/deployment.yaml", "data": b64("kind: Deployment\n")},
                {"name": "templates/_helpers.tpl", "data": b64("{{/* x */}}\n")},
            ],
            "files": [{"name": "README.md", "data": b64("# Ichor\n")}],
            "values": {"ichorUI": {"users": {"enabled": false, "externalURL": ""}}, "issuer": {"replicas": 2}},
            "schema": null,
        },
        "config": config,
        "info": {"status": "deployed"},
    })
}

/// What the Kubernetes client hands over for `data.release`: the Secret's base64 (the outer
/// layer, as it travels) is removed, Helm's own base64 remains.
fn as_secret_data(release: &Value) -> Vec<u8> {
    let wire = STANDARD.encode(encode_release(release));
    STANDARD.decode(wire).unwrap()
}

#[test]
fn a_release_record_decodes_through_both_base64_layers_and_gzip() {
    let release = decode_release(&as_secret_data(&record(json!({"issuer": {"replicas": 3}})))).unwrap();
    assert_eq!(release.name, "ichor");
    assert_eq!(release.version, 3);
    assert_eq!(release.chart_version(), "0.1.0");
    assert_eq!(release.chart.templates.len(), 2);
    assert_eq!(release.config["issuer"]["replicas"], 3);
}

#[test]
fn a_plain_json_record_decodes_and_garbage_is_refused() {
    let plain = STANDARD.encode(record(json!({})).to_string());
    assert_eq!(decode_release(plain.as_bytes()).unwrap().name, "ichor");
    assert!(matches!(
        decode_release(b"not base64!"),
        Err(ReleaseError::Base64(_))
    ));
    let broken_gzip = STANDARD.encode([0x1f, 0x8b, 0x08, 0, 1, 2, 3]);
    assert!(matches!(
        decode_release(broken_gzip.as_bytes()),
        Err(ReleaseError::Gzip(_))
    ));
    let not_a_release = STANDARD.encode(b"{\"name\": 1}");
    assert!(matches!(
        decode_release(not_a_release.as_bytes()),
        Err(ReleaseError::Json(_))
    ));
}

#[test]
fn a_release_of_another_chart_is_refused() {
    let mut other = record(json!({}));
    other["chart"]["metadata"]["name"] = "postgres".into();
    assert_eq!(
        decode_release(encode_release(&other).as_bytes()).unwrap_err(),
        ReleaseError::OtherChart("postgres".into())
    );
}

#[test]
fn oversized_records_are_refused_before_and_after_decompression() {
    let huge = vec![b'A'; MAX_COMPRESSED / 3 * 4 + 8];
    assert_eq!(
        decode_release(&huge).unwrap_err(),
        ReleaseError::TooLarge(MAX_COMPRESSED)
    );
    // A small gzip that inflates past the bound (the same bounds, scaled down 1024 times).
    let (max_compressed, max_json) = (MAX_COMPRESSED >> 10, MAX_DECOMPRESSED >> 10);
    let mut padded = record(json!({}));
    padded["chart"]["files"][0]["data"] = b64(&"0".repeat(max_json)).into();
    let bomb = encode_release(&padded);
    assert!(bomb.len() < max_compressed, "{}", bomb.len());
    assert_eq!(
        decode_bounded(bomb.as_bytes(), max_compressed, max_json).unwrap_err(),
        ReleaseError::TooLarge(max_json)
    );
    assert!(decode_bounded(bomb.as_bytes(), max_compressed, max_json * 2).is_ok());
}

fn release(config: Value) -> Release {
    serde_json::from_value(record(config)).unwrap()
}

const URL: &str = "https://ichor.example.com";

#[test]
fn decide_upgrades_an_off_issuer_and_leaves_the_same_url_alone() {
    assert_eq!(decide(&release(json!({})), URL), Ok(Decision::Upgrade));
    assert_eq!(
        decide(
            &release(
                json!({"ichorUI": {"users": {"enabled": false, "externalURL": "https://old.example.com"}}})
            ),
            URL
        ),
        Ok(Decision::Upgrade),
        "an issuer that is off can take a new URL"
    );
    let on = json!({"ichorUI": {"users": {"enabled": true, "externalURL": "https://ichor.example.com/"}}});
    assert_eq!(decide(&release(on), URL), Ok(Decision::AlreadyOn));
    let on_as_string = json!({"ichorUI": {"users": {"enabled": "true", "externalURL": URL}}});
    assert_eq!(decide(&release(on_as_string), URL), Ok(Decision::AlreadyOn));
}

#[test]
fn decide_refuses_an_issuer_that_is_on_with_another_url() {
    let on = json!({"ichorUI": {"users": {"enabled": true, "externalURL": "https://old.example.com"}}});
    assert_eq!(
        decide(&release(on), URL),
        Err(OtherUrl {
            current: "https://old.example.com".into()
        })
    );
}

#[test]
fn decide_reads_the_chart_defaults_under_the_user_config() {
    let mut r = release(json!({"ichorUI": {"users": {"externalURL": URL}}}));
    r.chart.values["ichorUI"]["users"]["enabled"] = true.into();
    assert_eq!(decide(&r, URL), Ok(Decision::AlreadyOn));
}

#[test]
fn the_users_url_printed_in_a_command_is_the_release_s_when_on_and_well_formed() {
    let on = |url: &str| release(json!({"ichorUI": {"users": {"enabled": true, "externalURL": url}}}));
    assert_eq!(users_url(&on("https://ichor.example.com/")), Some(URL.to_owned()));
    assert_eq!(
        users_url(&release(json!({"ichorUI": {"users": {"externalURL": URL}}}))),
        None
    );
    for odd in [
        "http://ichor.example.com",
        "https://ichor.example.com/a b",
        "https://x.example/?q=1",
        "",
    ] {
        assert_eq!(users_url(&on(odd)), None, "{odd:?}");
    }
}

#[test]
fn chart_paths_must_stay_inside_the_chart_directory() {
    assert_eq!(
        safe_path("templates/issuer/deployment.yaml").unwrap(),
        PathBuf::from("templates/issuer/deployment.yaml")
    );
    for bad in [
        "",
        "/etc/passwd",
        "../x",
        "templates/../../x",
        "./templates/x",
        "templates\\..\\x",
    ] {
        assert!(safe_path(bad).is_err(), "{bad:?}");
    }
    let mut r = release(json!({}));
    r.chart.templates.push(ChartFile {
        name: "../../.bashrc".into(),
        data: b64("x"),
    });
    assert_eq!(
        chart_files(&r.chart).unwrap_err(),
        ReleaseError::UnsafePath("../../.bashrc".into())
    );
}

#[test]
fn the_chart_is_written_back_as_a_helm_chart_directory() {
    let dir = tempfile::tempdir().unwrap();
    write_chart(&release(json!({})).chart, dir.path()).unwrap();
    let chart: Value =
        serde_yaml::from_str(&std::fs::read_to_string(dir.path().join("Chart.yaml")).unwrap()).unwrap();
    assert_eq!(chart["name"], "ichor");
    assert_eq!(chart["version"], "0.1.0");
    let values: Value =
        serde_yaml::from_str(&std::fs::read_to_string(dir.path().join("values.yaml")).unwrap()).unwrap();
    assert_eq!(values["issuer"]["replicas"], 2);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("templates/issuer/deployment.yaml")).unwrap(),
        "kind: Deployment\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("README.md")).unwrap(),
        "# Ichor\n"
    );
    assert!(!dir.path().join("values.schema.json").exists());
}

#[test]
fn a_chart_with_dependencies_is_refused() {
    let mut r = release(json!({}));
    r.chart.metadata["dependencies"] = json!([{"name": "redis", "version": "1"}]);
    assert_eq!(chart_files(&r.chart).unwrap_err(), ReleaseError::Dependencies);
}

#[test]
fn a_record_is_checked_against_the_name_labels_and_namespace_helm_writes() {
    let r = release(json!({}));
    let labels = |owner: &str, name: &str, version: &str| -> std::collections::BTreeMap<String, String> {
        [
            ("owner", owner),
            ("name", name),
            ("version", version),
            ("status", "deployed"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    };
    let good = labels("helm", "ichor", "3");
    assert_eq!(
        check_record("sh.helm.release.v1.ichor.v3", &good, "ichor-system", &r),
        Ok(())
    );
    for (secret, labels, namespace, what) in [
        ("forged", good.clone(), "ichor-system", "its name is not"),
        (
            "sh.helm.release.v1.ichor.v9",
            good.clone(),
            "ichor-system",
            "its name is not",
        ),
        (
            "sh.helm.release.v1.ichor.v3",
            labels("someone", "ichor", "3"),
            "ichor-system",
            "owner",
        ),
        (
            "sh.helm.release.v1.ichor.v3",
            labels("helm", "other", "3"),
            "ichor-system",
            "label name",
        ),
        (
            "sh.helm.release.v1.ichor.v3",
            labels("helm", "ichor", "4"),
            "ichor-system",
            "label version",
        ),
        (
            "sh.helm.release.v1.ichor.v3",
            good.clone(),
            "default",
            "namespace",
        ),
    ] {
        let e = check_record(secret, &labels, namespace, &r).unwrap_err();
        assert!(matches!(e, ReleaseError::NotHelmsRecord { .. }), "{e:?}");
        assert!(e.to_string().contains(what), "{secret} {namespace}: {e}");
    }
}

#[test]
fn the_rollout_clusters_are_the_user_s_over_the_chart_s_and_a_new_one_is_appended_once() {
    let mut r = release(json!({}));
    r.chart.values = json!({"controller": {"rollout": {"clusters": []}}});
    assert!(rollout_clusters(&r).is_empty());
    assert_eq!(add_rollout_cluster(&r, "prod"), Some(vec!["prod".to_owned()]));
    r.config = json!({"controller": {"replicas": 1, "rollout": {"clusters": ["staging"]}}});
    assert_eq!(rollout_clusters(&r), vec!["staging".to_owned()]);
    assert_eq!(
        add_rollout_cluster(&r, "prod"),
        Some(vec!["staging".to_owned(), "prod".to_owned()])
    );
    r.config = json!({"controller": {"rollout": {"clusters": ["staging", "prod"]}}});
    assert_eq!(
        add_rollout_cluster(&r, "prod"),
        None,
        "listed already: nothing to set"
    );
}
