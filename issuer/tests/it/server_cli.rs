//! `ichor-issuer` flags: defaults, environment variables, and refusals naming the flag.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use clap::Parser as _;
use ichor_issuer::cli::{Config, ConfigError, ExternalTls, Flags, StoreConfig};
use ichor_server::logging::LogFormat;
use ichor_server::tls::PairFiles;
use jiff::SignedDuration;

fn parse(extra: &[&str]) -> Result<Config, String> {
    let mut argv = vec!["ichor-issuer"];
    argv.extend_from_slice(extra);
    Flags::try_parse_from(argv)
        .map_err(|e| e.to_string())?
        .validate()
        .map_err(|e| e.to_string())
}

fn with_url(extra: &[&str]) -> Result<Config, String> {
    let mut argv = vec!["--external-url", "https://ichor.example.com"];
    argv.extend_from_slice(extra);
    parse(&argv)
}

#[test]
fn the_defaults_serve_the_ichor_leaf_on_8443_and_8444_with_the_kubernetes_store() {
    let c = with_url(&[]).unwrap();
    assert_eq!(c.issuer, "https://ichor.example.com");
    assert_eq!(c.listen.to_string(), "0.0.0.0:8443");
    assert_eq!(c.internal_listen.to_string(), "0.0.0.0:8444");
    assert_eq!(c.metrics_listen.to_string(), "0.0.0.0:9090");
    assert_eq!(c.external_tls, ExternalTls::IchorLeaf);
    assert_eq!(c.ichor_tls, PairFiles::in_secret_dir("/var/run/ichor/oidc-tls"));
    assert_eq!(
        c.keys_file.to_str(),
        Some("/var/run/ichor/oidc-signing/keys.json")
    );
    assert_eq!(c.store, StoreConfig::Kube);
    assert_eq!(c.token_ttl, SignedDuration::from_mins(5));
    assert_eq!(c.refresh_lifetime, SignedDuration::from_hours(12));
    assert!(c.trusted_proxies.is_empty());
    assert_eq!(c.log_format, LogFormat::Text);
}

#[test]
fn the_external_url_is_required() {
    let err = parse(&[]).unwrap_err();
    assert!(err.contains("--external-url"), "{err}");
}

#[test]
fn refuses_an_external_url_that_is_not_https_naming_the_flag() {
    for (url, expect) in [
        ("http://ichor.example.com", "must use https"),
        ("ichor.example.com", "not an absolute URL"),
        ("https://ichor.example.com/?a=b", "query or a fragment"),
        ("https://user:pw@ichor.example.com", "a user name, a password"),
    ] {
        let err = parse(&["--external-url", url]).unwrap_err();
        assert!(
            err.starts_with("--external-url") && err.contains(expect),
            "{url}: {err}"
        );
    }
}

#[test]
fn the_issuer_is_the_external_url_without_its_trailing_slash() {
    let c = parse(&["--external-url", "https://example.com/ichor/"]).unwrap();
    assert_eq!(c.issuer, "https://example.com/ichor");
}

#[test]
fn the_operator_certificate_needs_both_files() {
    let err = with_url(&["--tls-cert-file", "/c.crt"]).unwrap_err();
    assert_eq!(err, ConfigError::HalfOperatorPair.to_string());
    let c = with_url(&["--tls-cert-file", "/c.crt", "--tls-key-file", "/c.key"]).unwrap();
    assert_eq!(
        c.external_tls,
        ExternalTls::Operator(PairFiles {
            cert: "/c.crt".into(),
            key: "/c.key".into()
        })
    );
}

#[test]
fn the_local_store_needs_its_two_directories_and_the_kube_store_refuses_them() {
    let err = with_url(&["--store", "local", "--local-users-dir", "/u"]).unwrap_err();
    assert_eq!(err, "--store local needs --local-state-dir");
    let c = with_url(&[
        "--store",
        "local",
        "--local-users-dir",
        "/u",
        "--local-state-dir",
        "/s",
    ])
    .unwrap();
    assert_eq!(
        c.store,
        StoreConfig::Local {
            users_dir: "/u".into(),
            state_dir: "/s".into()
        }
    );
    let err = with_url(&["--local-users-dir", "/u"]).unwrap_err();
    assert_eq!(err, "--local-users-dir is only used with --store local");
}

