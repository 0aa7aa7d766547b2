//! kubectl as a value: its binary, a kubeconfig, and optionally the apiserver to talk to, a
//! cache directory and a user to impersonate. It borrows nothing, so a test can read objects
//! through it while another thread holds the control plane or the node that made it (a restart
//! hook, a rollout), and run kubectl with a kubeconfig other than the admin's (a
//! ServiceAccount's token).

use std::ffi::OsStr;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::Context as _;

/// One way of running kubectl; see the module's documentation.
#[derive(Clone, Debug)]
pub struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    server: Option<String>,
    cache_dir: Option<PathBuf>,
    impersonate: Option<(String, Vec<String>)>,
}

impl Kubectl {
    /// kubectl `bin` with `kubeconfig` (and no `KUBECONFIG` from the environment).
    pub fn new(bin: impl Into<PathBuf>, kubeconfig: impl Into<PathBuf>) -> Self {
        Kubectl {
            bin: bin.into(),
            kubeconfig: kubeconfig.into(),
            server: None,
            cache_dir: None,
            impersonate: None,
        }
    }

    /// The same, talking to the apiserver at `url` (`--server`) instead of the kubeconfig's.
    pub fn with_server(mut self, url: impl Into<String>) -> Self {
        self.server = Some(url.into());
        self
    }

    /// The same, with its discovery cache in `dir` (`KUBECACHEDIR`) rather than the user's home.
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// The same, impersonating `user` in `groups` (`--as`, `--as-group`).
    pub fn impersonating(mut self, user: &str, groups: &[&str]) -> Self {
        self.impersonate = Some((user.to_owned(), groups.iter().map(|g| (*g).to_owned()).collect()));
        self
    }

    /// The command with every flag of this value and no arguments yet; stdin is closed.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.arg(format!("--kubeconfig={}", self.kubeconfig.display()));
        if let Some(server) = &self.server {
            cmd.arg(format!("--server={server}"));
        }
        if let Some((user, groups)) = &self.impersonate {
            cmd.arg(format!("--as={user}"));
            for g in groups {
                cmd.arg(format!("--as-group={g}"));
            }
        }
        if let Some(dir) = &self.cache_dir {
            cmd.env("KUBECACHEDIR", dir);
        }
        cmd.env_remove("KUBECONFIG").stdin(Stdio::null());
        cmd
    }

    /// Runs `kubectl ARGS` with `stdin`: `Ok(stdout)` when kubectl succeeded, `Err(stderr)`
    /// (trimmed, what a user reads) when it failed.
    ///
    /// # Errors
    /// kubectl could not be run.
    pub fn output<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        stdin: Option<&str>,
    ) -> anyhow::Result<Result<String, String>> {
        let mut cmd = self.command();
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        if stdin.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.spawn().context("running kubectl")?;
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(input.as_bytes())?;
        }
        let out = child.wait_with_output()?;
        Ok(if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        })
    }

    /// Runs `kubectl ARGS` with `stdin`: its stdout.
    ///
    /// # Errors
    /// kubectl could not be run, or failed: `kubectl ARGS: STDERR`.
    pub fn run(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
        self.output(args, stdin)?
            .map_err(|stderr| anyhow::anyhow!("kubectl {}: {stderr}", args.join(" ")))
    }

    /// `kubectl get KIND NAME -n NAMESPACE -o json`: the object, `None` when it does not exist.
    ///
    /// # Errors
    /// kubectl failed, or its output is not JSON.
    pub fn get(&self, kind: &str, namespace: &str, name: &str) -> anyhow::Result<Option<serde_json::Value>> {
        let text = self.run(
            &[
                "get",
                kind,
                name,
                "-n",
                namespace,
                "-o",
                "json",
                "--ignore-not-found",
            ],
            None,
        )?;
        Ok(if text.trim().is_empty() {
            None
        } else {
            Some(serde_json::from_str(&text)?)
        })
    }
}
