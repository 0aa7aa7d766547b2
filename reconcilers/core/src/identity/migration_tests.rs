use super::*;
use crate::identity::project::{CREDENTIALS_KEY_KIND, PerUserSource, credentials_key};
use ichor_renderers::contract::{
    CREDENTIALS_LAYOUT_UNDERSTOOD, CREDENTIALS_LAYOUTS_ANNOTATION, ISSUER_DEPLOYMENT,
};

fn legacy_secret(phase: Option<&str>, keys: &[&str], rv: &str) -> Option<Object> {
    let data: serde_json::Map<String, Value> =
        keys.iter().map(|k| ((*k).to_owned(), json!("e30="))).collect();
    let mut meta = json!({"name": CREDENTIALS_SECRET_NAME, "namespace": NAMESPACE});
    if let Some(p) = phase {
        meta["annotations"] = json!({CREDENTIALS_LAYOUT_ANNOTATION: p});
    }
    let mut o = Object::new(
        "Secret",
        NAMESPACE,
        CREDENTIALS_SECRET_NAME,
        json!({"metadata": meta, "data": data}),
    );
    o.resource_version = Some(rv.to_owned());
    Some(o)
}

fn deployment(generation: i64, observed: i64, annotated: bool) -> Option<Object> {
    let annotations = if annotated {
        json!({CREDENTIALS_LAYOUTS_ANNOTATION: "legacy,per-user"})
    } else {
        json!({})
    };
    Some(Object::new(
        "Deployment",
        NAMESPACE,
        ISSUER_DEPLOYMENT,
        json!({"metadata": {"generation": generation},
            "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "ichor", "app.kubernetes.io/component": "issuer"}},
                "template": {"metadata": {"annotations": annotations}}},
            "status": {"observedGeneration": observed}}),
    ))
}

fn pod(name: &str, layouts: Option<&str>, terminating: bool) -> (ObjectKey, Object) {
    let mut meta = json!({"name": name, "labels": {"app.kubernetes.io/name": "ichor", "app.kubernetes.io/component": "issuer"}});
    if let Some(l) = layouts {
        meta["annotations"] = json!({CREDENTIALS_LAYOUTS_ANNOTATION: l});
    }
    if terminating {
        meta["deletionTimestamp"] = json!("2027-01-01T00:00:00Z");
    }
    let o = Object::new("Pod", NAMESPACE, name, json!({"metadata": meta}));
    (o.key(), o)
}

fn pods(list: &[(ObjectKey, Object)]) -> BTreeMap<ObjectKey, Object> {
    list.iter().cloned().collect()
}

/// Derived keys: `(user, legacy, own)`.
fn keys(list: &[(&str, bool, bool)]) -> BTreeMap<ObjectKey, Object> {
    list.iter()
        .map(|(user, legacy, own)| {
            let sources = CredentialsSources {
                legacy: *legacy,
                per_user: own.then(|| PerUserSource {
                    uid: Some(format!("u-{user}")),
                }),
            };
            let o = Object::new(
                CREDENTIALS_KEY_KIND,
                NAMESPACE,
                *user,
                serde_json::to_value(&sources).unwrap_or_default(),
            );
            (credentials_key(user), o)
        })
        .collect()
}

fn state(phase: Option<&str>, keys: &[&str]) -> LegacyState {
    legacy_state(&legacy_secret(phase, keys, "7"))
}

fn step_of(
    legacy: &LegacyState,
    asked: CredentialsLayout,
    dedication: &Dedication,
    issuers: &Option<String>,
    k: &BTreeMap<ObjectKey, Object>,
) -> Step {
    step(Inputs {
        legacy,
        asked,
        dedication,
        issuers,
        keys: k,
        returning_waited: true,
    })
    .0
}