#[test]
fn durations_parse_and_are_bounded_naming_the_flag() {
    let c = with_url(&["--token-ttl", "15m", "--refresh-lifetime", "720h"]).unwrap();
    assert_eq!(c.token_ttl, SignedDuration::from_mins(15));
    assert_eq!(c.refresh_lifetime, SignedDuration::from_hours(720));
    let c = with_url(&["--token-ttl", "90s"]).unwrap();
    assert_eq!(c.token_ttl, SignedDuration::from_secs(90));

    let err = with_url(&["--token-ttl", "16m"]).unwrap_err();
    assert_eq!(
        err,
        "--token-ttl \"16m\" is out of range; it must be from 1m to 15m"
    );
    let err = with_url(&["--token-ttl", "59s"]).unwrap_err();
    assert!(err.starts_with("--token-ttl \"59s\" is out of range"), "{err}");
    let err = with_url(&["--refresh-lifetime", "721h"]).unwrap_err();
    assert!(
        err.starts_with("--refresh-lifetime \"721h\" is out of range"),
        "{err}"
    );
    let err = with_url(&["--refresh-lifetime", "59m"]).unwrap_err();
    assert!(err.starts_with("--refresh-lifetime"), "{err}");
    let err = with_url(&["--token-ttl", "five minutes"]).unwrap_err();
    assert!(
        err.starts_with("--token-ttl \"five minutes\" is not a duration"),
        "{err}"
    );
}

#[test]
fn trusted_proxies_repeat_and_a_bad_one_names_the_flag() {
    let c = with_url(&["--trusted-proxy", "10.0.0.0/8", "--trusted-proxy", "fd00::/8"]).unwrap();
    assert_eq!(
        c.trusted_proxies
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["10.0.0.0/8", "fd00::/8"]
    );
    let err = with_url(&["--trusted-proxy", "10.0.0.1/8"]).unwrap_err();
    assert!(
        err.starts_with("--trusted-proxy: 10.0.0.1/8 has host bits set"),
        "{err}"
    );
}

#[test]
fn the_two_listeners_need_different_addresses() {
    let err = with_url(&["--listen", "0.0.0.0:8444"]).unwrap_err();
    assert!(
        err.starts_with("--listen and --internal-listen are both 0.0.0.0:8444"),
        "{err}"
    );
}

#[test]
fn the_metrics_listener_needs_an_address_of_its_own() {
    for (flag, addr) in [
        ("--listen", "0.0.0.0:8443"),
        ("--internal-listen", "0.0.0.0:8444"),
    ] {
        let err = with_url(&["--metrics-listen", addr]).unwrap_err();
        assert!(
            err.starts_with(&format!("--metrics-listen and {flag} are both {addr}")),
            "{err}"
        );
    }
    let c = with_url(&["--metrics-listen", "127.0.0.1:9100"]).unwrap();
    assert_eq!(c.metrics_listen.to_string(), "127.0.0.1:9100");
}

#[test]
fn unknown_store_and_log_format_values_are_refused_by_clap() {
    assert!(with_url(&["--store", "etcd"]).unwrap_err().contains("--store"));
    assert!(
        with_url(&["--log-format", "xml"])
            .unwrap_err()
            .contains("--log-format")
    );
    assert_eq!(
        with_url(&["--log-format", "json"]).unwrap().log_format,
        LogFormat::Json
    );
}

#[test]
fn every_flag_has_an_environment_variable_and_help_shows_examples() {
    use clap::CommandFactory as _;
    let cmd = Flags::command();
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if id == "help" || id == "version" {
            continue;
        }
        let env = arg
            .get_env()
            .unwrap_or_else(|| panic!("--{id} has no environment variable"));
        assert!(
            env.to_string_lossy().starts_with("ICHOR_ISSUER_"),
            "--{id}: {env:?}"
        );
    }
    let help = Flags::command().render_long_help().to_string();
    assert!(
        help.contains("Examples:") && help.contains("--tls-cert-file /etc/ichor"),
        "{help}"
    );
}

/// All the issuer's flags (the external provider's among them), validated as the binary does.
fn issuer_args(extra: &[&str]) -> Result<Config, String> {
    let mut argv = vec!["ichor-issuer", "--external-url", "https://ichor.example.com"];
    argv.extend_from_slice(extra);
    ichor_issuer::cli::IssuerArgs::try_parse_from(argv)
        .map_err(|e| e.to_string())?
        .validate()
        .map_err(|e| e.to_string())
}

