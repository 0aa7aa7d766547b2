#![allow(clippy::unwrap_used)]
use super::*;

fn parse(args: &[&str]) -> Option<TargetArgs> {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    cached_token_args(&args)
}

#[test]
fn the_kubeconfig_form_is_read_with_every_value() {
    let a = parse(&[
        "auth",
        "token",
        "--issuer",
        "https://ichor.example.com",
        "--client-id",
        "cli",
        "--audience",
        "ichor-ui",
        "--ca-file",
        "/etc/ca.pem",
        "--scope",
        "openid email",
        "--prompt",
        "consent",
    ])
    .unwrap();
    assert_eq!(a.issuer, "https://ichor.example.com");
    assert_eq!(a.client_id, "cli");
    assert_eq!(a.audience, "ichor-ui");
    assert_eq!(a.ca_file, Some(PathBuf::from("/etc/ca.pem")));
    assert_eq!(a.scope, "openid email");
    assert_eq!(a.prompt.as_deref(), Some("consent"));
}

#[test]
fn inline_values_and_defaults_match_the_full_parser() {
    let a = parse(&["auth", "token", "--issuer=https://i.example", "--audience=a=b"]).unwrap();
    assert_eq!(a.issuer, "https://i.example");
    assert_eq!(a.audience, "a=b");
    assert_eq!(a.client_id, flow::DEFAULT_CLIENT_ID);
    assert_eq!(a.scope, flow::DEFAULT_SCOPE);
    assert_eq!((&a.ca_file, &a.prompt), (&None, &None));
    let t = a.target().unwrap();
    assert_eq!(t.key().issuer, "https://i.example");
}

#[test]
fn every_other_command_line_goes_to_the_full_tool() {
    let i = "https://i.example";
    for args in [
        &[][..],
        &["--version"],
        &["auth"],
        &["auth", "login", "--issuer", i],
        &["token", "auth", "--issuer", i],
        &["auth", "token"],
        &["auth", "token", "--help"],
        &["auth", "token", "--issuer", i, "-h"],
        &["-o", "json", "auth", "token", "--issuer", i],
        &["auth", "token", "--issuer", i, "-o", "json"],
        &["auth", "token", "--issuer", i, "--output=json"],
        &["auth", "token", "--issuer", i, "--issuer", i],
        &["auth", "token", "--issuer", i, "--issuer=https://other.example"],
        &["auth", "token", "--issuer", i, "--unknown", "x"],
        &["auth", "token", "--issuer", i, "--iss", i],
        &["auth", "token", "--issuer"],
        &["auth", "token", "--issuer", "--audience", "x"],
        &["auth", "token", "--issuer", i, "--audience", "-x"],
        &["auth", "token", "--issuer", i, "extra"],
        &["auth", "token", "--issuer", i, "--"],
        &["auth", "token", "--issuer", i, "--prompt", "none"],
        &["auth", "token", "--issuer", i, "--ca-file="],
    ] {
        assert!(parse(args).is_none(), "{args:?} was taken for the cached path");
    }
}

#[test]
fn a_non_utf8_argument_goes_to_the_full_tool() {
    use std::os::unix::ffi::OsStringExt;
    let args = [
        OsString::from("auth"),
        OsString::from("token"),
        OsString::from("--issuer"),
        OsString::from_vec(vec![b'h', 0xff]),
    ];
    assert!(cached_token_args(&args).is_none());
}

#[test]
fn an_invalid_value_parses_but_fails_the_same_check_as_the_full_tool() {
    for args in [
        &["auth", "token", "--issuer", "http://ichor.example.com"][..],
        &["auth", "token", "--issuer=", "--audience", "a"],
        &[
            "auth",
            "token",
            "--issuer",
            "https://i.example",
            "--scope",
            "email",
        ],
    ] {
        assert!(parse(args).unwrap().target().is_err(), "{args:?}");
    }
}

#[test]
fn the_missing_tool_message_names_the_file_and_what_to_do() {
    let e = std::io::Error::from(std::io::ErrorKind::NotFound);
    let m = missing_tool_message(std::path::Path::new("/opt/bin/ichor-full"), &e);
    assert!(m.contains("/opt/bin/ichor-full"), "{m}");
    assert!(
        m.contains("install ichor-full in the same directory as ichor"),
        "{m}"
    );
}
