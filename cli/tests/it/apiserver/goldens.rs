//! Every fixture's configuration meets a real kube-apiserver at start-up: what `ichor render`
//! renders starts and serves; what our validator refuses, the apiserver refuses too (it exits
//! without serving), and its log names every error our validator names, word for word.
//!
//! Each fixture's AuthenticationConfiguration is what the builder makes of its `TalosCluster`
//! and trust ConfigMap, before validation; for the fixtures that render, it is checked to be
//! exactly the `configuration` of `ichor render -o json`.
//!
//! The cluster's `spec.endpoint` (its service-account issuer on Talos) becomes a second
//! `--service-account-issuer` of the test apiserver. kube-apiserver 1.37 checks the
//! service-account issuers as disallowed JWT issuers only when it *reloads* the file: at
//! start-up it validates before it has read them (`pkg/kubeapiserver/options/authentication.go`,
//! `ToAuthenticationConfig`), so a configuration naming its own service-account issuer starts and
//! is refused at the next reload. Our renderer refuses it always. The test holds the real
//! apiserver to both: start-up against our verdict without disallowed issuers, and a reload on
//! a running apiserver against our verdict with them.

use std::time::{Duration, Instant};

use ichor_renderers::authn::{self, IchorTrust, ValidationOptions};
use ichor_renderers::cluster::installations_second_factor;
use ichor_renderers::trust::{IssuerTrust, NAMESPACE, TRUST_CONFIGMAP};
use ichor_server::manifest_files::load_dir;
use ichor_testkit::consumers::repo_root;
use ichor_testkit::control_plane::{ControlPlane, Options, SERVICE_ACCOUNT_ISSUER};

use crate::support::{ichor, text};

/// How long a refused configuration may take to stop the apiserver.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a valid configuration may take to serve.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

struct Case {
    fixture: String,
    cluster: String,
    endpoint: String,
    yaml: String,
    /// Our errors with the endpoint as a disallowed issuer (what `ichor render` decides), as
    /// `utilerrors.NewAggregate(…).Error()` prints them; empty when valid.
    ours: String,
    /// Our errors without disallowed issuers (what the apiserver decides at start-up).
    ours_at_start: String,
    /// Our errors with both service-account issuers of the test apiserver as disallowed
    /// issuers (what it decides on reload).
    ours_on_reload: String,
    /// The configuration without its authenticators: a running apiserver's first file, so that
    /// the reload changes only `jwt` (a changed `anonymous` is refused on reload).
    yaml_without_jwt: String,
    rendered: bool,
}

fn cases() -> Vec<Case> {
    let fixtures = repo_root().join("golden/fixtures");
    let mut names: Vec<String> = std::fs::read_dir(&fixtures)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let dir = fixtures.join(&name);
        let manifests = load_dir(&dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        let trust = manifests
            .configmaps
            .iter()
            .find(|cm| {
                cm.metadata.name.as_deref() == Some(TRUST_CONFIGMAP)
                    && cm.metadata.namespace.as_deref() == Some(NAMESPACE)
            })
            .map(|cm| IchorTrust::from(&IssuerTrust::from_configmap(cm).unwrap()));
        let rendered = rendered_configurations(&dir);
        for cluster in &manifests.clusters {
            let cluster_name = cluster.metadata.name.clone().unwrap();
            let Some(spec) = cluster.spec.authentication.as_ref() else {
                continue;
            };
            let contract_ok = cluster
                .spec
                .version_contract
                .is_some_and(|c| c.supports_structured_authentication());
            if !contract_ok {
                // Below the contract nothing is rendered and Talos gets no document.
                assert!(
                    rendered.iter().all(|(c, _)| c != &cluster_name),
                    "{name}: rendered below contract"
                );
                continue;
            }
            let second_factor = installations_second_factor(&manifests.installations);
            let config = authn::build(spec, trust.as_ref(), &second_factor);
            let endpoint = cluster.spec.endpoint.clone();
            let options = ValidationOptions {
                disallowed_issuers: if endpoint.is_empty() {
                    vec![]
                } else {
                    vec![endpoint.clone()]
                },
            };
            let ours = authn::aggregate(&authn::validate(&config, &options));
            let ours_at_start = authn::aggregate(&authn::validate(&config, &ValidationOptions::default()));
            let reload_options = ValidationOptions {
                disallowed_issuers: vec![endpoint.clone(), SERVICE_ACCOUNT_ISSUER.to_owned()],
            };
            let ours_on_reload = authn::aggregate(&authn::validate(&config, &reload_options));
            let mut without_jwt = config.clone();
            without_jwt.jwt.clear();
            let config_json = serde_json::to_value(&config).unwrap();
            let from_render = rendered
                .iter()
                .find(|(c, _)| c == &cluster_name)
                .map(|(_, v)| v.clone());
            if let Some(r) = &from_render {
                assert_eq!(
                    r, &config_json,
                    "{name}/{cluster_name}: ichor render's configuration is the built one"
                );
            }
            out.push(Case {
                fixture: name.clone(),
                cluster: cluster_name,
                endpoint,
                yaml: serde_yaml::to_string(&config).unwrap(),
                ours,
                ours_at_start,
                ours_on_reload,
                yaml_without_jwt: serde_yaml::to_string(&without_jwt).unwrap(),
                rendered: from_render.is_some(),
            });
        }
    }
    out
}

