//! A site for the trust-path tests: a real control plane with the chart's CRDs, roles and
//! bindings; `ichor dev` as Ichor's issuer (its kubeconfigs pointing at the control plane); the
//! AuthenticationConfiguration rendered by our renderer from a `TalosCluster` and the issuer's
//! trust (internal discovery listener, Ichor CA), the apiserver restarted with it as Talos does;
//! and users who sign in through kubectl's exec plugin, `ichor auth token`.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use ichor_issuer::api::proto::{GetMyKubeconfigRequest, user_service_client::UserServiceClient};
use ichor_renderers::auth::second_factor_policy::SecondFactorPolicy;
use ichor_renderers::authn::{self, IchorTrust};
use ichor_renderers::crd::TalosCluster;
use ichor_testkit::consumers::repo_root;
use ichor_testkit::control_plane::{ControlPlane, Options};
use ichor_testkit::external_idp::ExternalIdp;
use ichor_testkit::issuer::sign_in;

use crate::dev_support::{self, Dev};

/// The admin's password after the first sign-in.
pub const ADMIN_PASSWORD: &str = "the admin's own password, long enough";
/// How long an apiserver restart may take.
pub const RESTART_TIMEOUT: Duration = Duration::from_secs(120);

/// The running site.
pub struct Site {
    pub dev: Dev,
    pub plane: ControlPlane,
    pub state: tempfile::TempDir,
    dev_args: Vec<String>,
}

/// The chart's CRDs (and the partial views of Ichor core's kinds), then the built-in roles.
pub fn install_chart_objects(plane: &ControlPlane) {
    ichor_testkit::install::install_crds(plane).unwrap();
    let root = repo_root();
    let roles = std::fs::read_to_string(root.join("helm/ichor/files/ichor-roles.yaml")).unwrap();
    plane.apply(&roles).unwrap();
}

/// The `TalosCluster` of the site: Ichor's issuer at `issuer_url`, and `external` entries
/// (YAML list items under `spec.authentication.external`, already indented).
pub fn cluster(issuer_url: &str, external: &str) -> TalosCluster {
    let yaml = format!(
        "apiVersion: ichor.maesh.dev/v1alpha1\nkind: TalosCluster\nmetadata:\n  name: test\n  namespace: ichor-system\nspec:\n  versionContract: v1.14\n  authentication:\n    ichor:\n      enabled: true\n      url: {issuer_url}\n{}",
        if external.is_empty() {
            String::new()
        } else {
            format!("    external:\n{external}")
        }
    );
    serde_yaml::from_str(&yaml).unwrap()
}

impl Site {
    /// Starts everything; `external` as in [`cluster`]; `dev_args` more `ichor dev` flags.
    pub async fn start(external: &str, dev_args: &[&str]) -> Option<Self> {
        Self::start_seeded(external, dev_args, |_| {}).await
    }

    /// As [`Site::start`], with `seed` run on `ichor dev`'s state directory before it starts.
    pub async fn start_seeded(external: &str, dev_args: &[&str], seed: impl FnOnce(&Path)) -> Option<Self> {
        let plane = tokio::task::spawn_blocking(|| ControlPlane::start(Options::default()))
            .await
            .unwrap()
            .unwrap()?;
        eprintln!("control plane ready in {:?}", plane.started_in());
        install_chart_objects(&plane);
        let state = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = vec![
            "--kube-api-server".into(),
            plane.url(0),
            "--kube-ca-file".into(),
            plane.ca_file().display().to_string(),
        ];
        args.extend(dev_args.iter().map(|a| (*a).to_owned()));
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        seed(&state.path().join("dev"));
        let dev = dev_support::start(&state.path().join("dev"), &argv);
        let mut site = Self {
            dev,
            plane,
            state,
            dev_args: args,
        };
        let config = site.authentication_config(external);
        let took = site
            .plane
            .restart_apiserver(0, Some(&config), RESTART_TIMEOUT)
            .unwrap();
        eprintln!("apiserver restarted with the rendered configuration in {took:?}");
        dev_support::settle_admin(&site.dev, ADMIN_PASSWORD).await;
        site.wait_trusted().await;
        Some(site)
    }