#[test]
fn the_external_provider_flags_build_its_configuration_and_each_refusal_names_its_flag() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("idp-ca.pem");
    std::fs::write(&ca, ichor_testkit::pki::TestCa::new("idp").unwrap().pem).unwrap();
    let c = issuer_args(&[
        "--external-issuer-url",
        "https://idp.example.com/realms/corp",
        "--external-client-id",
        "ichor-ui",
        "--external-kube-client-id",
        "kubernetes",
        "--external-ca-file",
        ca.to_str().unwrap(),
        "--external-username-claim",
        "preferred_username",
        "--external-groups-prefix",
        "corp:",
        "--external-impersonable-group",
        "admins",
        "--external-impersonable-group",
        "ops",
    ])
    .unwrap();
    let p = c.external.expect("an external provider");
    assert_eq!(p.issuer, "https://idp.example.com/realms/corp");
    assert_eq!(
        (p.client_id.as_str(), p.kube_client_id.as_str()),
        ("ichor-ui", "kubernetes")
    );
    assert!(p.ca_pem.unwrap().contains("BEGIN CERTIFICATE"));
    assert_eq!(p.username_claim, "preferred_username");
    assert_eq!(
        (p.username_prefix.as_str(), p.groups_prefix.as_str()),
        ("oidc:", "corp:")
    );
    assert_eq!(p.impersonable_groups, ["admins", "ops"]);
    assert_eq!(issuer_args(&[]).unwrap().external, None);

    let missing = dir.path().join("missing.pem");
    for (extra, needle) in [
        (
            vec!["--external-client-id", "x"],
            "--external-client-id needs --external-issuer-url",
        ),
        (
            vec!["--external-issuer-url", "https://idp.example.com"],
            "--external-issuer-url needs --external-client-id",
        ),
        (
            vec![
                "--external-issuer-url",
                "http://idp.example.com",
                "--external-client-id",
                "x",
            ],
            "--external-issuer-url \"http://idp.example.com\" must use https",
        ),
        (
            vec![
                "--external-issuer-url",
                "https://idp.example.com",
                "--external-client-id",
                "x",
                "--external-ca-file",
                missing.to_str().unwrap(),
            ],
            "--external-ca-file",
        ),
        (
            vec![
                "--external-issuer-url",
                "https://idp.example.com",
                "--external-client-id",
                "x",
                "--external-username-prefix",
                "ichor:",
            ],
            "--external-username-prefix \"ichor:\" is not allowed",
        ),
        (
            vec![
                "--external-issuer-url",
                "https://idp.example.com",
                "--external-client-id",
                "ichor-ui",
            ],
            "--external-issuer-url needs --external-kube-client-id",
        ),
    ] {
        let refused = issuer_args(&extra).unwrap_err();
        assert!(refused.contains(needle), "{extra:?}: {refused}");
    }
}

#[test]
fn the_internal_jwks_uri_overrides_the_advertised_jwks_and_must_be_an_https_url() {
    use clap::CommandFactory as _;
    assert_eq!(
        issuer_args(&[]).unwrap().internal_jwks_uri,
        None,
        "by default the JWKS is on the host the caller used"
    );
    let uri = "https://10.96.0.12:8444/oidc/jwks";
    let c = issuer_args(&["--internal-jwks-uri", uri]).unwrap();
    assert_eq!(c.internal_jwks_uri.as_deref(), Some(uri));
    // Empty (the chart's default) is no override.
    assert_eq!(
        issuer_args(&["--internal-jwks-uri", ""])
            .unwrap()
            .internal_jwks_uri,
        None
    );
    for (bad, needle) in [
        ("http://10.96.0.12:8444/oidc/jwks", "must use https"),
        ("10.96.0.12:8444/oidc/jwks", "is not an absolute URL"),
        ("https://10.96.0.12:8444/oidc/jwks?x=1", "must not carry"),
        ("https://user@10.96.0.12:8444/oidc/jwks", "must not carry"),
    ] {
        let refused = issuer_args(&["--internal-jwks-uri", bad]).unwrap_err();
        assert!(
            refused.starts_with("--internal-jwks-uri ") && refused.contains(needle),
            "{bad}: {refused}"
        );
    }
    let cmd = ichor_issuer::cli::IssuerArgs::command();
    let env = cmd
        .get_arguments()
        .find(|a| a.get_id() == "internal_jwks_uri")
        .and_then(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned());
    assert_eq!(env.as_deref(), Some("ICHOR_ISSUER_INTERNAL_JWKS_URI"));
}
