//! The Cilium chart's `values.schema.json` (v1.20.0, draft-07, see `renderers/data/cilium/`),
//! embedded in the binary and compiled once, and the unknown-key walk the schema cannot do
//! itself (it has no `additionalProperties: false` anywhere, so Helm accepts any typo).

use std::sync::LazyLock;

use serde_json::{Map, Value};

use super::CniViolation;
use super::path::{push_index, push_key};

/// The chart version the embedded schema belongs to.
pub const CHART_VERSION: &str = "1.20.0";

/// The verbatim chart schema (sha256 `736bf1f5…7255f56`, provenance in `SOURCE.md` beside it).
const SCHEMA_JSON: &str = include_str!("../../data/cilium/values.schema.json");

/// The most schema findings reported for one layer; the rest are summarised in one finding.
pub const MAX_SCHEMA_FINDINGS: usize = 32;

/// Keys whose value the chart renders verbatim as a Kubernetes object (`toYaml`): their schema
/// `properties` come from the chart's example defaults only, so any Kubernetes field is
/// accepted below them. Below these names the unknown-key walk stops.
const PASS_THROUGH: &[&str] = &[
    "affinity",
    "appArmorProfile",
    "hard",
    "lifecycle",
    "livenessProbe",
    "matchLabels",
    "nodeSelector",
    "podSecurityContext",
    "readinessProbe",
    "resources",
    "seLinuxOptions",
    "seccompProfile",
    "startupProbe",
    "updateStrategy",
];

/// The parsed schema tree and its compiled validator, built once per process.
struct Compiled {
    tree: Value,
    validator: jsonschema::Validator,
}

static COMPILED: LazyLock<Result<Compiled, String>> = LazyLock::new(|| {
    let tree: Value =
        serde_json::from_str(SCHEMA_JSON).map_err(|e| format!("the embedded schema is not JSON: {e}"))?;
    let validator =
        jsonschema::draft7::new(&tree).map_err(|e| format!("the embedded schema does not compile: {e}"))?;
    Ok(Compiled { tree, validator })
});

/// Whether the embedded schema parsed and compiled (a build defect otherwise; tests assert it).
pub fn is_ready() -> bool {
    COMPILED.is_ok()
}

/// Validates the layer against the chart schema and walks it for unknown keys.
/// The caller has bounded the layer's depth (see `bounds`), so the recursion here is bounded.
pub fn check(values: &Value, field: &str, out: &mut Vec<CniViolation>) {
    let compiled = match &*COMPILED {
        Ok(compiled) => compiled,
        Err(defect) => {
            // Fail closed: without the schema nothing about the layer is known to be safe.
            out.push(CniViolation::new(field, format!("cannot be checked: {defect}")));
            return;
        }
    };
    unknown_keys(values, &compiled.tree, field, None, out);
    let mut findings = 0usize;
    for error in compiled.validator.iter_errors(values) {
        findings += 1;
        if findings > MAX_SCHEMA_FINDINGS {
            continue;
        }
        let mut at = field.to_owned();
        for segment in error.instance_path().iter() {
            at = match segment {
                jsonschema::paths::LocationSegment::Property(key) => push_key(&at, &key),
                jsonschema::paths::LocationSegment::Index(index) => push_index(&at, index),
            };
        }
        out.push(CniViolation::new(
            at,
            format!(
                "does not match the Cilium {CHART_VERSION} chart schema: {}",
                error.masked_with("the value")
            ),
        ));
    }
    if findings > MAX_SCHEMA_FINDINGS {
        out.push(CniViolation::new(
            field,
            format!(
                "has {} more chart schema problems than the {MAX_SCHEMA_FINDINGS} listed",
                findings - MAX_SCHEMA_FINDINGS
            ),
        ));
    }
}

/// Refuses object keys the schema does not declare, where the schema declares the object's
/// keys (`properties`). Free-form maps (no `properties`), label maps (keys such as
/// `kubernetes.io/os`), Kubernetes pass-through objects and arrays are not walked.
fn unknown_keys(value: &Value, schema: &Value, field: &str, name: Option<&str>, out: &mut Vec<CniViolation>) {
    if name.is_some_and(|n| PASS_THROUGH.contains(&n)) {
        return;
    }
    let (Value::Object(map), Some(Value::Object(properties))) = (value, schema.get("properties")) else {
        return;
    };
    if is_label_map(properties) {
        return;
    }
    for (key, child) in map {
        let at = push_key(field, key);
        match properties.get(key) {
            Some(child_schema) => unknown_keys(child, child_schema, &at, Some(key), out),
            None => out.push(CniViolation::new(
                at,
                unknown_message(key, properties, name.is_none()),
            )),
        }
    }
}

/// A schema object whose declared keys look like Kubernetes label keys (`kubernetes.io/os`) is
/// a label map with an example default, not a fixed set of fields.
fn is_label_map(properties: &Map<String, Value>) -> bool {
    properties.keys().any(|k| k.contains('/') || k.contains('.'))
}

fn unknown_message(key: &str, properties: &Map<String, Value>, at_root: bool) -> String {
    if at_root && key == "tunnel" {
        return String::from(
            "was removed from the Cilium chart in 1.15 and the chart fails when it is set; \
             choose the tunnel mode with spec.cni.tunnel",
        );
    }
    let mut message = format!(
        "is not a value of the Cilium {CHART_VERSION} chart (the chart ignores unknown keys, so a typo \
         would pass silently)"
    );
    if let Some(near) = properties.keys().find(|k| k.eq_ignore_ascii_case(key)) {
        message.push_str(&format!("; did you mean `{near}`?"));
    }
    message
}
