//! Watch events → graph events. One [`WatchState`] per watcher keeps the keys (and
//! resourceVersions) that watcher delivered, so a re-list after a disconnect ends with a
//! `Deleted` for every object that vanished meanwhile, and an object re-listed unchanged is not
//! folded (nor journaled) again.

use std::collections::{BTreeMap, BTreeSet};

use ichor_graph::{Event, Object, ObjectKey};
use ichor_renderers::contract::CREDENTIALS_LAYOUTS_ANNOTATION;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use serde_json::Value;

/// An object read by metadata only, as the graph keeps it: name, namespace, uid,
/// resourceVersion, labels, creation and deletion timestamps, and nothing else. Annotations are
/// left out on purpose: `kubectl apply` keeps the whole object it applied in one
/// (`kubectl.kubernetes.io/last-applied-configuration`), a Secret's values included.
pub fn metadata_only(object: PartialObjectMeta<DynamicObject>) -> DynamicObject {
    let meta = object.metadata;
    DynamicObject {
        types: None,
        metadata: ObjectMeta {
            name: meta.name,
            namespace: meta.namespace,
            uid: meta.uid,
            resource_version: meta.resource_version,
            labels: meta.labels,
            creation_timestamp: meta.creation_timestamp,
            deletion_timestamp: meta.deletion_timestamp,
            ..ObjectMeta::default()
        },
        data: Value::Object(serde_json::Map::new()),
    }
}

/// An issuer pod read by metadata only ([`metadata_only`]) keeping, of its annotations, only
/// the credentials layouts it understands ([`CREDENTIALS_LAYOUTS_ANNOTATION`]): what the switch
/// to per-user Secrets waits for.
pub fn pod_layouts_only(object: PartialObjectMeta<DynamicObject>) -> DynamicObject {
    let layouts = object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CREDENTIALS_LAYOUTS_ANNOTATION))
        .cloned();
    let mut out = metadata_only(object);
    out.metadata.annotations =
        layouts.map(|v| std::iter::once((CREDENTIALS_LAYOUTS_ANNOTATION.to_owned(), v)).collect());
    out
}

/// The issuer Deployment as the switch reads it: its name, uid, resourceVersion, generation and
/// labels, `spec.selector`, the credentials layouts its pod template lists and
/// `status.observedGeneration`; nothing of its pods' spec (environment, volumes).
pub fn deployment_rollout_only(object: DynamicObject) -> DynamicObject {
    let data = &object.data;
    let layouts = data
        .pointer("/spec/template/metadata/annotations")
        .and_then(|a| a.get(CREDENTIALS_LAYOUTS_ANNOTATION))
        .cloned();
    let mut template_annotations = serde_json::Map::new();
    if let Some(v) = layouts {
        template_annotations.insert(CREDENTIALS_LAYOUTS_ANNOTATION.to_owned(), v);
    }
    let mut spec = serde_json::Map::new();
    if let Some(selector) = data.pointer("/spec/selector") {
        spec.insert("selector".to_owned(), selector.clone());
    }
    spec.insert(
        "template".to_owned(),
        serde_json::json!({"metadata": {"annotations": template_annotations}}),
    );
    let mut status = serde_json::Map::new();
    if let Some(g) = data.pointer("/status/observedGeneration") {
        status.insert("observedGeneration".to_owned(), g.clone());
    }
    if let Some(r) = data.pointer("/status/replicas") {
        status.insert("replicas".to_owned(), r.clone());
    }
    let meta = object.metadata;
    DynamicObject {
        types: object.types,
        metadata: ObjectMeta {
            name: meta.name,
            namespace: meta.namespace,
            uid: meta.uid,
            resource_version: meta.resource_version,
            generation: meta.generation,
            labels: meta.labels,
            creation_timestamp: meta.creation_timestamp,
            deletion_timestamp: meta.deletion_timestamp,
            ..ObjectMeta::default()
        },
        data: serde_json::json!({"spec": spec, "status": status}),
    }
}