#[test]
fn the_switch_waits_for_every_issuer_pod_terminating_ones_included() {
    let d = deployment(3, 3, true);
    let running = pod("ichor-issuer-a", Some("legacy,per-user"), false);
    let old_terminating = pod("ichor-issuer-old", None, true);
    let blocker = issuer_blocker(&d, &pods(&[running.clone(), old_terminating]));
    let why = blocker.unwrap_or_default();
    assert!(why.contains("ichor-issuer-old (terminating)"), "{why}");
    // An older pod listing only legacy is no better than one without the annotation.
    let legacy_only = pod("ichor-issuer-b", Some("legacy"), false);
    assert!(issuer_blocker(&d, &pods(&[running.clone(), legacy_only])).is_some());
    // Every pod lists it (spaces tolerated), a terminating one too: nothing in the way.
    let terminating_new = pod("ichor-issuer-c", Some("legacy, per-user"), true);
    assert_eq!(issuer_blocker(&d, &pods(&[running, terminating_new])), None);
    // A pod of another component is not an issuer pod.
    let other = Object::new(
        "Pod",
        NAMESPACE,
        "ichor-controller-x",
        json!({"metadata": {"labels": {"app.kubernetes.io/name": "ichor", "app.kubernetes.io/component": "controller"}}}),
    );
    assert_eq!(issuer_blocker(&d, &pods(&[(other.key(), other)])), None);
}

/// A legacy key no user can be named by cannot move (its Secret name would be invalid): it is
/// left out of every batch, so it never stalls the others, and the end state waits for it.
#[test]
fn a_legacy_key_that_is_no_user_name_never_holds_the_sweep() {
    let k = keys(&[
        ("Bad.Key", true, false),
        ("alice", true, false),
        ("bob", false, true),
    ]);
    let (progress, moves, stale) = batch(&k);
    assert_eq!(moves, ["alice"]);
    assert!(stale.is_empty());
    assert_eq!((progress.moved, progress.remaining), (1, 2));
}

/// A list of pods the controller may not read is treated as empty: fewer pods than the
/// Deployment counts must hold the switch back, not pass for "no old pod".
#[test]
fn the_switch_waits_while_it_sees_fewer_pods_than_the_deployment_counts() {
    let mut d = deployment(3, 3, true);
    if let Some(o) = d.as_mut() {
        o.value["status"]["replicas"] = json!(2);
    }
    let why = issuer_blocker(&d, &pods(&[])).unwrap_or_default();
    assert!(why.contains("sees 0 of the 2 pods"), "{why}");
    let a = pod("ichor-issuer-a", Some("legacy,per-user"), false);
    let gone = pod("ichor-issuer-z", Some("legacy,per-user"), true);
    // A terminating pod is not one of the Deployment's replicas.
    let why = issuer_blocker(&d, &pods(&[a.clone(), gone.clone()])).unwrap_or_default();
    assert!(why.contains("sees 1 of the 2 pods"), "{why}");
    let b = pod("ichor-issuer-b", Some("legacy,per-user"), false);
    assert_eq!(issuer_blocker(&d, &pods(&[a, b, gone])), None);
}

#[test]
fn the_switch_waits_for_the_rollout_the_template_and_the_selector() {
    let p = pods(&[pod("ichor-issuer-a", Some("legacy,per-user"), false)]);
    assert!(
        issuer_blocker(&None, &p)
            .unwrap_or_default()
            .contains("not observed")
    );
    let why = issuer_blocker(&deployment(4, 3, true), &p).unwrap_or_default();
    assert!(why.contains("generation 4, observedGeneration 3"), "{why}");
    let why = issuer_blocker(&deployment(3, 3, false), &p).unwrap_or_default();
    assert!(why.contains("pod template"), "{why}");
    let mut other_selector = deployment(3, 3, true);
    if let Some(d) = other_selector.as_mut() {
        d.value["spec"]["selector"]["matchLabels"] = json!({"app.kubernetes.io/component": "issuer"});
    }
    let why = issuer_blocker(&other_selector, &p).unwrap_or_default();
    assert!(why.contains("another selector"), "{why}");
}