    /// The rendered AuthenticationConfiguration (YAML) for the running issuer.
    pub fn authentication_config(&self, external: &str) -> String {
        self.authentication_config_with(external, &SecondFactorPolicy::default())
    }

    /// As [`Site::authentication_config`], with an installation's second-factor policy.
    pub fn authentication_config_with(&self, external: &str, second_factor: &SecondFactorPolicy) -> String {
        let trust = IchorTrust {
            discovery_url: format!(
                "https://127.0.0.1:{}/.well-known/openid-configuration",
                self.dev.port + 1
            ),
            ca_pem: std::fs::read_to_string(&self.dev.ca_file).unwrap(),
        };
        let rendered = authn::render(&cluster(&self.dev.url, external), Some(&trust), second_factor).unwrap();
        serde_yaml::to_string(&rendered.configuration).unwrap()
    }

    /// A fresh `ichor-ui` token of the admin.
    pub async fn admin_token(&self) -> String {
        let http = dev_support::http_client(&self.dev);
        dev_support::sign_in(&http, &self.dev, "ichor-ui", None, "admin", ADMIN_PASSWORD)
            .await
            .unwrap()
    }

    /// A fresh `ichor-kube` ID token of `user`, or the refusal.
    pub async fn kube_token(&self, user: &str, password: &str) -> Result<String, String> {
        let http = dev_support::http_client(&self.dev);
        dev_support::sign_in(&http, &self.dev, "ichor-cli", Some("ichor-kube"), user, password).await
    }