/// `(cluster name, configuration)` of every cluster `ichor render --dir DIR -o json` rendered.
fn rendered_configurations(dir: &std::path::Path) -> Vec<(String, serde_json::Value)> {
    let home = tempfile::tempdir().unwrap();
    let out = ichor(
        home.path(),
        &["render", "--dir", dir.to_str().unwrap(), "-o", "json"],
    );
    let report: serde_json::Value = serde_json::from_str(&text(&out.stdout))
        .unwrap_or_else(|e| panic!("ichor render -o json: {e}: {}", text(&out.stderr)));
    report["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| !c["document"].is_null())
        .map(|c| {
            let name = c["cluster"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_owned();
            (name, c["document"]["configuration"].clone())
        })
        .collect()
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn every_fixture_configuration_is_decided_by_a_real_kube_apiserver_as_by_ours() {
    let Some(mut plane) = ControlPlane::start(Options::default()).unwrap() else {
        return;
    };
    let cases = cases();
    assert!(
        cases.iter().filter(|c| c.rendered).count() >= 5,
        "the valid fixtures render"
    );
    assert!(
        cases.iter().filter(|c| !c.ours.is_empty()).count() >= 2,
        "the invalid fixtures are refused by ours"
    );
    for case in cases.iter().filter(|c| c.rendered) {
        assert!(
            case.ours.is_empty(),
            "{}: rendered although ours refuses it",
            case.fixture
        );
    }
    for case in &cases {
        let what = format!("{}/{}", case.fixture, case.cluster);
        plane.stop_apiserver(0).unwrap();
        plane.write_authentication_config(0, &case.yaml).unwrap();
        plane.set_extra_args(0, service_account_issuer(case));
        let log_before = plane.log(0).len();
        if case.ours_at_start.is_empty() {
            let took = plane.start_apiserver(0, READY_TIMEOUT).unwrap_or_else(|e| {
                panic!("{what}: valid for ours, but the real apiserver did not serve: {e:#}")
            });
            eprintln!("{what}: served after {took:?}");
            assert_eq!(plane.readyz(0).unwrap().status, 200);
        } else {
            plane.spawn_apiserver_unready(0).unwrap();
            let deadline = Instant::now() + REFUSAL_TIMEOUT;
            let status = loop {
                if let Some(status) = plane.apiserver_exited(0) {
                    break status;
                }
                assert!(
                    plane.readyz(0).map(|r| r.status != 200).unwrap_or(true),
                    "{what}: our validator refuses it ({}) but the real apiserver serves",
                    case.ours_at_start
                );
                assert!(
                    Instant::now() < deadline,
                    "{what}: the real apiserver neither served nor exited"
                );
                std::thread::sleep(Duration::from_millis(200));
            };
            assert!(!status.success(), "{what}: {status}");
            let log = &plane.log_unquoted_since(0, log_before);
            let expected = format!("invalid authentication configuration: {}\"", case.ours_at_start);
            assert!(
                log.contains(&expected),
                "{what}: the apiserver's refusal is not ours, {expected:?}; it said:\n{log}"
            );
            eprintln!("{what}: refused at start-up by both: {}", case.ours_at_start);
        }
    }

    // The disallowed issuers, on reload: a running apiserver with the endpoint as a
    // service-account issuer refuses the configuration that names it, as ours does.
    for case in cases.iter().filter(|c| c.ours != c.ours_at_start) {
        let what = format!("{}/{}", case.fixture, case.cluster);
        plane.stop_apiserver(0).unwrap();
        plane
            .write_authentication_config(0, &case.yaml_without_jwt)
            .unwrap();
        plane.set_extra_args(0, service_account_issuer(case));
        plane.start_apiserver(0, READY_TIMEOUT).unwrap();
        let log_before = plane.log(0).len();
        plane.write_authentication_config(0, &case.yaml).unwrap();
        let deadline = Instant::now() + Duration::from_secs(150);
        let said = loop {
            let log = plane.log_unquoted_since(0, log_before);
            if let Some(line) = log
                .lines()
                .find(|l| l.contains("failed to validate authentication config"))
            {
                break line.to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "{what}: the running apiserver did not refuse the reloaded file"
            );
            std::thread::sleep(Duration::from_millis(200));
        };
        let expected = format!("err=\"{}\"", case.ours_on_reload);
        assert!(
            said.contains(&expected),
            "{what}: the reload refusal is not ours, {expected:?}; it said:\n{said}"
        );
        assert_eq!(
            plane.readyz(0).unwrap().status,
            200,
            "{what}: the refused reload stopped the apiserver"
        );
        eprintln!("{what}: refused on reload by both: {}", case.ours_on_reload);
    }
    assert!(
        cases.iter().any(|c| c.ours != c.ours_at_start),
        "a fixture names its own service-account issuer"
    );
}

fn service_account_issuer(case: &Case) -> Vec<String> {
    if case.endpoint.is_empty() {
        vec![]
    } else {
        vec![format!("--service-account-issuer={}", case.endpoint)]
    }
}
