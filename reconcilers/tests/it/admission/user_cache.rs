//! The user cache: when it may be answered from ([`freshness`], pure, at a given instant), and
//! what its feed makes of the watch's events and errors.

use std::time::{Duration, Instant};

use ichor_controller::admission::fixtures::{NAMESPACE, user_object};
use ichor_controller::admission::user_cache::{STALE_AFTER, freshness};
use ichor_controller::admission::{AdmissionError, UserCache};
use kube::api::DynamicObject;
use kube::runtime::watcher::Event;
use serde_json::json;

const SECOND: Duration = Duration::from_secs(1);

#[test]
fn a_cache_is_used_once_synced_and_until_its_watch_has_failed_for_long() {
    let now = Instant::now() + Duration::from_secs(3600);
    assert!(matches!(
        freshness(false, None, now, STALE_AFTER),
        Err(AdmissionError::UsersNotSynced)
    ));
    assert!(matches!(
        freshness(false, Some(now - SECOND), now, STALE_AFTER),
        Err(AdmissionError::UsersNotSynced)
    ));
    assert!(freshness(true, None, now, STALE_AFTER).is_ok());
    assert!(
        freshness(true, Some(now - STALE_AFTER), now, STALE_AFTER).is_ok(),
        "a watch failing for up to the bound is retried, the cache still used"
    );
    let lost = freshness(true, Some(now - STALE_AFTER - SECOND), now, STALE_AFTER).unwrap_err();
    assert!(matches!(lost, AdmissionError::UsersWatchLost(_)), "{lost:?}");
    assert_eq!(
        lost.to_string(),
        "the controller's watch of the IchorUser objects has been failing for 31s, so the \
         last-enabled-admin rule could not be checked"
    );
}

fn names(cache: &UserCache, now: Instant) -> Vec<String> {
    let mut names: Vec<String> = cache
        .users(NAMESPACE, now)
        .unwrap()
        .iter()
        .filter_map(|u| u.metadata.name.clone())
        .collect();
    names.sort();
    names
}

#[test]
fn the_feed_builds_the_cache_from_a_list_then_changes_and_marks_a_lost_watch() {
    let (cache, mut feed) = UserCache::new(NAMESPACE);
    feed.apply(&Event::Init);
    feed.apply(&Event::InitApply(user_object("ann", &["admin"], false)));
    assert!(
        matches!(
            cache.users(NAMESPACE, Instant::now()),
            Err(AdmissionError::UsersNotSynced)
        ),
        "half a list is not used"
    );
    feed.apply(&Event::InitApply(user_object("bo", &["viewer"], false)));
    feed.apply(&Event::InitDone);
    let now = Instant::now();
    assert_eq!(names(&cache, now), ["ann", "bo"]);
    feed.apply(&Event::Delete(user_object("bo", &["viewer"], false)));
    feed.apply(&Event::Apply(user_object("cy", &["admin"], true)));
    assert_eq!(names(&cache, now), ["ann", "cy"]);

    // The watch fails: used for STALE_AFTER, refused after, used again once an event arrives.
    feed.failed(now);
    feed.failed(now + Duration::from_secs(20));
    assert_eq!(names(&cache, now + STALE_AFTER), ["ann", "cy"]);
    let later = now + STALE_AFTER + SECOND;
    assert!(matches!(
        cache.users(NAMESPACE, later),
        Err(AdmissionError::UsersWatchLost(_))
    ));
    feed.apply(&Event::Init);
    feed.apply(&Event::InitApply(user_object("ann", &["admin"], false)));
    assert!(
        cache.users(NAMESPACE, later).is_err(),
        "a re-list in progress does not end the failure"
    );
    feed.apply(&Event::InitDone);
    assert_eq!(names(&cache, later), ["ann"], "the re-list replaced the view");
}

fn dynamic(name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
        "metadata": {"name": name, "namespace": NAMESPACE, "managedFields": [{"manager": "kubectl"}]},
        "spec": spec
    }))
    .unwrap()
}

#[test]
fn the_feed_reads_the_controllers_dynamic_objects_and_drops_one_it_cannot_decode() {
    let (cache, mut feed) = UserCache::new(NAMESPACE);
    feed.apply_dynamic(&Event::Init);
    feed.apply_dynamic(&Event::InitApply(dynamic("ann", json!({"roles": ["admin"]}))));
    feed.apply_dynamic(&Event::InitApply(dynamic("bad", json!({"roles": "admin"}))));
    feed.apply_dynamic(&Event::InitDone);
    let now = Instant::now();
    assert_eq!(names(&cache, now), ["ann"]);
    let ann = &cache.users(NAMESPACE, now).unwrap()[0];
    assert_eq!(ann.spec.roles, ["admin"]);
    assert!(
        ann.metadata.managed_fields.is_none(),
        "kept without managedFields"
    );

    // An admin whose new version does not decode is no longer counted.
    feed.apply_dynamic(&Event::Apply(dynamic("ann", json!({"roles": 7}))));
    assert!(names(&cache, now).is_empty());
    feed.apply_dynamic(&Event::Apply(dynamic(
        "dee",
        json!({"roles": ["admin"], "disabled": true}),
    )));
    assert!(cache.users(NAMESPACE, now).unwrap()[0].spec.disabled);
    feed.apply_dynamic(&Event::Delete(dynamic("dee", json!({}))));
    assert!(names(&cache, now).is_empty());
}
