//! The clients of a [`ControlPlane`]: kubeconfigs (the admin's, a bearer token's), kubectl as
//! the admin or with a token, and plain HTTPS requests (`/readyz`, `/metrics`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};

use super::{ControlPlane, Kubectl, Response, https};

impl ControlPlane {
    /// The admin's kubeconfig YAML against apiserver `i`.
    pub fn kubeconfig_yaml(&self, i: usize) -> String {
        use base64::Engine as _;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}\n    certificate-authority-data: {}\nusers:\n- name: admin\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\ncontexts:\n- name: admin\n  context:\n    cluster: test\n    user: admin\ncurrent-context: admin\n",
            self.url(i),
            b64(&self.pki.ca_pem),
            b64(&self.pki.admin.cert_pem),
            b64(&self.pki.admin.key_pem)
        )
    }

    /// A kubeconfig YAML against apiserver `i` that presents `token` and nothing else.
    pub fn token_kubeconfig_yaml(&self, i: usize, token: &str) -> String {
        use base64::Engine as _;
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}\n    certificate-authority-data: {}\nusers:\n- name: bearer\n  user:\n    token: {token}\ncontexts:\n- name: bearer\n  context:\n    cluster: test\n    user: bearer\ncurrent-context: bearer\n",
            self.url(i),
            base64::engine::general_purpose::STANDARD.encode(&self.pki.ca_pem),
        )
    }

    /// A token of the ServiceAccount `namespace/name` from the TokenRequest API (`kubectl create
    /// token`), bound to no object, valid for `valid_for` (at least ten minutes).
    pub fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
        valid_for: Duration,
    ) -> anyhow::Result<String> {
        let duration = format!("--duration={}s", valid_for.as_secs());
        let token = self.kubectl_run(&["create", "token", name, "-n", namespace, &duration], None)?;
        let token = token.trim();
        anyhow::ensure!(
            !token.is_empty(),
            "kubectl create token {namespace}/{name} printed no token"
        );
        Ok(token.to_owned())
    }

    /// A kubeconfig file (in the control plane's directory) for apiserver `i` that presents the
    /// bearer `token`: what a component started as a local process gets as `KUBECONFIG`.
    pub fn token_kubeconfig(
        &self,
        i: usize,
        token: &str,
        file_name: &str,
    ) -> anyhow::Result<std::path::PathBuf> {
        let path = self.root.join(file_name);
        std::fs::write(&path, self.token_kubeconfig_yaml(i, token))
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }

    /// `kubectl auth whoami -o json` presenting `token` to apiserver `i`: the user name and
    /// groups, or kubectl's error.
    pub fn whoami_with_token(&self, i: usize, token: &str) -> anyhow::Result<(String, Vec<String>)> {
        let file = tempfile::NamedTempFile::new_in(&self.root)?;
        std::fs::write(file.path(), self.token_kubeconfig_yaml(i, token))?;
        let out = Command::new(&self.kubectl_bin)
            .arg(format!("--kubeconfig={}", file.path().display()))
            .args(["auth", "whoami", "-o", "json"])
            .env("KUBECACHEDIR", self.root.join("kube-cache"))
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        let info = &v["status"]["userInfo"];
        let groups = info["groups"]
            .as_array()
            .map(|g| g.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        Ok((info["username"].as_str().unwrap_or_default().to_owned(), groups))
    }

    /// The kubectl built with the control plane.
    pub fn kubectl_bin(&self) -> &Path {
        &self.kubectl_bin
    }

    /// kubectl as the admin, with its cache in the control plane's directory, as a value that
    /// borrows nothing from the control plane.
    pub fn admin_kubectl(&self) -> Kubectl {
        Kubectl::new(&self.kubectl_bin, &self.admin_kubeconfig).with_cache_dir(self.root.join("kube-cache"))
    }

    /// kubectl as the admin, with its cache in the control plane's directory.
    pub fn kubectl(&self) -> Command {
        self.admin_kubectl().command()
    }

    /// Runs kubectl as the admin with `stdin`; its stdout, or an error with its stderr.
    pub fn kubectl_run(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
        self.kubectl_as(None, args, stdin)?
            .map_err(|stderr| anyhow::anyhow!("kubectl {} failed: {stderr}", args.join(" ")))
    }

    /// Runs kubectl as the admin, impersonating `user` in its groups when given (`--as`,
    /// `--as-group`), with `stdin`: `Ok(stdout)` when kubectl succeeded, `Err(stderr)` (what a
    /// user reads) when it failed; the outer error when kubectl could not run.
    pub fn kubectl_as<S: AsRef<std::ffi::OsStr>>(
        &self,
        user: Option<(&str, &[&str])>,
        args: &[S],
        stdin: Option<&str>,
    ) -> anyhow::Result<Result<String, String>> {
        let kubectl = self.admin_kubectl();
        match user {
            Some((name, groups)) => kubectl.impersonating(name, groups),
            None => kubectl,
        }
        .output(args, stdin)
    }

    /// `kubectl get KIND NAME -n NAMESPACE -o json` as the admin on apiserver `on`; `None` when
    /// the object does not exist.
    pub fn get_json(
        &self,
        on: usize,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> anyhow::Result<Option<serde_json::Value>> {
        self.admin_kubectl()
            .with_server(self.url(on))
            .get(kind, namespace, name)
    }

    /// `kubectl apply --server-side` of a YAML stream as the admin.
    pub fn apply(&self, yaml: &str) -> anyhow::Result<String> {
        self.kubectl_run(
            &[
                "apply",
                "--server-side",
                "--force-conflicts",
                "--field-manager=ichor-test",
                "-f",
                "-",
            ],
            Some(yaml),
        )
    }

    /// `GET path` on apiserver `i` as the admin (client certificate).
    pub fn get_as_admin(&self, i: usize, path: &str) -> anyhow::Result<Response> {
        https::get(
            &self.admin_tls,
            self.socket_addr(i),
            path,
            None,
            Duration::from_secs(10),
        )
    }

    /// `GET path` on apiserver `i` with a bearer token, or anonymously.
    pub fn get_with_token(&self, i: usize, path: &str, token: Option<&str>) -> anyhow::Result<Response> {
        https::get(
            &self.anonymous_tls,
            self.socket_addr(i),
            path,
            token,
            Duration::from_secs(10),
        )
    }

    /// Apiserver `i`'s `/readyz`, anonymously.
    pub fn readyz(&self, i: usize) -> anyhow::Result<Response> {
        self.get_with_token(i, "/readyz", None)
    }

    /// The sum of the samples of metric `name` whose labels contain `label` (`status="success"`)
    /// on apiserver `i`'s `/metrics`, as the admin.
    pub fn metric(&self, i: usize, name: &str, label: &str) -> anyhow::Result<f64> {
        let r = self.get_as_admin(i, "/metrics")?;
        anyhow::ensure!(r.status == 200, "/metrics answered {}: {}", r.status, r.body);
        Ok(r.body
            .lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{') && l.contains(label))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum())
    }
}
