//! Unit tests of [`super`].

#![allow(clippy::unwrap_used)]

use super::*;
use crate::proto::cosi::{Metadata, Resource, Spec};

const CONFIG: &[u8] = b"# as written\nversion: v1alpha1\n---\nkind: HostnameConfig\n";

fn reply(metadata: Option<Metadata>, proto_spec: Vec<u8>) -> GetResponse {
    GetResponse {
        resource: Some(Resource {
            metadata,
            spec: Some(Spec {
                proto_spec,
                yaml_spec: String::new(),
            }),
        }),
    }
}

fn spec_bytes(config: &[u8]) -> Vec<u8> {
    MachineConfigSpec {
        yaml_marshalled: config.to_vec(),
    }
    .encode_to_vec()
}

fn problem(result: Result<Vec<u8>, TalosError>) -> SpecProblem {
    match result {
        Err(TalosError::MachineConfig { node, problem }) => {
            assert_eq!(node, "10.0.0.2");
            problem
        }
        other => panic!("expected a MachineConfig error, got {other:?}"),
    }
}

#[test]
fn the_configuration_bytes_come_back_exactly_as_submitted() {
    let metadata = Metadata {
        namespace: MACHINE_CONFIG_NAMESPACE.to_owned(),
        r#type: MACHINE_CONFIG_TYPE.to_owned(),
        id: MACHINE_CONFIG_ID.to_owned(),
        version: "3".to_owned(),
        ..Metadata::default()
    };
    let got = decode_machine_config("10.0.0.2", reply(Some(metadata), spec_bytes(CONFIG))).unwrap();
    assert_eq!(got, CONFIG);
    let got = decode_machine_config("10.0.0.2", reply(None, spec_bytes(CONFIG))).unwrap();
    assert_eq!(got, CONFIG, "metadata is optional");
}

#[test]
fn a_reply_without_resource_or_spec_is_a_typed_error_naming_the_node() {
    let none = GetResponse { resource: None };
    assert_eq!(
        problem(decode_machine_config("10.0.0.2", none)),
        SpecProblem::NoResource
    );
    let no_spec = GetResponse {
        resource: Some(Resource {
            metadata: None,
            spec: None,
        }),
    };
    assert_eq!(
        problem(decode_machine_config("10.0.0.2", no_spec)),
        SpecProblem::NoSpec
    );
    assert_eq!(
        problem(decode_machine_config("10.0.0.2", reply(None, Vec::new()))),
        SpecProblem::Empty
    );
    let yaml_only = GetResponse {
        resource: Some(Resource {
            metadata: None,
            spec: Some(Spec {
                proto_spec: Vec::new(),
                yaml_spec: "version: v1alpha1\n".to_owned(),
            }),
        }),
    };
    assert_eq!(
        problem(decode_machine_config("10.0.0.2", yaml_only)),
        SpecProblem::NoProtoSpec
    );
    assert_eq!(
        problem(decode_machine_config("10.0.0.2", reply(None, spec_bytes(b"")))),
        SpecProblem::Empty
    );
}

#[test]
fn an_undecodable_spec_is_refused_with_the_decoder_message() {
    // Field 1 announced as 200 bytes long with only 2 present.
    let err = decode_machine_config("10.0.0.2", reply(None, vec![0x0a, 0xc8, 0x01, b'a', b'b'])).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "Talos API State.Get on node 10.0.0.2: cannot read its machine configuration: proto_spec is not a \
             MachineConfigSpec ("
        ),
        "{err}"
    );
    assert!(matches!(
        err,
        TalosError::MachineConfig {
            problem: SpecProblem::Undecodable(_),
            ..
        }
    ));
}

#[test]
fn another_resource_is_not_taken_for_the_machine_configuration() {
    let metadata = Metadata {
        r#type: "Hostnames.net.talos.dev".to_owned(),
        id: "hostname".to_owned(),
        ..Metadata::default()
    };
    assert_eq!(
        problem(decode_machine_config(
            "10.0.0.2",
            reply(Some(metadata), spec_bytes(CONFIG))
        )),
        SpecProblem::OtherResource {
            kind: "Hostnames.net.talos.dev".to_owned(),
            id: "hostname".to_owned()
        }
    );
}

#[test]
fn reading_hints_differ_from_applying_hints() {
    let denied = Status::permission_denied("not authorized");
    let read = rpc_error("State.Get", "n", &denied).to_string();
    assert!(
        read.contains("reading a node's machine configuration needs"),
        "{read}"
    );
    let apply = rpc_error("ApplyConfiguration", "n", &denied).to_string();
    assert!(apply.contains("applying a configuration needs"), "{apply}");
    let missing = rpc_error("State.Get", "n", &Status::not_found("resource doesn't exist")).to_string();
    assert!(missing.contains("maintenance mode"), "{missing}");
    let invalid = rpc_error("State.Get", "n", &Status::invalid_argument("x")).to_string();
    assert!(!invalid.contains("--machine-config-dir"), "{invalid}");
}
