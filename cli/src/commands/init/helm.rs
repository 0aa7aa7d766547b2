//! The `helm` binary that switches the issuer on: `helm upgrade` of the installed release with
//! its own chart, its values kept (`--reuse-values`) and only `ichorUI.users.*` set, plus
//! `controller.rollout.clusters` when the cluster must be added to it.

use std::{ffi::OsString, path::Path};

use ichor_renderers::crd::NAMESPACE;

use super::InitError;

/// The environment variable naming the helm binary when `--helm` is not given.
pub const HELM_ENV: &str = "ICHOR_HELM";

/// The most of helm's stderr an error quotes.
const STDERR_TAIL: usize = 2000;

/// A helm binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Helm {
    /// The program: a path, or a name looked up on PATH.
    pub program: OsString,
}

impl Helm {
    /// `--helm`, else `$ICHOR_HELM`, else `helm` on PATH.
    pub fn choose(flag: Option<OsString>, env: Option<OsString>) -> Self {
        let program = flag
            .or(env.filter(|e| !e.is_empty()))
            .unwrap_or_else(|| OsString::from("helm"));
        Self { program }
    }

    /// The arguments of the upgrade that switches users on at `url` and, with
    /// `rollout_clusters`, sets `controller.rollout.clusters` to that whole list (one
    /// `--set-json` value: a JSON array of strings). The URL is one `--set-string` value,
    /// escaped by helm's rules ([`set_value`]), so no character of it can start another value.
    pub fn upgrade_args(
        release: &str,
        chart_dir: &Path,
        url: &str,
        rollout_clusters: Option<&[String]>,
    ) -> Vec<OsString> {
        let mut args: Vec<OsString> = ["upgrade", release].iter().map(OsString::from).collect();
        args.push(chart_dir.as_os_str().to_owned());
        for a in [
            "-n",
            NAMESPACE,
            "--reuse-values",
            "--set-string",
            &format!("ichorUI.users.externalURL={}", set_value(url)),
            "--set",
            "ichorUI.users.enabled=true",
            "--wait=false",
        ] {
            args.push(a.into());
        }
        if let Some(clusters) = rollout_clusters {
            let list = serde_json::Value::from(clusters.to_vec());
            args.push("--set-json".into());
            args.push(format!("controller.rollout.clusters={list}").into());
        }
        args
    }

    async fn output(&self, args: &[OsString]) -> std::io::Result<std::process::Output> {
        tokio::process::Command::new(&self.program)
            .args(args)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
    }

    /// Checks that the binary runs (`helm version --short`) and returns its version line.
    ///
    /// # Errors
    /// [`InitError::NoHelm`].
    pub async fn check(&self) -> Result<String, InitError> {
        let no_helm = |reason: String| InitError::NoHelm {
            program: self.program.to_string_lossy().into_owned(),
            reason,
        };
        let out = self
            .output(&["version".into(), "--short".into()])
            .await
            .map_err(|e| no_helm(e.to_string()))?;
        if !out.status.success() {
            return Err(no_helm(format!(
                "`version --short` failed: {}",
                tail(&out.stderr)
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Runs the upgrade of `release` with the chart in `chart_dir` ([`Helm::upgrade_args`]).
    ///
    /// # Errors
    /// [`InitError::Helm`] with the tail of helm's stderr.
    pub async fn upgrade(
        &self,
        release: &str,
        chart_dir: &Path,
        url: &str,
        rollout_clusters: Option<&[String]>,
    ) -> Result<(), InitError> {
        let helm_error = |stderr: String| InitError::Helm {
            release: release.to_owned(),
            stderr,
        };
        let out = self
            .output(&Self::upgrade_args(release, chart_dir, url, rollout_clusters))
            .await
            .map_err(|e| helm_error(e.to_string()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(helm_error(tail(&out.stderr)))
        }
    }
}

/// `value` as the value of one `--set`/`--set-string` pair: helm's parser (`strvals`) ends a
/// value at an unescaped `,` and takes the character after a `\` literally, so both are
/// escaped with a `\`. (A value starting with `{` would be a list; an https URL never does.)
pub fn set_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, ',' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The last [`STDERR_TAIL`] bytes of `stderr`, trimmed, cut on a character boundary.
fn tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim();
    let mut start = text.len().saturating_sub(STDERR_TAIL);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_flag_wins_over_the_environment_and_helm_on_path_is_the_default() {
        let flag = Some(OsString::from("/opt/helm"));
        let env = Some(OsString::from("/usr/local/bin/helm3"));
        assert_eq!(Helm::choose(flag, env.clone()).program, "/opt/helm");
        assert_eq!(Helm::choose(None, env).program, "/usr/local/bin/helm3");
        assert_eq!(Helm::choose(None, Some(OsString::new())).program, "helm");
        assert_eq!(Helm::choose(None, None).program, "helm");
    }

    #[test]
    fn a_set_value_escapes_commas_and_backslashes_only() {
        assert_eq!(
            set_value("https://ichor.example.com/a"),
            "https://ichor.example.com/a"
        );
        assert_eq!(set_value("https://x/a,b=c\\d"), "https://x/a\\,b=c\\\\d");
    }

    #[test]
    fn the_stderr_tail_keeps_the_end() {
        let long = format!("{}Error: UPGRADE FAILED: boom\n", "x".repeat(5000));
        let t = tail(long.as_bytes());
        assert!(t.ends_with("UPGRADE FAILED: boom"));
        assert_eq!(t.len(), STDERR_TAIL);
    }

    #[test]
    fn the_rollout_clusters_are_one_json_list_set_only_when_given() {
        let dir = Path::new("/tmp/chart");
        let without = Helm::upgrade_args("ichor", dir, "https://x", None);
        assert!(!without.iter().any(|a| a == "--set-json"), "{without:?}");
        let clusters = ["staging".to_owned(), "prod".to_owned()];
        let with = Helm::upgrade_args("ichor", dir, "https://x", Some(&clusters));
        let at = with.iter().position(|a| a == "--set-json").unwrap();
        assert_eq!(with[at + 1], r#"controller.rollout.clusters=["staging","prod"]"#);
    }

    #[tokio::test]
    async fn a_missing_binary_is_a_clear_error() {
        let helm = Helm::choose(Some("/nonexistent/helm".into()), None);
        let e = helm.check().await.unwrap_err();
        assert!(matches!(e, InitError::NoHelm { .. }), "{e}");
        assert!(e.to_string().contains("/nonexistent/helm"), "{e}");
    }
}
