//! Following a kind through a `list`+`watch` as a map of name → the part the issuer reads, the
//! I/O edge of the issuer's runtime sources ([`crate::installation`], [`crate::talos_cluster`]).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt as _;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Resource, ResourceExt as _};
use serde::de::DeserializeOwned;

/// Follows every object of `api` until the process ends, as name → `part(object)`, calling
/// `changed` with the whole map after each first list (a re-list replaces the map whole) and
/// each change, with `true` once the first list is complete. A failed list or watch is counted
/// in `failures`, logged with `what`, and retried with back-off; the map known so far stays.
pub async fn follow_by_name<K, V>(
    api: Api<K>,
    what: &'static str,
    part: impl Fn(K) -> V,
    mut changed: impl FnMut(&BTreeMap<String, V>, bool),
    failures: &AtomicU64,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()).default_backoff());
    let mut known: BTreeMap<String, V> = BTreeMap::new();
    let mut listing: BTreeMap<String, V> = BTreeMap::new();
    let mut listed = false;
    while let Some(event) = events.next().await {
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
                tracing::warn!(%error, "cannot follow {what}; what is known of them stays in force");
            }
        }
    }
}
