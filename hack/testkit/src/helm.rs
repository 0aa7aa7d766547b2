//! The real helm client against a test control plane: the binary `hack/kube/build.sh` builds
//! from `helm.sh/helm/v3` ([`KubeBinary::Helm`]), the control plane's admin kubeconfig, and
//! Helm's cache, configuration and data directories under a home of the test's own, so nothing
//! of the machine's Helm set-up is read or written. Releases are stored as Helm stores them by
//! default (Secrets of type `helm.sh/release.v1` in the release namespace).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context as _;

use crate::consumers::{self, KubeBinary, repo_root};
use crate::control_plane::ControlPlane;
use crate::install::NAMESPACE;

/// A helm client for one control plane.
#[derive(Clone, Debug)]
pub struct Helm {
    bin: PathBuf,
    kubeconfig: PathBuf,
    home: PathBuf,
}

impl Helm {
    /// The client for `plane` as its admin, with `home` for Helm's directories. A missing
    /// binary fails the test; `None` only under `ICHOR_REQUIRE_CONSUMERS=0`
    /// ([`consumers::require`]).
    pub fn new(plane: &ControlPlane, home: &Path) -> Option<Self> {
        Some(Self {
            bin: consumers::require(KubeBinary::Helm)?,
            kubeconfig: plane.admin_kubeconfig().to_path_buf(),
            home: home.to_path_buf(),
        })
    }

    /// The helm binary.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// The directory of the helm binary, to put first on a `PATH`.
    pub fn bin_dir(&self) -> &Path {
        self.bin.parent().unwrap_or_else(|| Path::new("."))
    }

    /// The environment every helm run gets, also to give a program that runs helm itself:
    /// `KUBECONFIG` (the admin's), `HOME`, and Helm's cache, configuration and data directories
    /// under the home.
    pub fn env(&self) -> Vec<(&'static str, PathBuf)> {
        vec![
            ("KUBECONFIG", self.kubeconfig.clone()),
            ("HOME", self.home.clone()),
            ("HELM_CACHE_HOME", self.home.join(".cache/helm")),
            ("HELM_CONFIG_HOME", self.home.join(".config/helm")),
            ("HELM_DATA_HOME", self.home.join(".local/share/helm")),
        ]
    }

    /// The variables that change what helm does and that [`Helm::env`] does not set; a program
    /// given that environment should not inherit them either.
    pub const UNSET: [&'static str; 6] = [
        "HELM_NAMESPACE",
        "HELM_KUBECONTEXT",
        "HELM_DRIVER",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
    ];

    /// helm with `args` and [`Helm::env`], stdin closed.
    pub fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args).envs(self.env()).stdin(Stdio::null());
        for name in Self::UNSET {
            cmd.env_remove(name);
        }
        cmd
    }

    /// Runs helm with `args`: its stdout, or an error with its stderr.
    ///
    /// # Errors
    /// helm could not run, or failed.
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> anyhow::Result<String> {
        let shown = || {
            args.iter()
                .map(|a| a.as_ref().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let out = self
            .command(args)
            .output()
            .with_context(|| format!("running {} {}", self.bin.display(), shown()))?;
        anyhow::ensure!(
            out.status.success(),
            "helm {} failed ({}): {}",
            shown(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `helm install RELEASE helm/ichor -n ichor-system` with `extra` arguments (`--set ...`),
    /// without waiting for the workloads (no kubelet runs them).
    ///
    /// # Errors
    /// What helm answered.
    pub fn install_chart(&self, release: &str, extra: &[&str]) -> anyhow::Result<String> {
        self.run_on_chart("install", release, extra)
    }

    /// `helm template RELEASE helm/ichor -n ichor-system` with `extra` arguments: the manifest
    /// the chart renders, without the cluster.
    ///
    /// # Errors
    /// What helm answered.
    pub fn template_chart(&self, release: &str, extra: &[&str]) -> anyhow::Result<String> {
        self.run_on_chart("template", release, extra)
    }

    fn run_on_chart(&self, verb: &str, release: &str, extra: &[&str]) -> anyhow::Result<String> {
        let chart = repo_root().join("helm/ichor");
        let mut args: Vec<&OsStr> = vec![OsStr::new(verb), OsStr::new(release), chart.as_os_str()];
        args.extend(["-n", NAMESPACE].into_iter().map(OsStr::new));
        args.extend(extra.iter().map(OsStr::new));
        self.run(&args)
    }

    /// The manifest of the current revision of `release` (`helm get manifest`).
    ///
    /// # Errors
    /// What helm answered.
    pub fn manifest(&self, release: &str) -> anyhow::Result<String> {
        self.run(&["get", "manifest", release, "-n", NAMESPACE])
    }

    /// The values the user supplied to `release` (`helm get values -o json`): `{}` when none.
    ///
    /// # Errors
    /// What helm answered, or output that is not JSON.
    pub fn user_values(&self, release: &str) -> anyhow::Result<serde_json::Value> {
        let out = self.run(&["get", "values", release, "-n", NAMESPACE, "-o", "json"])?;
        let values: serde_json::Value =
            serde_json::from_str(&out).with_context(|| format!("helm get values printed {out:?}"))?;
        // helm prints `null` for a release installed without values.
        Ok(if values.is_null() {
            serde_json::json!({})
        } else {
            values
        })
    }

    /// The current revision of `release` and its status (`helm status -o json`).
    ///
    /// # Errors
    /// What helm answered, or output without the two fields.
    pub fn revision(&self, release: &str) -> anyhow::Result<(u64, String)> {
        let out = self.run(&["status", release, "-n", NAMESPACE, "-o", "json"])?;
        let status: serde_json::Value =
            serde_json::from_str(&out).with_context(|| format!("helm status printed {out:?}"))?;
        let version = status["version"]
            .as_u64()
            .with_context(|| format!("helm status has no version: {out}"))?;
        let state = status["info"]["status"]
            .as_str()
            .with_context(|| format!("helm status has no info.status: {out}"))?;
        Ok((version, state.to_owned()))
    }
}
