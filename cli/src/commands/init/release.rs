//! The installed chart's Helm release, as Helm v3 stores it: a Secret of type
//! `helm.sh/release.v1` (labels `owner=helm`, `status=deployed`, `name=<release>`) whose
//! `data.release` is Helm's own base64 of the gzip of the release's JSON (the Secret's base64 is
//! a second layer, removed by the Kubernetes client).
//!
//! Pure: decoding ([`decode_release`]), the decision whether the issuer must be switched on
//! ([`decide`]) and the files of the release's own chart ([`chart_files`], [`write_chart`]).
//! Sizes are bounded before anything is decompressed or parsed.

use std::{
    io::Read as _,
    path::{Component, Path, PathBuf},
};

use base64::{Engine as _, engine::general_purpose::STANDARD};
use serde::Deserialize;
use serde_json::Value;

/// The Secret type of a Helm v3 release record.
pub const RELEASE_SECRET_TYPE: &str = "helm.sh/release.v1";
/// The label selector of deployed Helm releases.
pub const DEPLOYED_SELECTOR: &str = "owner=helm,status=deployed";
/// The chart whose releases `ichor init` upgrades.
pub const CHART_NAME: &str = "ichor";
/// The largest gzip record accepted.
pub const MAX_COMPRESSED: usize = 8 << 20;
/// The largest release JSON accepted, once decompressed.
pub const MAX_DECOMPRESSED: usize = 32 << 20;

const GZIP_MAGIC: [u8; 3] = [0x1f, 0x8b, 0x08];

/// Why a release record is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReleaseError {
    /// The record is larger than the bounds.
    #[error("the release record is larger than {0} bytes")]
    TooLarge(usize),
    /// Helm's base64 layer is broken.
    #[error("the release record is not base64: {0}")]
    Base64(String),
    /// The gzip stream is broken.
    #[error("the release record is not valid gzip: {0}")]
    Gzip(String),
    /// The JSON is not a Helm release.
    #[error("the release record is not a Helm v3 release: {0}")]
    Json(String),
    /// The release is of another chart.
    #[error("the release is of chart {0:?}, not {CHART_NAME:?}")]
    OtherChart(String),
    /// The chart has subcharts, which the record does not carry.
    #[error("the release's chart declares dependencies, which its record does not carry")]
    Dependencies,
    /// A file of the chart has a path that would leave the chart directory.
    #[error("the release's chart has a file with an unsafe path {0:?}")]
    UnsafePath(String),
    /// A file's content is not base64.
    #[error("the release's chart file {0:?} is not base64")]
    FileData(String),
    /// Writing the chart to disk failed.
    #[error("cannot write the release's chart to {0}: {1}")]
    Write(String, String),
    /// The Secret is not the record Helm would have written for the release it holds.
    #[error(
        "the Secret {secret:?} is not Helm's record of the release it holds ({what}); \
         it was not written by helm: inspect it with `helm history` and delete it"
    )]
    NotHelmsRecord {
        /// The Secret's name.
        secret: String,
        /// What does not match.
        what: String,
    },
}

/// Checks that a release Secret is the record Helm writes for `release`: named
/// `sh.helm.release.v1.<name>.v<version>`, labelled `owner=helm`, `name=<name>`,
/// `version=<version>`, in the namespace the release names. A Secret that anyone else with
/// `create` on Secrets wrote can claim anything in its data; a mismatch is refused rather than
/// upgraded from.
///
/// # Errors
/// [`ReleaseError::NotHelmsRecord`] naming the first mismatch.
pub fn check_record(
    secret_name: &str,
    labels: &std::collections::BTreeMap<String, String>,
    namespace: &str,
    release: &Release,
) -> Result<(), ReleaseError> {
    let mismatch = |what: String| ReleaseError::NotHelmsRecord {
        secret: secret_name.to_owned(),
        what,
    };
    let expected = format!("sh.helm.release.v1.{}.v{}", release.name, release.version);
    if secret_name != expected {
        return Err(mismatch(format!("its name is not {expected:?}")));
    }
    let label = |key: &str| labels.get(key).map(String::as_str);
    if label("owner") != Some("helm") {
        return Err(mismatch("its label owner is not \"helm\"".to_owned()));
    }
    if label("name") != Some(release.name.as_str()) {
        return Err(mismatch(format!("its label name is not {:?}", release.name)));
    }
    if label("version") != Some(release.version.to_string().as_str()) {
        return Err(mismatch(format!(
            "its label version is not \"{}\"",
            release.version
        )));
    }
    if release.namespace != namespace {
        return Err(mismatch(format!(
            "the release is of namespace {:?}, the Secret is in {namespace:?}",
            release.namespace
        )));
    }
    Ok(())
}

/// One file of a chart in a release record.
#[derive(Debug, Clone, Deserialize)]
pub struct ChartFile {
    /// Its path in the chart directory.
    pub name: String,
    /// Its content, base64 (Go's encoding of `[]byte`).
    #[serde(default)]
    pub data: String,
}

