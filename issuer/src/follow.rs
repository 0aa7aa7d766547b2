//! Following a kind through a `list`+`watch` as a map of name → the part the issuer reads, the
//! I/O edge of the issuer's runtime sources ([`crate::installation`], [`crate::talos_cluster`]).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use ichor_renderers::crd::not_served_message;

use futures::StreamExt as _;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Resource, ResourceExt as _};
use serde::de::DeserializeOwned;

/// Follows every object of `api` until the process ends, as name → `part(object)`, calling
/// `changed` with the whole map after each first list (a re-list replaces the map whole) and
/// each change, with `true` once the first list is complete. A failed list or watch is counted
/// in `failures`, logged with `what`, and retried with back-off; the map known so far stays.
///
/// A list answered 404 means the cluster does not serve the kind (its CRD is not installed):
/// `unserved` then holds [`not_served_message`] for the kind, logged once at warn, until the
/// kind is served again.
pub async fn follow_by_name<K, V>(
    api: Api<K>,
    what: &'static str,
    part: impl Fn(K) -> V,
    mut changed: impl FnMut(&BTreeMap<String, V>, bool),
    failures: &AtomicU64,
    unserved: &Mutex<Option<String>>,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    let set_unserved = |message: Option<String>| {
        let mut slot = unserved.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::replace(&mut *slot, message)
    };
    let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()).default_backoff());
    let mut known: BTreeMap<String, V> = BTreeMap::new();
    let mut listing: BTreeMap<String, V> = BTreeMap::new();
    let mut listed = false;
    while let Some(event) = events.next().await {
        // `Init` opens a (re)list before it is made; any other event means the apiserver
        // answered the list or watch.
        if matches!(&event, Ok(e) if !matches!(e, watcher::Event::Init)) && set_unserved(None).is_some() {
            tracing::info!("{kind} is served now");
        }
        match event {
            Ok(watcher::Event::Init) => listing.clear(),
            Ok(watcher::Event::InitApply(o)) => {
                listing.insert(o.name_any(), part(o));
            }
            Ok(watcher::Event::InitDone) => {
                known = std::mem::take(&mut listing);
                listed = true;
                changed(&known, listed);
            }
            Ok(watcher::Event::Apply(o)) => {
                known.insert(o.name_any(), part(o));
                changed(&known, listed);
            }
            Ok(watcher::Event::Delete(o)) => {
                known.remove(&o.name_any());
                changed(&known, listed);
            }
            Err(error) => {
                failures.fetch_add(1, Ordering::Relaxed);
                if is_not_found(&error) {
                    let message = not_served_message(&kind);
                    if set_unserved(Some(message.clone())).is_none() {
                        tracing::warn!(
                            "{message} (retried until it is; what is known of {what} stays in force)"
                        );
                    }
                } else {
                    tracing::warn!(%error, "cannot follow {what}; what is known of them stays in force");
                }
            }
        }
    }
}

/// Whether a watcher error is the apiserver's 404 to a list or watch: the kind is not served.
fn is_not_found(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => s.code == 404,
        watcher::Error::WatchError(s) => s.code == 404,
        _ => false,
    }
}