/// A watch event with its object reshaped by `shape`.
pub fn reshaped<T>(
    event: watcher::Event<T>,
    shape: impl Fn(T) -> DynamicObject,
) -> watcher::Event<DynamicObject> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(shape(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(shape(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(shape(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// A metadata watch's event as the whole-object event [`WatchState`] takes ([`metadata_only`]).
pub fn metadata_event(
    event: watcher::Event<PartialObjectMeta<DynamicObject>>,
) -> watcher::Event<DynamicObject> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(metadata_only(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(metadata_only(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(metadata_only(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// A watched object as the graph sees it: kind from the watched resource, namespace (empty for
/// cluster-scoped objects), name and resourceVersion from its metadata, and its JSON with
/// `apiVersion`/`kind` filled in (list items come without them) and `metadata.managedFields`
/// left out (bookkeeping of the API server, large, and read by no node). `None` for an object
/// without a name.
pub fn to_object(resource: &ApiResource, object: &DynamicObject) -> Option<Object> {
    let name = object.metadata.name.clone().filter(|n| !n.is_empty())?;
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let mut value = serde_json::to_value(object).ok()?;
    let map = value.as_object_mut()?;
    map.insert(
        "apiVersion".to_owned(),
        Value::String(resource.api_version.clone()),
    );
    map.insert("kind".to_owned(), Value::String(resource.kind.clone()));
    if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    Some(Object {
        kind: resource.kind.clone(),
        namespace,
        name,
        resource_version: object.metadata.resource_version.clone(),
        value,
    })
}

/// The key of a watched object (`None` without a name).
pub fn to_key(resource: &ApiResource, object: &DynamicObject) -> Option<ObjectKey> {
    let name = object.metadata.name.clone().filter(|n| !n.is_empty())?;
    Some(ObjectKey::new(
        resource.kind.clone(),
        object.metadata.namespace.clone().unwrap_or_default(),
        name,
    ))
}

/// What one watcher delivered so far.
#[derive(Debug, Clone)]
pub struct WatchState {
    resource: ApiResource,
    /// Every key delivered and not deleted, with its last resourceVersion.
    known: BTreeMap<ObjectKey, Option<String>>,
    /// The keys listed since the current (re-)list began.
    listing: Option<BTreeSet<ObjectKey>>,
    synced: bool,
    /// The object that says the last list was answered ([`WatchState::with_listed_marker`]),
    /// and what the graph was last told of it.
    listed: Option<(ObjectKey, Marker)>,
}

/// What the graph was last told of a listed marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    /// Nothing yet by this process: a journal of an earlier one may still hold it.
    Untold,
    /// Deleted.
    Absent,
    /// Applied.
    Delivered,
}

impl WatchState {
    /// A watcher of `resource` that delivered nothing yet.
    pub fn new(resource: ApiResource) -> Self {
        WatchState {
            resource,
            known: BTreeMap::new(),
            listing: None,
            synced: false,
            listed: None,
        }
    }

    /// The same watcher, delivering `marker` (an object with an empty value) while what it
    /// delivered is a whole answered list and what followed it: applied when a list ends,
    /// deleted when a (re-)list begins or a list or watch is refused ([`WatchState::refused`]),
    /// and deleted at this process's first list in case an earlier process's journal holds it.
    /// What lets the graph tell an empty answer from no answer, or from half of one.
    pub fn with_listed_marker(mut self, marker: ObjectKey) -> Self {
        self.listed = Some((marker, Marker::Untold));
        self
    }

    /// The graph events of a refused list or watch: the deletion of the listed marker, unless
    /// the graph was told already. What was listed before stays as it was (a refusal shows
    /// nothing); the marker comes back only with the next whole list.
    pub fn refused(&mut self) -> Vec<Event> {
        self.unlisted().into_iter().collect()
    }

    /// A (re-)list begins: what it lists is collected, and until it ends the view is partial.
    fn begin_list(&mut self, out: &mut Vec<Event>) {
        self.listing = Some(BTreeSet::new());
        out.extend(self.unlisted());
    }

    fn unlisted(&mut self) -> Option<Event> {
        match &mut self.listed {
            Some((key, told)) if *told != Marker::Absent => {
                *told = Marker::Absent;
                Some(Event::Deleted(key.clone()))
            }
            _ => None,
        }
    }

    /// Whether the first list completed (`InitDone` seen once).
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// The watched resource.
    pub fn resource(&self) -> &ApiResource {
        &self.resource
    }

    fn applied(&mut self, object: &DynamicObject, out: &mut Vec<Event>) {
        let Some(object) = to_object(&self.resource, object) else {
            return;
        };
        let key = object.key();
        if let Some(listing) = &mut self.listing {
            listing.insert(key.clone());
        }
        let unchanged = object.resource_version.is_some()
            && self
                .known
                .get(&key)
                .is_some_and(|rv| *rv == object.resource_version);
        if unchanged {
            return;
        }
        self.known.insert(key, object.resource_version.clone());
        out.push(Event::Applied(object));
    }

    /// The graph events of one watch event: `Apply`/`InitApply` → `Applied` (skipped when the
    /// resourceVersion is the one already delivered), `Delete` → `Deleted`, `InitDone` →
    /// `Deleted` for every key delivered before the re-list and not listed in it; with a listed
    /// marker, its deletion when a list begins and its application, last, when one ends.
    pub fn on_event(&mut self, event: watcher::Event<DynamicObject>) -> Vec<Event> {
        let mut out = Vec::new();
        match event {
            watcher::Event::Apply(o) => self.applied(&o, &mut out),
            watcher::Event::InitApply(o) => {
                // A streaming list may begin without `Init`.
                if self.listing.is_none() {
                    self.begin_list(&mut out);
                }
                self.applied(&o, &mut out);
            }
            watcher::Event::Delete(o) => {
                if let Some(key) = to_key(&self.resource, &o) {
                    if let Some(listing) = &mut self.listing {
                        listing.remove(&key);
                    }
                    self.known.remove(&key);
                    out.push(Event::Deleted(key));
                }
            }
            watcher::Event::Init => self.begin_list(&mut out),
            watcher::Event::InitDone => {
                let listed = self.listing.take().unwrap_or_default();
                let gone: Vec<ObjectKey> = self
                    .known
                    .keys()
                    .filter(|k| !listed.contains(*k))
                    .cloned()
                    .collect();
                for key in gone {
                    self.known.remove(&key);
                    out.push(Event::Deleted(key));
                }
                if let Some((key, told)) = &mut self.listed
                    && *told != Marker::Delivered
                {
                    *told = Marker::Delivered;
                    out.push(Event::Applied(Object::new(
                        &*key.kind,
                        &*key.namespace,
                        &*key.name,
                        serde_json::json!({}),
                    )));
                }
                self.synced = true;
            }
        }
        out
    }
}