#[test]
fn the_switch_is_one_test_and_replace_once_everything_holds_and_waits_otherwise() {
    let legacy = state(Some(LAYOUT_LEGACY), &["alice"]);
    let k = keys(&[("alice", true, false)]);
    let ok = None;
    match step_of(
        &legacy,
        CredentialsLayout::PerUser,
        &Dedication::Dedicated,
        &ok,
        &k,
    ) {
        Step::Switch(r) => {
            assert_eq!(
                (r.from.as_str(), r.to.as_str()),
                (LAYOUT_LEGACY, LAYOUT_MIGRATING)
            );
            assert_eq!(r.id(), "credentials-layout legacy to migrating");
        }
        other => panic!("expected the switch, got {other:?}"),
    }
    let waits = [
        (
            CredentialsLayout::Legacy,
            Dedication::Dedicated,
            None,
            "asks for the legacy layout",
        ),
        (
            CredentialsLayout::PerUser,
            Dedication::Missing,
            None,
            "is not observed",
        ),
        (
            CredentialsLayout::PerUser,
            Dedication::Unlisted,
            None,
            "not listed yet",
        ),
        (
            CredentialsLayout::PerUser,
            Dedication::Foreign(vec!["planted".into()]),
            None,
            "planted",
        ),
        (
            CredentialsLayout::PerUser,
            Dedication::Dedicated,
            Some("issuer pod x does not list".to_owned()),
            "issuer pod x",
        ),
    ];
    for (asked, dedication, issuers, why) in waits {
        match step_of(&legacy, asked, &dedication, &issuers, &k) {
            Step::Wait(w) => assert!(w.contains(why), "{w} does not say {why}"),
            other => panic!("expected a wait ({why}), got {other:?}"),
        }
    }
    // No phase yet: the issuer writes it first.
    let bare = state(None, &["alice"]);
    assert!(matches!(
        step_of(&bare, CredentialsLayout::PerUser, &Dedication::Dedicated, &ok, &k),
        Step::Wait(_)
    ));
}

#[test]
fn a_namespace_is_dedicated_only_once_its_secrets_were_listed() {
    let namespace = Some(Object::new("Namespace", "", CREDENTIALS_NAMESPACE, json!({})));
    let listed = Some(Object::new(
        crate::identity::project::CREDENTIALS_SECRETS_LISTED_KIND,
        CREDENTIALS_NAMESPACE,
        CREDENTIALS_NAMESPACE,
        json!({}),
    ));
    let none = BTreeMap::new();
    let planted: BTreeMap<ObjectKey, Object> = [(
        crate::identity::project::foreign_secret_key("planted"),
        Object::new(
            crate::identity::project::FOREIGN_SECRET_KIND,
            CREDENTIALS_NAMESPACE,
            "planted",
            json!({}),
        ),
    )]
    .into();
    assert_eq!(dedication(&None, &listed, &none), Dedication::Missing);
    // A refused list shows no foreign Secret: that is not an empty namespace.
    assert_eq!(dedication(&namespace, &None, &none), Dedication::Unlisted);
    assert_eq!(dedication(&namespace, &None, &planted), Dedication::Unlisted);
    assert_eq!(dedication(&namespace, &listed, &none), Dedication::Dedicated);
    assert_eq!(
        dedication(&namespace, &listed, &planted),
        Dedication::Foreign(vec!["planted".into()])
    );
    // Not listed: no condition is claimed either way.
    let inst = installation(json!({}), json!({}));
    assert_eq!(
        installation_status(
            Some(&inst),
            &Phase::Legacy,
            &Dedication::Unlisted,
            None,
            Progress::default()
        ),
        None
    );
}

#[test]
fn the_move_back_ends_only_on_a_list_of_the_credentials_namespace() {
    let returning = LegacyState {
        phase: Phase::Returning,
        empty_at: None,
        created: None,
    };
    // Every key back in the legacy Secret, no own Secret seen.
    let k = keys(&[("a", true, false)]);
    for unseen in [Dedication::Unlisted, Dedication::Missing] {
        match step_of(&returning, CredentialsLayout::Legacy, &unseen, &None, &k) {
            Step::Wait(why) => assert!(why.contains(CREDENTIALS_NAMESPACE), "{why}"),
            other => panic!("{unseen:?}: none seen is not none left, got {other:?}"),
        }
    }
    for seen in [Dedication::Dedicated, Dedication::Foreign(vec!["x".into()])] {
        assert!(
            matches!(
                step_of(&returning, CredentialsLayout::Legacy, &seen, &None, &k),
                Step::Switch(ref s) if s.to == LAYOUT_LEGACY
            ),
            "{seen:?}"
        );
    }
}

