//! The structural diff of two machine configurations: which field paths changed.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{ChangeKind, DocumentKey, FieldPath};

/// Every changed path between `old` and `new`: whole documents added or removed, and inside a
/// document present on both sides, each added, removed or modified object key down to the
/// leaves. Arrays and scalars are compared as a whole at their path. A key that occurs more than
/// once on one side (Talos would refuse such a configuration) is compared as a whole document.
pub(super) fn changed_paths(old: &[Value], new: &[Value]) -> Vec<(DocumentKey, FieldPath, ChangeKind)> {
    let (old, new) = (group(old), group(new));
    let keys: BTreeSet<&DocumentKey> = old.keys().chain(new.keys()).collect();

    let mut out = Vec::new();
    for key in keys {
        match (old.get(key).map(Vec::as_slice), new.get(key).map(Vec::as_slice)) {
            (Some([a]), Some([b])) => {
                let mut path = Vec::new();
                diff_value(a, b, &mut path, &mut |path, change| {
                    out.push((key.clone(), FieldPath(path.to_vec()), change));
                });
            }
            (Some(a), Some(b)) if a == b => {}
            (Some(_), Some(_)) => out.push((key.clone(), FieldPath::default(), ChangeKind::Modified)),
            (Some(_), None) => out.push((key.clone(), FieldPath::default(), ChangeKind::Removed)),
            (None, Some(_)) => out.push((key.clone(), FieldPath::default(), ChangeKind::Added)),
            (None, None) => {}
        }
    }
    out
}

fn group(docs: &[Value]) -> BTreeMap<DocumentKey, Vec<&Value>> {
    let mut map: BTreeMap<DocumentKey, Vec<&Value>> = BTreeMap::new();
    for doc in docs {
        map.entry(DocumentKey::of(doc)).or_default().push(doc);
    }
    map
}

fn diff_value(a: &Value, b: &Value, path: &mut Vec<String>, emit: &mut dyn FnMut(&[String], ChangeKind)) {
    if a == b {
        return;
    }
    let (Value::Object(a), Value::Object(b)) = (a, b) else {
        emit(path, ChangeKind::Modified);
        return;
    };
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for key in keys {
        path.push(key.clone());
        match (a.get(key), b.get(key)) {
            (Some(x), Some(y)) => diff_value(x, y, path, emit),
            (Some(_), None) => emit(path, ChangeKind::Removed),
            (None, Some(_)) => emit(path, ChangeKind::Added),
            (None, None) => {}
        }
        path.pop();
    }
}
