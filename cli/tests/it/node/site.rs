//! A user's machine at the site, inside the node's namespace: the site's DNS name of the issuer
//! resolves to the issuer Service's ClusterIP (an `/etc/hosts` bind-mounted in a private mount
//! namespace of the command, so nothing of the machine's changes and no DNS query is made), the
//! site's CA is trusted (`ICHOR_CA_FILE`), `ichor` is on `PATH` (the downloaded kubeconfig's
//! exec plugin), and the user's home is the test's. Chromium (`ui/e2e/walkthrough.mjs`) gets the
//! same mapping as a resolver rule.

use std::io::{BufRead as _, BufReader};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use ichor_testkit::issuer::sign_in::{self, SlowDown};

/// The user's machine.
pub struct Site {
    hosts: PathBuf,
    ca_file: PathBuf,
    home: PathBuf,
    host: String,
    url: String,
}

impl Site {
    /// The site where `host` (the issuer URL `url`'s) is `address`, trusting `ca_file`, with
    /// `home` as the user's home; its hosts file is written under `dir`.
    pub fn new(
        dir: &Path,
        host: &str,
        url: &str,
        address: IpAddr,
        ca_file: &Path,
        home: &Path,
    ) -> anyhow::Result<Self> {
        let site = Self {
            hosts: dir.join("site-hosts"),
            ca_file: ca_file.to_path_buf(),
            home: home.to_path_buf(),
            host: host.to_owned(),
            url: url.to_owned(),
        };
        site.resolve_to(address)?;
        Ok(site)
    }

    /// The site's DNS now answers `address` for the issuer's name (its Service was recreated).
    pub fn resolve_to(&self, address: IpAddr) -> anyhow::Result<()> {
        std::fs::write(
            &self.hosts,
            format!("127.0.0.1 localhost\n{address} {}\n", self.host),
        )
        .with_context(|| format!("writing {}", self.hosts.display()))
    }

    /// `program args…` on the user's machine.
    pub fn command(&self, program: &Path, args: &[&str]) -> Command {
        let ichor_dir = Path::new(env!("CARGO_BIN_EXE_ichor"))
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let inherited = std::env::var_os("PATH").unwrap_or_default();
        let path = std::iter::once(ichor_dir).chain(std::env::split_paths(&inherited));
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
            .arg("mount --bind \"$ICHOR_SITE_HOSTS\" /etc/hosts && exec \"$@\"")
            .arg("sh")
            .arg(program)
            .args(args)
            .env("ICHOR_SITE_HOSTS", &self.hosts)
            .env("ICHOR_CA_FILE", &self.ca_file)
            .env("HOME", &self.home)
            .env("KUBECACHEDIR", self.home.join(".kube/cache"))
            .env("PATH", std::env::join_paths(path).unwrap_or_default())
            .env_remove("KUBECONFIG")
            .env_remove("ICHOR_ISSUER")
            .env_remove("KUBERNETES_EXEC_INFO")
            .stdin(Stdio::null());
        cmd
    }

    /// `kubectl --kubeconfig KUBECONFIG ARGS` on the user's machine (its exec plugin `ichor auth
    /// token` included); stdout, or an error quoting stderr.
    pub fn kubectl(&self, kubectl: &Path, kubeconfig: &Path, args: &[&str]) -> anyhow::Result<String> {
        let config = format!("--kubeconfig={}", kubeconfig.display());
        let mut all = vec![config.as_str()];
        all.extend_from_slice(args);
        let out = self.command(kubectl, &all).output()?;
        if !out.status.success() {
            bail!(
                "kubectl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `ichor auth login --issuer URL --no-browser` as the user runs it, the browser's part
    /// played over HTTPS (`http` resolves the site's name as the site does): the exec plugin's
    /// tokens cached in the user's home.
    pub async fn login(&self, http: &reqwest::Client, user: &str, password: &str) -> anyhow::Result<()> {
        let ichor = Path::new(env!("CARGO_BIN_EXE_ichor"));
        let mut child = self
            .command(ichor, &["auth", "login", "--issuer", &self.url, "--no-browser"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("running ichor auth login")?;
        let stderr = child.stderr.take().context("the login's stderr")?;
        let (url_tx, url_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.trim().starts_with("https://") && line.contains("/oidc/authorize?") {
                    let _ = url_tx.send(line.trim().to_owned());
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        let authorize = url_rx.recv_timeout(Duration::from_secs(60));
        let Ok(authorize) = authorize else {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "ichor auth login printed no URL: {}",
                reader.join().unwrap_or_default()
            );
        };
        let callback = sign_in::approve(http, &authorize, user, password, SlowDown::Wait)
            .await
            .map_err(|refusal| anyhow::anyhow!("the browser's part of ichor auth login: {refusal}"))?;
        let plain = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?;
        let answer = plain.get(&callback).send().await?;
        ensure!(
            answer.status().is_success(),
            "the CLI's callback answered {}",
            answer.status()
        );
        let status = tokio::task::spawn_blocking(move || child.wait()).await??;
        let printed = reader.join().unwrap_or_default();
        ensure!(status.success(), "ichor auth login failed: {printed}");
        Ok(())
    }
}

/// The browser's step of the walkthrough (`ui/e2e/walkthrough.mjs` in headless Chromium): signs
/// `user` in at `url` with `first` (the host resolving to `address`, the site's CA trusted),
/// sets `new` as the must-change password, and downloads the user's kubeconfig to `out`. Each
/// step's duration as the script printed it.
pub fn browser_sign_in(
    url: &str,
    address: IpAddr,
    ca_file: &Path,
    user: &str,
    first: &str,
    new: &str,
    out: &Path,
) -> anyhow::Result<String> {
    let root = ichor_testkit::consumers::repo_root();
    let Some(_) = ichor_testkit::consumers::require_path(
        root.join("ui/node_modules/playwright-core/package.json"),
        "hack/ui/test.sh (npm ci in ui/)",
    ) else {
        bail!("playwright-core is not installed in ui/node_modules");
    };
    let address = address.to_string();
    let out_arg = out.display().to_string();
    let ca = ca_file.display().to_string();
    let answer = Command::new("node")
        .arg(root.join("ui/e2e/walkthrough.mjs"))
        .args([
            "--url",
            url,
            "--address",
            &address,
            "--ca",
            &ca,
            "--user",
            user,
            "--first-password",
            first,
            "--new-password",
            new,
            "--out",
            &out_arg,
        ])
        .stdin(Stdio::null())
        .output()
        .context("running node ui/e2e/walkthrough.mjs")?;
    let stdout = String::from_utf8_lossy(&answer.stdout).into_owned();
    ensure!(
        answer.status.success(),
        "Chromium's sign-in failed ({}): {}{stdout}",
        answer.status,
        String::from_utf8_lossy(&answer.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    let report: serde_json::Value =
        serde_json::from_str(last).with_context(|| format!("the script's last line is not JSON: {last}"))?;
    ensure!(report["ok"] == true, "{report}");
    Ok(report["steps"].to_string())
}