    /// Waits until apiserver 0 accepts the admin's Ichor token (its JWT authenticator has read
    /// the issuer's discovery document and keys).
    pub async fn wait_trusted(&self) {
        let token = self.kube_token("admin", ADMIN_PASSWORD).await.unwrap();
        let started = Instant::now();
        loop {
            let status = self
                .plane
                .get_with_token(0, "/api", Some(&token))
                .map(|r| r.status);
            if status.as_ref().is_ok_and(|s| *s == 200) {
                eprintln!(
                    "the apiserver trusts Ichor's issuer after {:?}",
                    started.elapsed()
                );
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(90),
                "the apiserver never accepted an Ichor token ({status:?}); its log:\n{}",
                self.plane.log(0)
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// A new person with `roles`: created by the admin, their first password replaced by
    /// `password`, their kubeconfig fetched, signed in with `ichor auth login`.
    pub async fn person(&self, name: &str, roles: &[&str], password: &str) -> Terminal {
        let admin_token = self.admin_token().await;
        dev_support::provision_user(&self.dev, &admin_token, name, roles, password).await;
        let terminal = Terminal::open(self, name, password).await;
        terminal.login(self).await;
        terminal
    }

    /// Stops the issuer (`ichor dev`).
    pub fn stop_issuer(&mut self) {
        let _ = self.dev.child.kill();
        let _ = self.dev.child.wait();
    }

    /// Starts the issuer again on the same ports and state.
    pub fn start_issuer(&mut self) {
        let argv: Vec<&str> = self.dev_args.iter().map(String::as_str).collect();
        self.dev = dev_support::start_on(self.dev.port, &self.state.path().join("dev"), &argv);
    }
}

/// One person at a terminal: a `$HOME` with the kubeconfig `GetMyKubeconfig` gave them, and
/// kubectl running `ichor auth token` from it.
pub struct Terminal {
    pub user: String,
    pub password: String,
    pub home: tempfile::TempDir,
    pub kubeconfig: PathBuf,
}

impl Terminal {
    /// Fetches `user`'s kubeconfig through the UserService, signed in as that user.
    pub async fn open(site: &Site, user: &str, password: &str) -> Self {
        let http = dev_support::http_client(&site.dev);
        let token = dev_support::sign_in(&http, &site.dev, "ichor-ui", None, user, password)
            .await
            .unwrap();
        let kubeconfig = UserServiceClient::new(dev_support::channel(&site.dev).await)
            .get_my_kubeconfig(dev_support::authed(
                GetMyKubeconfigRequest {
                    ca_file: site.dev.ca_file.display().to_string(),
                },
                &token,
            ))
            .await
            .unwrap()
            .into_inner()
            .kubeconfig;
        assert!(kubeconfig.contains(&site.plane.url(0)), "{kubeconfig}");
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("kubeconfig");
        std::fs::write(&path, kubeconfig).unwrap();
        Self {
            user: user.to_owned(),
            password: password.to_owned(),
            home,
            kubeconfig: path,
        }
    }

    fn command(&self, plane: &ControlPlane, args: &[&str]) -> Command {
        let ichor = Path::new(env!("CARGO_BIN_EXE_ichor"));
        let path = format!(
            "{}:{}",
            ichor.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new(plane.kubectl_bin());
        cmd.arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .args(args)
            .env("HOME", self.home.path())
            .env("PATH", path)
            .env("KUBECACHEDIR", self.home.path().join("kube-cache"))
            .env_remove("KUBECONFIG")
            .env_remove("ICHOR_ISSUER")
            .env_remove("ICHOR_CA_FILE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// `ichor auth login --no-browser` against the site's issuer, the test playing the browser
    /// with this person's password (as a person signs in before their first kubectl command;
    /// kubectl's exec plugin does not sign in without a terminal).
    pub async fn login(&self, site: &Site) {
        let (child, url, reader) = self.start_login(&login_args(site)).await;
        let http = dev_support::http_client(&site.dev);
        let callback = dev_support::approve(&http, &url, &self.user, &self.password)
            .await
            .unwrap();
        self.finish_login(child, reader, &callback, &http).await;
    }

    /// As [`Terminal::login`] for a person with an authenticator app: the browser gives the
    /// password, then the code `code()` returns at that moment (the test plays the app).
    pub async fn login_with_code(&self, site: &Site, code: impl FnOnce() -> String) {
        let (child, url, reader) = self.start_login(&login_args(site)).await;
        let http = dev_support::http_client(&site.dev);
        let ticket = sign_in::answer("authorize", http.get(&url).header("accept", "application/json"))
            .await
            .unwrap();
        let login = sign_in::answer(
            "login",
            http.post(format!("{}/oidc/login", site.dev.url))
                .header("accept", "application/json")
                .json(&serde_json::json!({
                    "ticket": ticket["ticket"], "username": self.user, "password": self.password
                })),
        )
        .await
        .unwrap();
        assert!(
            login.get("redirect_uri").is_none(),
            "{}: a code before the second factor: {login}",
            self.user
        );
        let factor_ticket = login["factor_ticket"].as_str().unwrap().to_owned();
        let done = sign_in::answer(
            "factor",
            http.post(format!("{}/oidc/login/factor", site.dev.url))
                .header("accept", "application/json")
                .json(&serde_json::json!({"factor_ticket": factor_ticket, "code": code()})),
        )
        .await
        .unwrap();
        let callback = done["redirect_uri"].as_str().unwrap().to_owned();
        self.finish_login(child, reader, &callback, &http).await;
    }

    /// The kubeconfig `GetMyKubeconfig` gives `account` of the site's own provider `idp`,
    /// signed in to the API with the provider's `ichor-ui` token; the plugin trusts the
    /// provider's CA.
    pub async fn external(site: &Site, idp: &ExternalIdp, account: &str) -> Self {
        let token = idp.id_token(account, "ichor-ui").unwrap().id_token;
        let kubeconfig = UserServiceClient::new(dev_support::channel(&site.dev).await)
            .get_my_kubeconfig(dev_support::authed(
                GetMyKubeconfigRequest {
                    ca_file: idp.ca_path().display().to_string(),
                },
                &token,
            ))
            .await
            .unwrap()
            .into_inner()
            .kubeconfig;
        assert!(kubeconfig.contains(idp.issuer_url()), "{kubeconfig}");
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("kubeconfig");
        std::fs::write(&path, kubeconfig).unwrap();
        Self {
            user: account.to_owned(),
            password: String::new(),
            home,
            kubeconfig: path,
        }
    }

    /// `ichor auth login --no-browser` at the site's own provider with the arguments of this
    /// person's kubeconfig (its exec plugin's, `token` replaced by `login`); the provider's own
    /// sign-in page approves it.
    pub async fn login_external(&self, site: &Site, idp: &ExternalIdp) {
        let config: serde_json::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&self.kubeconfig).unwrap()).unwrap();
        let mut args: Vec<std::ffi::OsString> = config["users"][0]["user"]["exec"]["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().into())
            .collect();
        assert_eq!(args[1], "token", "{args:?}");
        args[1] = "login".into();
        let (child, url, reader) = self.start_login(&args).await;
        let (idp_url, account) = (url.clone(), self.user.clone());
        let callback = {
            let approved = idp.approve(&idp_url, &account);
            approved.unwrap()
        };
        self.finish_login(child, reader, &callback, &dev_support::http_client(&site.dev))
            .await;
    }

    /// Starts `ichor <args> --no-browser` in this person's `$HOME`: the child, the sign-in URL it
    /// printed, and the thread collecting its stderr.
    async fn start_login(
        &self,
        args: &[std::ffi::OsString],
    ) -> (std::process::Child, String, std::thread::JoinHandle<String>) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ichor"))
            .args(args)
            .arg("--no-browser")
            .env("HOME", self.home.path())
            .env_remove("KUBERNETES_EXEC_INFO")
            .env_remove("ICHOR_ISSUER")
            .env_remove("ICHOR_CA_FILE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (url_tx, url_rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let trimmed = line.trim();
                if trimmed.starts_with("https://") && trimmed.contains("response_type=code") {
                    let _ = url_tx.send(trimmed.to_owned());
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        match tokio::task::spawn_blocking(move || url_rx.recv_timeout(Duration::from_secs(60)))
            .await
            .unwrap()
        {
            Ok(url) => (child, url, reader),
            Err(_) => panic!(
                "{}: ichor auth login printed no sign-in URL:\n{}",
                self.user,
                reader.join().unwrap()
            ),
        }
    }

    /// Delivers the browser's redirect to the waiting login and checks that it signed in.
    async fn finish_login(
        &self,
        mut child: std::process::Child,
        reader: std::thread::JoinHandle<String>,
        callback: &str,
        http: &reqwest::Client,
    ) {
        assert!(callback.starts_with("http://127.0.0.1:"), "{callback}");
        let answer = http.get(callback).send().await.unwrap();
        assert!(answer.status().is_success(), "{answer:?}");
        let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
            .await
            .unwrap();
        let said = reader.join().unwrap();
        assert!(status.success(), "{}: ichor auth login: {said}", self.user);
        assert!(said.contains(&format!("as {}", self.user)), "{said}");
    }

    /// Runs kubectl (its exec plugin serves from the login cache and refreshes it).
    pub async fn kubectl(&self, site: &Site, args: &[&str]) -> Output {
        let mut cmd = self.command(&site.plane, args);
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap()
    }

    /// kubectl that must succeed; its stdout.
    pub async fn kubectl_ok(&self, site: &Site, args: &[&str]) -> String {
        let out = self.kubectl(site, args).await;
        assert!(
            out.status.success(),
            "{} kubectl {args:?}: {}",
            self.user,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl auth whoami -o json`: user name and groups.
    pub async fn whoami(&self, site: &Site) -> (String, Vec<String>) {
        let out = self.kubectl_ok(site, &["auth", "whoami", "-o", "json"]).await;
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let info = &v["status"]["userInfo"];
        let groups = info["groups"]
            .as_array()
            .map(|g| g.iter().map(|x| x.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default();
        (info["username"].as_str().unwrap_or_default().to_owned(), groups)
    }

    /// `kubectl auth can-i VERB RESOURCE -n ichor-system`.
    pub async fn can_i(&self, site: &Site, verb: &str, resource: &str) -> bool {
        let out = self
            .kubectl(site, &["auth", "can-i", verb, resource, "-n", "ichor-system"])
            .await;
        let answer = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(answer == "yes" || answer == "no", "{answer}: {stderr}");
        if !stderr.trim().is_empty() {
            eprintln!(
                "{}: kubectl auth can-i {verb} {resource}: {answer}; {stderr}",
                self.user
            );
        }
        answer == "yes"
    }
}

/// The arguments of `ichor auth login` against the site's issuer (before `--no-browser`, which
/// [`Terminal::start_login`] adds).
fn login_args(site: &Site) -> [std::ffi::OsString; 6] {
    [
        "auth".into(),
        "login".into(),
        "--issuer".into(),
        site.dev.url.clone().into(),
        "--ca-file".into(),
        site.dev.ca_file.clone().into_os_string(),
    ]
}
