//! `ichor init --ui-url` reaches `helm upgrade --set-string ichorUI.users.externalURL=<url>`.
//! Helm's `--set` parser ends a value at a comma, so a URL such as
//! `https://ichor.example.com/,controller.foo=bar` would set a second value of the attacker's
//! choosing in the release (any value of the chart: an image, an RBAC switch). The URL must
//! reach helm as one value, verbatim — proven with the real helm rendering a chart — and a URL
//! not in its normal form (a backslash, an upper-case host, a space, user info) is refused.

use std::path::Path;
use std::process::Command;

use ichor_cli::commands::init::{check_ui_url, helm::Helm};
use ichor_testkit::consumers::{KubeBinary, require};

use crate::user_support::text;

const EVIL: &str = "https://ichor.example.com/,controller.foo=bar,ichorUI.users.enabled=false";

/// The `--set-string` and `--set` pairs of the upgrade `ichor init` runs for `url`.
fn value_args(url: &str) -> Vec<String> {
    let args = Helm::upgrade_args("ichor", Path::new("/chart"), url, None);
    let args: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    args.windows(2)
        .filter(|w| w[0] == "--set-string" || w[0] == "--set")
        .flat_map(|w| w.to_vec())
        .collect()
}

/// The values `ichor init` passes for [`EVIL`], after [`check_ui_url`] took it as written.
fn evil_values() -> Vec<String> {
    let url = check_ui_url(EVIL).unwrap();
    assert_eq!(url, EVIL, "a URL in its normal form is taken as written");
    value_args(&url)
}

#[test]
fn a_comma_in_the_ui_url_is_escaped_in_the_set_string_value() {
    assert_eq!(
        evil_values(),
        [
            "--set-string",
            r"ichorUI.users.externalURL=https://ichor.example.com/\,controller.foo=bar\,ichorUI.users.enabled=false",
            "--set",
            "ichorUI.users.enabled=true",
        ]
    );
}

#[test]
#[ignore = "needs helm: hack/kube/build.sh"]
fn a_comma_in_the_ui_url_reaches_helm_as_part_of_one_value() {
    let values = evil_values();
    let Some(helm) = require(KubeBinary::Helm) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("chart");
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: probe\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(
        chart.join("values.yaml"),
        "ichorUI:\n  users:\n    enabled: false\n    externalURL: \"\"\ncontroller: {}\n",
    )
    .unwrap();
    std::fs::write(
        chart.join("templates/probe.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\ndata:\n  \
         url: {{ .Values.ichorUI.users.externalURL | quote }}\n  \
         enabled: {{ .Values.ichorUI.users.enabled | quote }}\n  \
         controller: {{ .Values.controller | toJson | quote }}\n",
    )
    .unwrap();
    let home = dir.path().join("home");
    let out = Command::new(helm)
        .args(["template", "probe"])
        .arg(&chart)
        .args(&values)
        .env("HOME", &home)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rendered: serde_yaml::Value = serde_yaml::from_slice(&out.stdout).unwrap();
    assert_eq!(rendered["data"]["url"], EVIL, "{}", text(&out.stdout));
    assert_eq!(rendered["data"]["enabled"], "true");
    assert_eq!(rendered["data"]["controller"], "{}");
}

#[test]
fn a_ui_url_not_in_its_normal_form_is_refused_before_anything_runs() {
    for odd in [
        r"https://ichor.example.com\,controller.foo=bar",
        "https://ichor.example.com/ ,controller.foo=bar",
        "https://ICHOR.example.com,controller.foo=bar",
        "https://user:pw@ichor.example.com",
        "https://ichor.example.com#,controller.foo=bar",
        "https://ichor.example.com?a=b,controller.foo=bar",
    ] {
        assert!(check_ui_url(odd).is_err(), "{odd:?} was accepted");
    }
}
