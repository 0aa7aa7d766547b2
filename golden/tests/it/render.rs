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
