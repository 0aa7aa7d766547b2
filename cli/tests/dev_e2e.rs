//! End to end: `ichor dev` as a process, signed in to through the real OIDC flow over HTTPS,
//! the `UserService` called with the generated client over HTTPS, a user disabled the GitOps
//! way (editing its file), and a clean stop on SIGINT.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ichor_issuer::api::proto::{
    ChangeOwnPasswordRequest, CreateUserRequest, ListUsersRequest, WhoAmIRequest, create_user_request,
    user_service_client::UserServiceClient,
};
use sha2::Digest as _;
use tonic::Code;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

const VERIFIER: &str = "e2e-verifier-0123456789-abcdefghijklmnopqrstuvwxyz";
const CLI_REDIRECT: &str = "http://127.0.0.1:38123/callback";

/// The running process, killed if the test fails before stopping it.
struct Dev {
    child: Child,
    url: String,
    ca_file: PathBuf,
    manifests: PathBuf,
    password: String,
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port whose successor is free too.
fn free_port_pair() -> u16 {
    for _ in 0..100 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        if port < 65535 && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return port;
        }
    }
    panic!("no free pair of ports");
}

fn start(state: &std::path::Path) -> Dev {
    let port = free_port_pair();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ichor"))
        .args(["dev", "--port", &port.to_string(), "--state-dir"])
        .arg(state)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let done = line.starts_with("Press Ctrl-C");
            lines.push(line);
            if done {
                let _ = tx.send(lines.clone());
            }
        }
    });
    let lines = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("ichor dev printed its banner");
    let field = |label: &str| {
        lines
            .iter()
            .find_map(|l| l.trim().strip_prefix(label))
            .map(|v| v.trim().split("   ").next().unwrap_or_default().to_owned())
            .unwrap_or_else(|| panic!("no {label} in {lines:#?}"))
    };
    let url = field("Issuer URL:");
    assert_eq!(url, format!("https://127.0.0.1:{port}"));
    Dev {
        url,
        ca_file: field("CA file:").into(),
        manifests: field("Manifests:").into(),
        password: field("Password:"),
        child,
    }
}

fn query_param(url: &str, name: &str) -> Option<String> {
    url::Url::parse(url)
        .ok()?
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// Signs in through `/oidc/authorize` (JSON), `/oidc/login` and `/oidc/token` with PKCE: the ID
/// token, or the status and body of the step that refused.
async fn sign_in(
    http: &reqwest::Client,
    dev: &Dev,
    client: &str,
    audience: Option<&str>,
    user: &str,
    password: &str,
) -> Result<String, String> {
    let redirect = if client == "ichor-ui" {
        format!("{}/auth/callback", dev.url)
    } else {
        CLI_REDIRECT.to_owned()
    };
    let challenge = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(VERIFIER.as_bytes()));
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    q.append_pair("response_type", "code")
        .append_pair("client_id", client)
        .append_pair("redirect_uri", &redirect)
        .append_pair("state", "st-1")
        .append_pair("nonce", "no-1")
        .append_pair("scope", "openid")
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256");
    if let Some(a) = audience {
        q.append_pair("audience", a);
    }
    let step = |what: &str, status: reqwest::StatusCode, body: String| format!("{what}: {status} {body}");
    let r = http
        .get(format!("{}/oidc/authorize?{}", dev.url, q.finish()))
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let (status, body) = (r.status(), r.text().await.unwrap_or_default());
    if !status.is_success() {
        return Err(step("authorize", status, body));
    }
    let ticket = serde_json::from_str::<serde_json::Value>(&body).unwrap()["ticket"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = http
        .post(format!("{}/oidc/login", dev.url))
        .header("accept", "application/json")
        .json(&serde_json::json!({"ticket": ticket, "username": user, "password": password}))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let (status, body) = (r.status(), r.text().await.unwrap_or_default());
    if !status.is_success() {
        return Err(step("login", status, body));
    }
    let to = serde_json::from_str::<serde_json::Value>(&body).unwrap()["redirect_uri"]
        .as_str()
        .unwrap()
        .to_owned();
    let code = query_param(&to, "code").ok_or_else(|| format!("no code in {to}"))?;
    let r = http
        .post(format!("{}/oidc/token", dev.url))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("client_id", client),
            ("redirect_uri", redirect.as_str()),
            ("code_verifier", VERIFIER),
        ])
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let (status, body) = (r.status(), r.text().await.unwrap_or_default());
    if !status.is_success() {
        return Err(step("token", status, body));
    }
    Ok(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["id_token"]
            .as_str()
            .unwrap()
            .to_owned(),
    )
}

fn claims(token: &str) -> serde_json::Value {
    let payload = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

fn authed<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    r.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    r
}

