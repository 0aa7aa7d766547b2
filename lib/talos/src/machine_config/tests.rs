//! Unit tests of [`super`].

#![allow(clippy::unwrap_used)]

use super::*;

const MAIN: &str = "# the node\nversion: v1alpha1\nmachine:\n  type: controlplane\n";
const AUTH_OLD: &str = "apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfig:\n  jwt: []\n";
const AUTH_NEW: &str =
    "apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfig:\n  anonymous: {enabled: true}\n";
const OTHER: &str = "apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: cp-1 # keep me\n";

#[test]
fn the_document_of_the_kind_is_replaced_whole_and_the_others_kept_byte_for_byte() {
    let current = format!("{MAIN}---\n{AUTH_OLD}---\n{OTHER}");
    let (out, merge) =
        replace_document("cp-1.yaml", &current, "KubeAuthenticationConfig", AUTH_NEW, false).unwrap();
    assert_eq!(merge, Merge::Replaced);
    assert_eq!(out, format!("{MAIN}---\n{AUTH_NEW}---\n{OTHER}"));
    assert!(!out.contains("jwt: []"), "nothing of the old document is kept");
}

#[test]
fn the_document_is_appended_when_the_configuration_has_none() {
    let current = format!("---\n{MAIN}---\n{OTHER}---\n");
    let (out, merge) =
        replace_document("cp-1.yaml", &current, "KubeAuthenticationConfig", AUTH_NEW, false).unwrap();
    assert_eq!(merge, Merge::Appended);
    assert_eq!(out, format!("{MAIN}---\n{OTHER}---\n{AUTH_NEW}"));
}

#[test]
fn a_configuration_without_the_v1alpha1_document_is_refused_as_a_patch() {
    let err =
        replace_document("cp-1.yaml", AUTH_OLD, "KubeAuthenticationConfig", AUTH_NEW, false).unwrap_err();
    assert_eq!(
        err,
        MachineConfigError::NoMainDocument {
            file: "cp-1.yaml".into()
        }
    );
}

#[test]
fn two_documents_of_the_kind_are_refused_naming_both() {
    let current = format!("{MAIN}---\n{AUTH_OLD}---\n{AUTH_OLD}");
    let err = replace_document("cp-1.yaml", &current, "KubeAuthenticationConfig", AUTH_NEW, false)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "cp-1.yaml: documents 2 and 3 are both KubeAuthenticationConfig; keep one"
    );
}

#[test]
fn invalid_yaml_names_the_document() {
    let current = format!("{MAIN}---\nkind: [unclosed\n");
    let err =
        replace_document("cp-1.yaml", &current, "KubeAuthenticationConfig", AUTH_NEW, false).unwrap_err();
    assert!(
        matches!(err, MachineConfigError::Yaml { document: 2, .. }),
        "{err}"
    );
}

const AUTH_FOREIGN: &str = "apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfiguration:\n  jwt:\n  \
                            - issuer: {url: https://dex.example.com}\n  - issuer: {url: https://ichor.example.com}\n";
const AUTH_ICHOR: &str = "apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfiguration:\n  jwt:\n  \
                          - issuer: {url: https://ichor.example.com}\n";

#[test]
fn adopting_a_node_whose_document_trusts_another_issuer_is_refused_naming_it() {
    let current = format!("{MAIN}---\n{AUTH_FOREIGN}");
    let err = replace_document(
        "cp-1.yaml",
        &current,
        "KubeAuthenticationConfig",
        AUTH_ICHOR,
        true,
    )
    .unwrap_err();
    assert_eq!(
        err,
        MachineConfigError::ForeignJwt {
            file: "cp-1.yaml".into(),
            document: 2,
            issuers: "https://dex.example.com".into()
        }
    );
    assert!(err.to_string().contains("spec.authentication.external"), "{err}");
}

#[test]
fn adoption_goes_ahead_when_the_render_keeps_every_issuer_and_later_applies_may_drop_one() {
    let current = format!("{MAIN}---\n{AUTH_ICHOR}");
    let (_, merge) = replace_document("f", &current, "KubeAuthenticationConfig", AUTH_ICHOR, true).unwrap();
    assert_eq!(merge, Merge::Replaced);
    let current = format!("{MAIN}---\n{AUTH_FOREIGN}");
    let (out, _) = replace_document("f", &current, "KubeAuthenticationConfig", AUTH_ICHOR, false).unwrap();
    assert!(
        !out.contains("dex"),
        "Ichor's own earlier document is replaced whole"
    );
    let (_, merge) = replace_document("f", MAIN, "KubeAuthenticationConfig", AUTH_ICHOR, true).unwrap();
    assert_eq!(
        merge,
        Merge::Appended,
        "a node with no document has nothing to lose"
    );
}