#[test]
fn a_batch_holds_at_most_a_hundred_keys_moves_and_stale_copies_apart() {
    let mut list: Vec<(String, bool, bool)> = (0..250)
        .map(|i| (format!("u{i:03}"), true, i % 10 == 0))
        .collect();
    list.push(("zz-moved".into(), false, true));
    let borrowed: Vec<(&str, bool, bool)> = list.iter().map(|(u, l, o)| (u.as_str(), *l, *o)).collect();
    let k = keys(&borrowed);
    let (progress, moves, stale) = batch(&k);
    assert_eq!(
        progress,
        Progress {
            moved: 1,
            remaining: 250
        }
    );
    assert_eq!(moves.len() + stale.len(), SWEEP_BATCH);
    assert_eq!(stale.len(), 10, "u000, u010, …, u090 have their own Secret");
    assert!(stale.iter().all(|u| u.ends_with('0')));
    assert_eq!(moves.first().map(String::as_str), Some("u001"));
    assert_eq!(moves.last().map(String::as_str), Some("u099"));
    let legacy = state(Some(LAYOUT_MIGRATING), &["u000"]);
    match step_of(
        &legacy,
        CredentialsLayout::PerUser,
        &Dedication::Dedicated,
        &None,
        &k,
    ) {
        Step::Sweep(r) => {
            assert_eq!(r.moves, moves);
            assert_eq!(r.stale, stale);
            assert_eq!(r.id(), "credentials-sweep u000 (100 keys)");
        }
        other => panic!("expected a sweep, got {other:?}"),
    }
}

#[test]
fn the_sweep_stops_when_the_namespace_is_not_dedicated_and_turns_back_when_legacy_is_asked() {
    let legacy = state(Some(LAYOUT_MIGRATING), &["a"]);
    let k = keys(&[("a", true, false)]);
    match step_of(
        &legacy,
        CredentialsLayout::Legacy,
        &Dedication::Dedicated,
        &None,
        &k,
    ) {
        Step::Switch(s) => assert_eq!(s.to, LAYOUT_RETURNING),
        other => panic!("asked for legacy while migrating: the switch to returning, got {other:?}"),
    }
    for (asked, dedication) in [
        (CredentialsLayout::PerUser, Dedication::Foreign(vec!["x".into()])),
        (CredentialsLayout::PerUser, Dedication::Missing),
        (CredentialsLayout::PerUser, Dedication::Unlisted),
    ] {
        assert!(
            matches!(step_of(&legacy, asked, &dedication, &None, &k), Step::Wait(_)),
            "{asked:?} {dedication:?}"
        );
    }
    // The issuers do not hold the sweep back once migrating: the switch already waited for them.
    assert!(matches!(
        step_of(
            &legacy,
            CredentialsLayout::PerUser,
            &Dedication::Dedicated,
            &Some("old pod".into()),
            &k
        ),
        Step::Sweep(_)
    ));
}

#[test]
fn an_empty_legacy_secret_is_deleted_at_the_resource_version_it_was_seen_empty() {
    let k = keys(&[("a", false, true)]);
    let empty = state(Some(LAYOUT_MIGRATING), &[]);
    match step_of(
        &empty,
        CredentialsLayout::PerUser,
        &Dedication::Dedicated,
        &None,
        &k,
    ) {
        Step::Retire(r) => {
            assert_eq!(r.resource_version, "7");
            assert_eq!(r.id(), "retire-legacy-credentials 7");
        }
        other => panic!("expected the deletion, got {other:?}"),
    }
    // A key that is no derived credentials key (not yet folded) holds the deletion back.
    let not_empty = state(Some(LAYOUT_MIGRATING), &["late"]);
    assert!(matches!(
        step_of(
            &not_empty,
            CredentialsLayout::PerUser,
            &Dedication::Dedicated,
            &None,
            &k
        ),
        Step::Wait(_)
    ));
    // Gone: done, whatever else holds.
    let gone = legacy_state(&None);
    assert_eq!(
        step_of(&gone, CredentialsLayout::PerUser, &Dedication::Missing, &None, &k),
        Step::Done
    );
    // A sign-in rewriting a non-empty Secret changes nothing the migration decides from.
    assert_eq!(
        legacy_state(&legacy_secret(Some(LAYOUT_MIGRATING), &["x"], "8")),
        legacy_state(&legacy_secret(Some(LAYOUT_MIGRATING), &["x"], "9"))
    );
}