/// The chart of a release record.
#[derive(Debug, Clone, Deserialize)]
pub struct Chart {
    /// `Chart.yaml`, with the same keys.
    pub metadata: Value,
    /// `templates/*`.
    #[serde(default)]
    pub templates: Vec<ChartFile>,
    /// The other files (README, ...), not `Chart.yaml`, `values.yaml` or templates.
    #[serde(default)]
    pub files: Vec<ChartFile>,
    /// The chart's default values (`values.yaml`).
    #[serde(default)]
    pub values: Value,
    /// `values.schema.json`, base64, if any.
    #[serde(default)]
    pub schema: Option<String>,
}

/// A decoded Helm v3 release of the `ichor` chart.
#[derive(Debug, Clone, Deserialize)]
pub struct Release {
    /// The release name.
    pub name: String,
    /// Its revision.
    #[serde(default)]
    pub version: u64,
    /// Its namespace.
    #[serde(default)]
    pub namespace: String,
    /// The chart it was installed from.
    pub chart: Chart,
    /// The values the user supplied (`--set`, `-f`).
    #[serde(default)]
    pub config: Value,
}

impl Release {
    /// The chart's version, from its metadata.
    pub fn chart_version(&self) -> &str {
        self.chart.metadata["version"].as_str().unwrap_or("")
    }
}

/// Decodes `data.release` of a release Secret (after the Secret's own base64): Helm's base64,
/// then gzip (or plain JSON, as very old records are), then JSON. Refuses records over
/// [`MAX_COMPRESSED`] / [`MAX_DECOMPRESSED`] and releases of charts other than `ichor`.
///
/// # Errors
/// [`ReleaseError`].
pub fn decode_release(data: &[u8]) -> Result<Release, ReleaseError> {
    decode_bounded(data, MAX_COMPRESSED, MAX_DECOMPRESSED)
}

fn decode_bounded(data: &[u8], max_compressed: usize, max_json: usize) -> Result<Release, ReleaseError> {
    // Base64 is 4/3 of the bytes it carries.
    if data.len() > max_compressed / 3 * 4 + 4 {
        return Err(ReleaseError::TooLarge(max_compressed));
    }
    let text: Vec<u8> = data
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    let raw = STANDARD
        .decode(&text)
        .map_err(|e| ReleaseError::Base64(e.to_string()))?;
    if raw.len() > max_compressed {
        return Err(ReleaseError::TooLarge(max_compressed));
    }
    let json = if raw.starts_with(&GZIP_MAGIC) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(raw.as_slice())
            .take(max_json as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| ReleaseError::Gzip(e.to_string()))?;
        if out.len() > max_json {
            return Err(ReleaseError::TooLarge(max_json));
        }
        out
    } else {
        raw
    };
    let release: Release = serde_json::from_slice(&json).map_err(|e| ReleaseError::Json(e.to_string()))?;
    let chart = release.chart.metadata["name"].as_str().unwrap_or("");
    if chart != CHART_NAME {
        return Err(ReleaseError::OtherChart(chart.to_owned()));
    }
    Ok(release)
}

/// The inverse of [`decode_release`], as Helm writes `data.release`: base64 of the gzip of
/// the JSON. For tests and fixtures.
///
/// # Panics
/// Never: writing gzip into memory does not fail.
#[allow(clippy::expect_used)]
pub fn encode_release(release: &Value) -> String {
    use std::io::Write as _;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(release.to_string().as_bytes())
        .expect("gzip into memory");
    STANDARD.encode(gz.finish().expect("gzip into memory"))
}

/// What the release needs for the issuer to run at the URL asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// `ichorUI.users.enabled` is true with this `externalURL`: nothing to do.
    AlreadyOn,
    /// The issuer is off: `helm upgrade` turns it on.
    Upgrade,
}

/// Users are on in the release with another issuer URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtherUrl {
    /// The release's `ichorUI.users.externalURL`.
    pub current: String,
}

fn lookup<'a>(values: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(values, |v, key| v.get(key))
        .filter(|v| !v.is_null())
}

/// The effective value at `path`: the user's config over the chart's defaults.
fn effective<'a>(release: &'a Release, path: &[&str]) -> Option<&'a Value> {
    lookup(&release.config, path).or_else(|| lookup(&release.chart.values, path))
}

/// Whether users are on in the release, and its `externalURL` (without a trailing `/`).
fn users(release: &Release) -> (bool, &str) {
    let enabled = match effective(release, &["ichorUI", "users", "enabled"]) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s == "true",
        _ => false,
    };
    let current = effective(release, &["ichorUI", "users", "externalURL"])
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim_end_matches('/');
    (enabled, current)
}

