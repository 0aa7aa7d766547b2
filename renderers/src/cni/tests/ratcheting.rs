//! Ratcheting: which updates are validated again.

use super::*;

// --- ratcheting ---

#[test]
fn always_validates_a_create() {
    assert!(needs_validation(None, &CniSpec::default()));
    assert!(needs_validation(None, &spec(json!({}))));
}

#[test]
fn skips_validation_of_an_update_that_leaves_values_and_modes_alone() {
    let stored = with_modes(
        "replaced",
        "geneve",
        json!({ "bogus": 1, "hubble": { "enabled": true } }),
    );
    assert!(needs_validation(None, &stored), "a create is validated");
    assert!(!needs_validation(Some(&stored), &stored.clone()));
    // Key order is not a change.
    let reordered = with_modes(
        "replaced",
        "geneve",
        json!({ "hubble": { "enabled": true }, "bogus": 1 }),
    );
    assert!(!needs_validation(Some(&stored), &reordered));
    // A preset edit that does not leave `unmanaged` is not a change the check cares about.
    let flannel = CniSpec {
        preset: Some("flannel".into()),
        ..stored.clone()
    };
    assert!(!needs_validation(Some(&stored), &flannel));
}

#[test]
fn treats_absent_and_empty_as_the_same_on_update() {
    let bare = CniSpec {
        preset: Some("cilium".into()),
        ..CniSpec::default()
    };
    let empty = CniSpec {
        kube_proxy: Some(String::new()),
        tunnel: Some(String::new()),
        cilium: Some(CiliumSpec {
            values: Some(json!({})),
        }),
        ..bare.clone()
    };
    assert!(!needs_validation(Some(&bare), &empty));
    assert!(!needs_validation(Some(&empty), &bare));
    let null = CniSpec {
        cilium: Some(CiliumSpec {
            values: Some(Value::Null),
        }),
        ..bare.clone()
    };
    assert!(!needs_validation(Some(&bare), &null));
}

#[test]
fn validates_an_update_that_changes_values_kube_proxy_or_tunnel() {
    let stored = spec(json!({ "hubble": { "enabled": true } }));
    assert!(needs_validation(
        Some(&stored),
        &spec(json!({ "hubble": { "enabled": false } }))
    ));
    assert!(needs_validation(Some(&stored), &spec(json!({}))));
    let replaced = CniSpec {
        kube_proxy: Some("replaced".into()),
        ..stored.clone()
    };
    assert!(needs_validation(Some(&stored), &replaced));
    let geneve = CniSpec {
        tunnel: Some("geneve".into()),
        ..stored.clone()
    };
    assert!(needs_validation(Some(&stored), &geneve));
    // `enabled` spelled out differs from empty as a string: validating again is harmless.
    let spelled = CniSpec {
        kube_proxy: Some("enabled".into()),
        ..stored.clone()
    };
    assert!(needs_validation(Some(&stored), &spelled));
}

#[test]
fn validates_an_update_that_leaves_preset_unmanaged_with_unchecked_values() {
    let stored = CniSpec {
        preset: Some(UNMANAGED_PRESET.into()),
        ..spec(json!({ "bogus": 1 }))
    };
    let managed = CniSpec {
        preset: Some("cilium".into()),
        ..stored.clone()
    };
    assert!(needs_validation(Some(&stored), &managed));
    assert!(!needs_validation(Some(&managed), &stored));
}

#[test]
fn a_stored_invalid_layer_keeps_accepting_unrelated_edits() {
    let stored = spec(json!({ "ipam": { "mode": "cluster-pool" } }));
    assert!(!validate(&stored, &CiliumFacts::default()).is_empty());
    let same_cni_other_edit = stored.clone();
    assert!(!needs_validation(Some(&stored), &same_cni_other_edit));
}

#[test]
fn reports_a_values_change_only_when_the_layer_differs() {
    let stored = spec(json!({ "hubble": { "enabled": true } }));
    assert!(values_changed(None, &stored));
    assert!(!values_changed(None, &spec(json!({}))));
    assert!(!values_changed(None, &CniSpec::default()));
    assert!(!values_changed(Some(&stored), &stored.clone()));
    assert!(
        values_changed(Some(&stored), &spec(json!({}))),
        "removing the layer is a change"
    );
    assert!(values_changed(
        Some(&stored),
        &spec(json!({ "hubble": { "enabled": false } }))
    ));
    let replaced = CniSpec {
        kube_proxy: Some("replaced".into()),
        ..stored.clone()
    };
    assert!(
        !values_changed(Some(&stored), &replaced),
        "a mode change is not a values change"
    );
}