async fn channel(dev: &Dev, ca: &str) -> Channel {
    Endpoint::from_shared(dev.url.clone())
        .unwrap()
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ichor_dev_signs_in_the_printed_admin_serves_the_user_service_follows_the_tree_and_stops_on_sigint() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let state = tempfile::tempdir().unwrap();
    let mut dev = start(&state.path().join("dev"));
    assert_eq!(dev.password.len(), 24, "a 24-character password is printed");
    let ca = std::fs::read_to_string(&dev.ca_file).unwrap();
    let http = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
        .build()
        .unwrap();

    // The printed admin signs in for ichor-ui; everything but WhoAmI and ChangeOwnPassword waits
    // for a new password.
    let token = sign_in(&http, &dev, "ichor-ui", None, "admin", &dev.password)
        .await
        .unwrap();
    let mut api = UserServiceClient::new(channel(&dev, &ca).await);
    let me = api
        .who_am_i(authed(WhoAmIRequest {}, &token))
        .await
        .unwrap()
        .into_inner();
    assert!(me.must_change);
    let refused = api
        .list_users(authed(ListUsersRequest {}, &token))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert!(
        refused.message().contains("change your password first"),
        "{refused:?}"
    );
    let new_admin_password = "a new admin password, long enough";
    api.change_own_password(authed(
        ChangeOwnPasswordRequest {
            old_password: dev.password.clone(),
            new_password: new_admin_password.to_owned(),
        },
        &token,
    ))
    .await
    .unwrap();

    // Signed in again, the admin lists users and creates an operator.
    let token = sign_in(&http, &dev, "ichor-ui", None, "admin", new_admin_password)
        .await
        .unwrap();
    let users = api
        .list_users(authed(ListUsersRequest {}, &token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        users.users.iter().map(|u| u.name.as_str()).collect::<Vec<_>>(),
        ["admin"]
    );
    let bob_first = "bob's first password";
    api.create_user(authed(
        CreateUserRequest {
            name: "bob".into(),
            roles: vec!["operator".into()],
            initial_password: Some(create_user_request::InitialPassword::Password(bob_first.into())),
            ..Default::default()
        },
        &token,
    ))
    .await
    .unwrap();

    // Bob changes his first password, then gets an ichor-kube token with his role as groups.
    let bob_ui = sign_in(&http, &dev, "ichor-ui", None, "bob", bob_first)
        .await
        .unwrap();
    let bob_password = "bob's own password, changed";
    api.change_own_password(authed(
        ChangeOwnPasswordRequest {
            old_password: bob_first.into(),
            new_password: bob_password.into(),
        },
        &bob_ui,
    ))
    .await
    .unwrap();
    let kube = sign_in(&http, &dev, "ichor-cli", Some("ichor-kube"), "bob", bob_password)
        .await
        .unwrap();
    let c = claims(&kube);
    assert_eq!(
        (c["aud"].as_str(), c["sub"].as_str()),
        (Some("ichor-kube"), Some("bob"))
    );
    assert_eq!(c["groups"], serde_json::json!(["operator"]));

    // The GitOps path: disabling bob in his file stops his sign-ins within seconds.
    let file = dev.manifests.join("bob.yaml");
    let yaml = std::fs::read_to_string(&file).unwrap();
    assert!(yaml.contains("operator"), "{yaml}");
    let disabled = if yaml.contains("disabled: false") {
        yaml.replace("disabled: false", "disabled: true")
    } else {
        yaml.replace("spec:\n", "spec:\n  disabled: true\n")
    };
    assert_eq!(disabled.matches("disabled: true").count(), 1, "{disabled}");
    std::fs::write(&file, disabled).unwrap();
    let edited = Instant::now();
    loop {
        match sign_in(&http, &dev, "ichor-cli", Some("ichor-kube"), "bob", bob_password).await {
            Err(refusal) => {
                // Refused at the password step, or (when the edit lands between the two) at the
                // code exchange, which re-reads the user.
                assert!(
                    refusal.starts_with("login: ") || refusal.contains("the user is disabled"),
                    "{refusal}"
                );
                break;
            }
            Ok(_) => assert!(
                edited.elapsed() < Duration::from_secs(12),
                "bob still signs in 12 s after being disabled"
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("bob refused {:?} after the edit", edited.elapsed());
    let users = UserServiceClient::new(channel(&dev, &ca).await)
        .list_users(authed(ListUsersRequest {}, &token))
        .await
        .unwrap()
        .into_inner();
    let bob = users
        .users
        .iter()
        .find(|u| u.name == "bob")
        .expect("bob is still listed");
    assert!(
        bob.disabled,
        "the edited file was read as valid and disabled: {bob:?}"
    );

    // SIGINT stops the process cleanly and promptly.
    drop(api);
    drop(http);
    let pid = dev.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let asked = Instant::now();
    let status = loop {
        if let Some(status) = dev.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "ichor dev did not stop within 10 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    eprintln!("stopped {:?} after SIGINT", asked.elapsed());
}