#[test]
fn an_unknown_phase_is_left_alone_and_the_end_state_asked_for_legacy_creates_the_secret_again() {
    let k = keys(&[("a", false, true)]);
    let gone = legacy_state(&None);
    match step_of(
        &gone,
        CredentialsLayout::Legacy,
        &Dedication::Dedicated,
        &None,
        &k,
    ) {
        Step::Recreate(r) => assert_eq!(r.secret, CREDENTIALS_SECRET_NAME),
        other => panic!("expected the legacy Secret created again, got {other:?}"),
    }
    assert_eq!(
        step_of(
            &gone,
            CredentialsLayout::PerUser,
            &Dedication::Dedicated,
            &None,
            &k
        ),
        Step::Done
    );
    let s = state(Some("sideways"), &["a"]);
    assert!(matches!(
        step_of(&s, CredentialsLayout::PerUser, &Dedication::Dedicated, &None, &k),
        Step::Wait(_)
    ));
}

fn installation(status: Value, spec: Value) -> Object {
    Object::new(
        "IchorInstallation",
        "",
        "ichor",
        json!({"spec": spec, "status": status}),
    )
}

#[test]
fn the_dedicated_condition_names_the_offending_secret_and_settles() {
    let foreign = Dedication::Foreign(vec!["default-token".into(), "planted".into()]);
    let inst = installation(json!({}), json!({}));
    let progress = Progress {
        moved: 2,
        remaining: 3,
    };
    let write = installation_status(Some(&inst), &Phase::Legacy, &foreign, None, progress)
        .unwrap_or_else(|| panic!("a write"));
    let status = &write.value["status"];
    assert_eq!(
        status["credentials"],
        json!({"layout": "legacy", "moved": 2, "remaining": 3})
    );
    let c = &status["conditions"][0];
    assert_eq!(c["type"], CREDENTIALS_NAMESPACE_DEDICATED);
    assert_eq!(c["status"], "False");
    let message = c["message"].as_str().unwrap_or_default();
    assert!(message.contains("ichor-credentials/default-token"), "{message}");
    assert!(message.contains("1 others"), "{message}");
    // Observed as written (the applier stamps the time): nothing more to write.
    let mut observed = status.clone();
    observed["conditions"][0]["lastTransitionTime"] = json!("2027-01-01T00:00:00Z");
    observed["conditions"][1]["lastTransitionTime"] = json!("2027-01-01T00:00:00Z");
    let inst = installation(observed, json!({}));
    assert_eq!(
        installation_status(Some(&inst), &Phase::Legacy, &foreign, None, progress),
        None
    );
    // The Secret removed: True.
    let write = installation_status(
        Some(&inst),
        &Phase::Legacy,
        &Dedication::Dedicated,
        None,
        progress,
    )
    .unwrap_or_else(|| panic!("a write"));
    assert_eq!(write.value["status"]["conditions"][0]["status"], "True");
    // No namespace observed: nothing written (journals recorded before it was watched replay
    // unchanged).
    let inst = installation(json!({}), json!({}));
    assert_eq!(
        installation_status(Some(&inst), &Phase::Legacy, &Dedication::Missing, None, progress),
        None
    );
    // The end state reads perUser.
    let write = installation_status(
        Some(&inst),
        &Phase::Absent,
        &Dedication::Dedicated,
        None,
        Progress {
            moved: 4,
            remaining: 0,
        },
    )
    .unwrap_or_else(|| panic!("a write"));
    assert_eq!(
        write.value["status"]["credentials"],
        json!({"layout": "perUser", "moved": 4, "remaining": 0})
    );
    assert_eq!(
        installation_status(
            None,
            &Phase::Absent,
            &Dedication::Dedicated,
            None,
            Progress::default()
        ),
        None
    );
}