/// The issuer URL the release runs, when users are on and it is a URL `ichor init --ui-url`
/// takes as it is; else `None`. For the commands printed to a person (the record is only as
/// trustworthy as whoever may write Secrets in the namespace). Pure.
pub fn users_url(release: &Release) -> Option<String> {
    match users(release) {
        (true, url) => super::check_ui_url(url).ok(),
        _ => None,
    }
}

/// Decides from the release's values whether `helm upgrade` must switch the issuer on for
/// `url` (https, no trailing `/`). Pure.
///
/// # Errors
/// [`OtherUrl`] when users are on with another `externalURL`: changing the issuer URL
/// invalidates every token and kubeconfig, so it is never done implicitly.
pub fn decide(release: &Release, url: &str) -> Result<Decision, OtherUrl> {
    let (enabled, current) = users(release);
    match (enabled, current) {
        (true, c) if c == url => Ok(Decision::AlreadyOn),
        (true, c) if !c.is_empty() => Err(OtherUrl {
            current: c.to_owned(),
        }),
        _ => Ok(Decision::Upgrade),
    }
}

/// The release's effective `controller.rollout.clusters` (the user's values over the chart's
/// defaults): the TalosClusters the controller rolls out. Non-string entries are skipped. Pure.
pub fn rollout_clusters(release: &Release) -> Vec<String> {
    // Only object names: the list goes into a command line a person is told to run, and the
    // record is only as trustworthy as whoever may write Secrets in the namespace.
    effective(release, &["controller", "rollout", "clusters"])
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .filter(|c| ichor_renderers::crd::is_object_name(c))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The `controller.rollout.clusters` the release must get so that the controller rolls out
/// `cluster` as well: `None` when it does already, else the release's list with `cluster`
/// appended (the others kept, in their order). Pure.
pub fn add_rollout_cluster(release: &Release, cluster: &str) -> Option<Vec<String>> {
    let mut clusters = rollout_clusters(release);
    if clusters.iter().any(|c| c == cluster) {
        return None;
    }
    clusters.push(cluster.to_owned());
    Some(clusters)
}

/// A relative path of a chart file that stays inside the chart directory.
///
/// # Errors
/// [`ReleaseError::UnsafePath`] for an empty or absolute path, or one with `..` or `.`.
pub fn safe_path(name: &str) -> Result<PathBuf, ReleaseError> {
    let bad = || ReleaseError::UnsafePath(name.to_owned());
    if name.is_empty() || name.contains('\\') || name.contains('\0') {
        return Err(bad());
    }
    let path = Path::new(name);
    if !path.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(bad());
    }
    Ok(path.to_path_buf())
}

fn yaml(value: &Value, what: &str) -> Result<Vec<u8>, ReleaseError> {
    serde_yaml::to_string(value)
        .map(String::into_bytes)
        .map_err(|e| ReleaseError::Write(what.to_owned(), e.to_string()))
}

/// The files of the release's own chart, by relative path: `Chart.yaml` (from the metadata),
/// `values.yaml` (the chart's defaults), `values.schema.json`, the templates and other files.
///
/// # Errors
/// [`ReleaseError::UnsafePath`], [`ReleaseError::FileData`], [`ReleaseError::Dependencies`].
pub fn chart_files(chart: &Chart) -> Result<Vec<(PathBuf, Vec<u8>)>, ReleaseError> {
    if chart.metadata["dependencies"]
        .as_array()
        .is_some_and(|d| !d.is_empty())
    {
        return Err(ReleaseError::Dependencies);
    }
    let mut out = vec![(PathBuf::from("Chart.yaml"), yaml(&chart.metadata, "Chart.yaml")?)];
    let values = if chart.values.is_null() {
        Value::Object(serde_json::Map::new())
    } else {
        chart.values.clone()
    };
    out.push((PathBuf::from("values.yaml"), yaml(&values, "values.yaml")?));
    if let Some(schema) = chart.schema.as_deref().filter(|s| !s.is_empty()) {
        let bytes = STANDARD
            .decode(schema)
            .map_err(|_| ReleaseError::FileData("values.schema.json".to_owned()))?;
        out.push((PathBuf::from("values.schema.json"), bytes));
    }
    for file in chart.templates.iter().chain(&chart.files) {
        let path = safe_path(&file.name)?;
        let bytes = STANDARD
            .decode(&file.data)
            .map_err(|_| ReleaseError::FileData(file.name.clone()))?;
        out.push((path, bytes));
    }
    Ok(out)
}

/// Writes the release's chart under `dir` (which must exist) and returns `dir`.
///
/// # Errors
/// As [`chart_files`], and [`ReleaseError::Write`].
pub fn write_chart(chart: &Chart, dir: &Path) -> Result<PathBuf, ReleaseError> {
    for (path, bytes) in chart_files(chart)? {
        let target = dir.join(&path);
        let io = |e: std::io::Error| ReleaseError::Write(target.display().to_string(), e.to_string());
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(&target, bytes).map_err(io)?;
    }
    Ok(dir.to_path_buf())
}

#[cfg(test)]
#[path = "release_tests.rs"]
mod tests;
