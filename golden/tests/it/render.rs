//! Each cluster shape rendered as `ichor render` renders it: the `KubeAuthenticationConfig`
//! document (and so the `AuthenticationConfiguration`), each machine's classification and
//! condition, and the rollout plan; or the errors, each naming its field.

use ichor_golden::{fixture, shapes};
use ichor_renderers::cluster::render_manifests;
use ichor_server::manifest_files::load_dir;

fn report(shape: &str) -> ichor_renderers::cluster::RenderReport {
    let manifests = load_dir(&fixture(shape)).unwrap_or_else(|e| panic!("fixture {shape} must load: {e}"));
    render_manifests(&manifests)
}

#[test]
fn every_fixture_shape_has_a_snapshot() {
    let expected = [
        "below-contract",
        "ichor-and-externals",
        "ichor-only",
        "invalid-config",
        "invalid-prefix",
        "second-factor-roles",
        "several-audiences",
        "single-control-plane",
    ];
    assert_eq!(shapes(), expected, "a new fixture needs a snapshot test below");
}

macro_rules! golden {
    ($test:ident, $shape:literal, ok = $ok:literal) => {
        #[test]
        fn $test() {
            let r = report($shape);
            assert_eq!(r.is_ok(), $ok, "{r}");
            insta::assert_yaml_snapshot!($shape, r);
            insta::assert_snapshot!(concat!($shape, ".txt"), r.to_string());
        }
    };
}

golden!(
    ichor_issuer_only_with_one_machine_up_to_date,
    "ichor-only",
    ok = true
);
golden!(
    ichor_issuer_and_three_external_providers,
    "ichor-and-externals",
    ok = true
);
golden!(
    required_roles_add_second_factor_rules_and_restart_every_control_plane,
    "second-factor-roles",
    ok = true
);
golden!(
    an_external_provider_with_several_audiences_matches_any,
    "several-audiences",
    ok = true
);
golden!(
    a_single_control_plane_warns_that_the_api_goes_away,
    "single-control-plane",
    ok = true
);
golden!(
    a_contract_below_v1_14_renders_nothing,
    "below-contract",
    ok = false
);
golden!(
    refused_external_prefixes_render_nothing,
    "invalid-prefix",
    ok = false
);
golden!(
    an_invalid_configuration_never_leaves_the_renderer,
    "invalid-config",
    ok = false
);

#[test]
fn the_installation_s_second_factor_policy_reaches_ichor_s_entry_in_sorted_order() {
    let r = report("second-factor-roles");
    let rules = &r.clusters[0].document.as_ref().unwrap()["configuration"]["jwt"][0]["claimValidationRules"];
    let messages: Vec<&str> = rules
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        messages,
        [
            "ichor:admin needs a second factor",
            "ichor:operator needs a second factor"
        ]
    );
    // The same cluster without the policy renders what it rendered before, which the machine
    // that was up to date there runs: with the policy it must restart.
    let before = report("ichor-only");
    assert_ne!(r.clusters[0].sha256, before.clusters[0].sha256);
    let cp1 = |r: &ichor_renderers::cluster::RenderReport| {
        r.clusters[0]
            .machines
            .iter()
            .find(|m| m.name == "prod-cp-1")
            .and_then(|m| m.condition.clone())
    };
    assert!(cp1(&before).is_none_or(|c| c.status), "{before}");
    assert!(cp1(&r).is_some_and(|c| !c.status), "{r}");
}

#[test]
fn an_external_provider_with_several_audiences_gets_match_any() {
    let r = report("several-audiences");
    let issuer = &r.clusters[0].document.as_ref().unwrap()["configuration"]["jwt"][0]["issuer"];
    assert_eq!(issuer["audienceMatchPolicy"], "MatchAny");
}

#[test]
fn a_machine_whose_applied_hash_matches_is_not_restarted() {
    let r = report("ichor-only");
    let c = &r.clusters[0];
    let plan = c.rollout.as_ref().unwrap();
    let machines: Vec<&str> = plan.steps.iter().map(|s| s.machine.as_str()).collect();
    assert_eq!(machines, ["prod-cp-2", "prod-cp-3"]);
    assert!(
        c.machines
            .iter()
            .find(|m| m.name == "prod-cp-1")
            .unwrap()
            .condition
            .is_none()
    );
}