#[test]
fn a_separator_with_a_comment_still_separates() {
    let current = format!("{MAIN}--- # auth\n{AUTH_OLD}");
    let (out, merge) = replace_document("f", &current, "KubeAuthenticationConfig", AUTH_NEW, false).unwrap();
    assert_eq!(merge, Merge::Replaced);
    assert_eq!(out, format!("{MAIN}---\n{AUTH_NEW}"));
}

#[test]
fn the_document_of_a_kind_is_extracted_exactly_as_written() {
    let auth =
        "# Ichor's trust\napiVersion: v1alpha1\nkind: KubeAuthenticationConfig # here\nconfig:\n  jwt: []\n";
    let current = format!("{MAIN}---\n{auth}--- # next\n{OTHER}");
    assert_eq!(
        extract_document(&current, "KubeAuthenticationConfig")
            .unwrap()
            .as_deref(),
        Some(auth)
    );
    assert_eq!(
        extract_document(&current, "HostnameConfig").unwrap().as_deref(),
        Some(OTHER),
        "the last document, comments kept"
    );
    let last_without_newline = format!("{MAIN}---\n{}", AUTH_OLD.trim_end());
    assert_eq!(
        extract_document(&last_without_newline, "KubeAuthenticationConfig")
            .unwrap()
            .as_deref(),
        Some(AUTH_OLD.trim_end())
    );
}

#[test]
fn extracting_an_absent_kind_gives_none_and_a_duplicate_is_refused() {
    let current = format!("{MAIN}---\n{OTHER}");
    assert_eq!(
        extract_document(&current, "KubeAuthenticationConfig").unwrap(),
        None
    );
    assert_eq!(extract_document("", "KubeAuthenticationConfig").unwrap(), None);
    let twice = format!("{MAIN}---\n{AUTH_OLD}---\n{OTHER}---\n{AUTH_NEW}");
    assert_eq!(
        extract_document(&twice, "KubeAuthenticationConfig").unwrap_err(),
        MachineConfigError::Duplicate {
            file: "the machine configuration".into(),
            kind: "KubeAuthenticationConfig".into(),
            first: 2,
            second: 4
        }
    );
}

#[test]
fn an_extracted_document_put_back_restores_the_configuration() {
    let before = format!("{MAIN}---\n{AUTH_OLD}---\n{OTHER}");
    let saved = extract_document(&before, "KubeAuthenticationConfig")
        .unwrap()
        .unwrap();
    let (after, _) = replace_document("f", &before, "KubeAuthenticationConfig", AUTH_NEW, false).unwrap();
    let (rolled_back, merge) =
        replace_document("f", &after, "KubeAuthenticationConfig", &saved, false).unwrap();
    assert_eq!(merge, Merge::Replaced);
    assert_eq!(rolled_back, before);
}

#[test]
fn removing_a_kind_keeps_every_other_document_byte_for_byte() {
    let current = format!("{MAIN}---\n{AUTH_OLD}---\n{OTHER}");
    assert_eq!(
        remove_document("f", &current, "KubeAuthenticationConfig").unwrap(),
        format!("{MAIN}---\n{OTHER}")
    );
    let last = format!("{MAIN}---\n{OTHER}---\n{AUTH_OLD}");
    assert_eq!(
        remove_document("f", &last, "KubeAuthenticationConfig").unwrap(),
        format!("{MAIN}---\n{OTHER}")
    );
}

#[test]
fn removing_an_absent_kind_changes_nothing_and_the_rollback_of_an_append_restores_the_configuration() {
    let before = format!("{MAIN}---\n{OTHER}");
    assert_eq!(
        remove_document("f", &before, "KubeAuthenticationConfig").unwrap(),
        before
    );
    assert_eq!(
        remove_document("f", &format!("---\n{before}---\n"), "KubeAuthenticationConfig").unwrap(),
        before,
        "blank documents are dropped as replace_document drops them"
    );
    let (after, merge) = replace_document("f", &before, "KubeAuthenticationConfig", AUTH_NEW, false).unwrap();
    assert_eq!(merge, Merge::Appended);
    assert_eq!(
        remove_document("f", &after, "KubeAuthenticationConfig").unwrap(),
        before
    );
}

#[test]
fn removing_refuses_duplicates_and_a_configuration_without_the_v1alpha1_document() {
    let twice = format!("{MAIN}---\n{AUTH_OLD}---\n{AUTH_NEW}");
    assert!(matches!(
        remove_document("f", &twice, "KubeAuthenticationConfig"),
        Err(MachineConfigError::Duplicate {
            first: 2,
            second: 3,
            ..
        })
    ));
    assert_eq!(
        remove_document("f", AUTH_OLD, "KubeAuthenticationConfig").unwrap_err(),
        MachineConfigError::NoMainDocument { file: "f".into() }
    );
}