#[test]
fn the_node_asks_for_one_effect_and_reads_the_layout_from_the_first_installation() {
    let inst = installation(json!({}), json!({"users": {"credentialsLayout": "legacy"}}));
    let installs: BTreeMap<ObjectKey, Object> = [(inst.key(), inst)].into_iter().collect();
    let k = keys(&[("a", true, false)]);
    let legacy = state(Some(LAYOUT_LEGACY), &["a"]);
    let d = migration(
        &installs,
        &legacy,
        &Dedication::Dedicated,
        &Issuers::default(),
        &k,
        true,
    );
    assert!(d.effects.is_empty(), "legacy asked: no switch");
    assert_eq!(d.objects.len(), 1, "the status write");
    assert_eq!(d.objects[0].value["status"]["credentials"]["layout"], "legacy");
    let d = migration(
        &BTreeMap::new(),
        &legacy,
        &Dedication::Dedicated,
        &Issuers::default(),
        &k,
        true,
    );
    assert_eq!(
        d.effects.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        ["credentials-layout legacy to migrating"]
    );
    assert!(d.objects.is_empty(), "no installation, no status");
}

#[test]
fn the_layout_condition_names_an_old_issuer_pod_once_the_per_user_layout_is_in_use() {
    let inst = installation(json!({}), json!({}));
    let old = Some("issuer pod ichor-system/ichor-issuer-old");
    let condition = |phase: &Phase, unaware: Option<&str>| {
        let write = installation_status(
            Some(&inst),
            phase,
            &Dedication::Dedicated,
            unaware,
            Progress::default(),
        )
        .unwrap_or_else(|| panic!("a write"));
        let c = write.value["status"]["conditions"][1].clone();
        assert_eq!(c["type"], CREDENTIALS_LAYOUT_UNDERSTOOD);
        c
    };
    for phase in [Phase::Migrating, Phase::Returning, Phase::Absent] {
        let c = condition(&phase, old);
        assert_eq!(c["status"], "False", "{phase:?}");
        assert_eq!(c["reason"], "IssuerReleaseTooOld");
        assert!(
            c["message"]
                .as_str()
                .unwrap_or_default()
                .contains("ichor-issuer-old"),
            "{c}"
        );
        assert_eq!(condition(&phase, None)["status"], "True", "{phase:?}");
    }
    assert_eq!(condition(&Phase::Legacy, old)["status"], "True");
    // The node reads the pods through [`issuers`].
    let (key, pod) = pod("ichor-issuer-old", Some("legacy"), true);
    let found = issuers(&deployment(1, 1, true), &[(key, pod)].into_iter().collect());
    assert_eq!(
        found.unaware.as_deref(),
        Some("issuer pod ichor-system/ichor-issuer-old (terminating)")
    );
    assert!(found.blocker.is_some_and(|b| b.contains("ichor-issuer-old")));
}

#[test]
fn the_move_back_into_a_secret_created_again_waits_before_moving_anyone() {
    let k = keys(&[("a", false, true), ("b", true, false)]);
    let legacy = LegacyState {
        phase: Phase::Returning,
        empty_at: None,
        created: "2027-01-01T00:00:00Z".parse().ok(),
    };
    let inputs = |waited| Inputs {
        legacy: &legacy,
        asked: CredentialsLayout::Legacy,
        dedication: &Dedication::Dedicated,
        issuers: &None,
        keys: &k,
        returning_waited: waited,
    };
    let (waiting, progress) = step(inputs(false));
    assert!(
        matches!(waiting, Step::Wait(ref why) if why.contains("2027-01-01T00:00:30Z")),
        "{waiting:?}"
    );
    assert_eq!(
        progress,
        Progress {
            moved: 1,
            remaining: 1
        }
    );
    match step(inputs(true)).0 {
        Step::Return(r) => assert_eq!(r.users, ["a"]),
        other => panic!("expected a batch back, got {other:?}"),
    }
    // The creation time is kept in phase returning only.
    let mut secret = legacy_secret(Some(LAYOUT_RETURNING), &[], "3");
    if let Some(s) = secret.as_mut() {
        s.value["metadata"]["creationTimestamp"] = json!("2027-01-01T00:00:00Z");
    }
    assert_eq!(legacy_state(&secret).created, legacy.created);
    let mut migrating = legacy_secret(Some(LAYOUT_MIGRATING), &[], "3");
    if let Some(s) = migrating.as_mut() {
        s.value["metadata"]["creationTimestamp"] = json!("2027-01-01T00:00:00Z");
    }
    assert_eq!(legacy_state(&migrating).created, None);
}
