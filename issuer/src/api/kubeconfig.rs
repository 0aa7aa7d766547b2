//! The caller's kubeconfig (ADR 0094 decision 5, the client-go exec-plugin shape): the API
//! server, the cluster CA (public), and a user whose `exec` block runs `ichor auth token`. It
//! holds no secret: [`render`] refuses a CA bundle with anything but certificates in it.

use base64::Engine as _;
use ichor_renderers::crd::UsersSettings;
use serde::Serialize;

/// The exec-credential API version written (client-go accepts it; `interactiveMode` is then
/// required).
pub const EXEC_API_VERSION: &str = "client.authentication.k8s.io/v1";
/// The plugin command.
pub const EXEC_COMMAND: &str = "ichor";
/// The OIDC client the plugin signs in as.
pub use ichor_renderers::contract::CLI_CLIENT_ID;
/// The audience the kube-apiserver accepts.
pub use ichor_renderers::contract::KUBE_AUDIENCE;
/// The scope an external user's plugin asks its provider for: the standard claims the
/// kube-apiserver maps (`email`, `profile` for `preferred_username`), `groups`, and a refresh
/// token.
pub const EXTERNAL_SCOPE: &str = "openid offline_access email profile groups";
/// The `prompt` an external user's plugin sends: OpenID Connect Core section 11 grants
/// `offline_access` (a refresh token) only with `consent`.
pub const EXTERNAL_PROMPT: &str = "consent";

/// What a kubeconfig is made of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeconfigInput<'a> {
    /// The cluster's name (cluster and context entry names).
    pub cluster_name: &'a str,
    /// The Ichor user (user entry `ichor-<user>@<cluster>`).
    pub user: &'a str,
    /// The API server URL (https).
    pub server: &'a str,
    /// `tls-server-name`, when the server host is not in the apiserver certificate.
    pub tls_server_name: Option<&'a str>,
    /// The cluster CA, PEM (certificates only). Empty (or only whitespace): no
    /// `certificate-authority-data` is written and the client verifies the server with its
    /// system roots (the issuer found no CA to publish).
    pub ca_pem: &'a str,
    /// The issuer URL the plugin signs in at.
    pub issuer_url: &'a str,
    /// A CA file on the user's machine for the issuer connection (`--ca-file`).
    pub ca_file: Option<&'a str>,
}

/// A kubeconfig that cannot be rendered. Names the input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KubeconfigError {
    /// The server is not an https URL.
    #[error("the kubeconfig server {0:?} is not an https URL: set kubeAPIServerURL or the cluster endpoint")]
    Server(String),
    /// The CA bundle holds no certificate, or something else than certificates.
    #[error("the cluster CA must be PEM certificates only: {0}")]
    CaBundle(String),
    /// Writing YAML failed.
    #[error("the kubeconfig could not be written as YAML: {0}")]
    Yaml(String),
}

/// The server URL written: `kubeAPIServerURL` from the settings, else the cluster endpoint.
pub fn server_url<'a>(settings: &'a UsersSettings, endpoint: &'a str) -> &'a str {
    settings.kube_api_server_url.as_deref().unwrap_or(endpoint)
}

/// The exec plugin's arguments: `auth token --issuer <url> --client-id ichor-cli --audience
/// ichor-kube`, then `--ca-file <path>` when given.
pub fn exec_args(issuer_url: &str, ca_file: Option<&str>) -> Vec<String> {
    exec_args_for(
        &Login {
            issuer_url,
            client_id: CLI_CLIENT_ID,
            audience: KUBE_AUDIENCE,
            scope_prompt: None,
        },
        ca_file,
    )
}

/// Where the exec plugin signs in: Ichor's issuer with `ichor-cli` for `ichor-kube`, or the
/// external provider with the client the kube-apiserver trusts (client id = audience).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Login<'a> {
    /// The issuer URL.
    pub issuer_url: &'a str,
    /// The OAuth client.
    pub client_id: &'a str,
    /// The audience of the ID token kubectl sends.
    pub audience: &'a str,
    /// `--scope` and `--prompt` for a provider that is not Ichor's (`None`: the defaults).
    pub scope_prompt: Option<(&'a str, &'a str)>,
}

/// [`exec_args`] for any [`Login`].
pub fn exec_args_for(login: &Login<'_>, ca_file: Option<&str>) -> Vec<String> {
    let mut args: Vec<String> = [
        "auth",
        "token",
        "--issuer",
        login.issuer_url,
        "--client-id",
        login.client_id,
        "--audience",
        login.audience,
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    if let Some((scope, prompt)) = login.scope_prompt {
        args.extend([
            "--scope".to_owned(),
            scope.to_owned(),
            "--prompt".to_owned(),
            prompt.to_owned(),
        ]);
    }
    if let Some(path) = ca_file {
        args.extend(["--ca-file".to_owned(), path.to_owned()]);
    }
    args
}

/// Renders the kubeconfig YAML of an Ichor user (the plugin signs in at `input.issuer_url`
/// with `ichor-cli` for `ichor-kube`).
///
/// # Errors
/// [`KubeconfigError`] for a non-https server or a CA bundle that is not certificates only.
pub fn render(input: &KubeconfigInput<'_>) -> Result<String, KubeconfigError> {
    render_for(
        input,
        &Login {
            issuer_url: input.issuer_url,
            client_id: CLI_CLIENT_ID,
            audience: KUBE_AUDIENCE,
            scope_prompt: None,
        },
    )
}

/// [`render`] with the plugin signing in through `login` (an external caller's provider).
///
/// # Errors
/// As [`render`].
pub fn render_for(input: &KubeconfigInput<'_>, login: &Login<'_>) -> Result<String, KubeconfigError> {
    match url::Url::parse(input.server) {
        Ok(u) if u.scheme() == "https" && u.host().is_some() => {}
        _ => return Err(KubeconfigError::Server(input.server.chars().take(256).collect())),
    }
    let ca_pem = (!input.ca_pem.trim().is_empty()).then_some(input.ca_pem);
    if let Some(pem) = ca_pem {
        check_certificates_only(pem)?;
    }
    let user_entry = format!("ichor-{}@{}", input.user, input.cluster_name);
    let config = Config {
        api_version: "v1",
        kind: "Config",
        clusters: vec![Named {
            name: input.cluster_name,
            cluster: Cluster {
                server: input.server,
                certificate_authority_data: ca_pem
                    .map(|pem| base64::engine::general_purpose::STANDARD.encode(pem)),
                tls_server_name: input.tls_server_name,
            },
        }],
        users: vec![NamedUser {
            name: &user_entry,
            user: User {
                exec: Exec {
                    api_version: EXEC_API_VERSION,
                    command: EXEC_COMMAND,
                    args: exec_args_for(login, input.ca_file),
                    interactive_mode: "IfAvailable",
                    provide_cluster_info: false,
                    install_hint: format!(
                        "The ichor CLI is required to log in to this cluster.\nInstall it from {}/downloads and \
                         make sure it is on your PATH.\n",
                        input.issuer_url.trim_end_matches('/')
                    ),
                },
            },
        }],
        contexts: vec![NamedContext {
            name: input.cluster_name,
            context: Context {
                cluster: input.cluster_name,
                user: &user_entry,
            },
        }],
        current_context: input.cluster_name,
    };
    serde_yaml::to_string(&config).map_err(|e| KubeconfigError::Yaml(e.to_string()))
}

/// Refuses a bundle with no `CERTIFICATE` block or with any other PEM block (a private key
/// must never reach a kubeconfig).
fn check_certificates_only(pem: &str) -> Result<(), KubeconfigError> {
    let mut certificates = 0;
    for line in pem.lines().map(str::trim) {
        if let Some(label) = line.strip_prefix("-----BEGIN ") {
            if label == "CERTIFICATE-----" {
                certificates += 1;
            } else {
                let label = label.trim_end_matches('-');
                return Err(KubeconfigError::CaBundle(format!(
                    "it contains a {label:?} block"
                )));
            }
        }
    }
    if certificates == 0 {
        return Err(KubeconfigError::CaBundle("it contains no certificate".to_owned()));
    }
    Ok(())
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Config<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    kind: &'a str,
    clusters: Vec<Named<'a>>,
    users: Vec<NamedUser<'a>>,
    contexts: Vec<NamedContext<'a>>,
    current_context: &'a str,
}

#[derive(Serialize)]
struct Named<'a> {
    name: &'a str,
    cluster: Cluster<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster<'a> {
    server: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    certificate_authority_data: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_server_name: Option<&'a str>,
}

#[derive(Serialize)]
struct NamedUser<'a> {
    name: &'a str,
    user: User<'a>,
}

#[derive(Serialize)]
struct User<'a> {
    exec: Exec<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Exec<'a> {
    api_version: &'a str,
    command: &'a str,
    args: Vec<String>,
    interactive_mode: &'a str,
    provide_cluster_info: bool,
    install_hint: String,
}

#[derive(Serialize)]
struct NamedContext<'a> {
    name: &'a str,
    context: Context<'a>,
}

#[derive(Serialize)]
struct Context<'a> {
    cluster: &'a str,
    user: &'a str,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIBATAKBggqhkjOPQQDAjAVMRMwEQYDVQQDEwprdWJlcm5ldGVz\n-----END CERTIFICATE-----\n";

    fn input() -> KubeconfigInput<'static> {
        KubeconfigInput {
            cluster_name: "prod",
            user: "alice",
            server: "https://10.0.0.10:6443",
            tls_server_name: None,
            ca_pem: CA,
            issuer_url: "https://ichor.example.com",
            ca_file: None,
        }
    }

    fn settings(url: Option<&str>) -> UsersSettings {
        let mut s = UsersSettings::resolve(None).unwrap();
        s.kube_api_server_url = url.map(str::to_owned);
        s
    }

    #[test]
    fn renders_the_cluster_endpoint_without_overrides() {
        let s = settings(None);
        let yaml = render(&KubeconfigInput {
            server: server_url(&s, "https://10.0.0.10:6443"),
            ..input()
        })
        .unwrap();
        insta::assert_snapshot!(yaml);
    }

    #[test]
    fn renders_the_url_override_tls_server_name_and_ca_file() {
        let s = settings(Some("https://kube.example.com:6443"));
        let yaml = render(&KubeconfigInput {
            server: server_url(&s, "https://10.0.0.10:6443"),
            tls_server_name: Some("kube-apiserver.prod.internal"),
            ca_file: Some("/home/alice/.ichor/ca.pem"),
            ..input()
        })
        .unwrap();
        insta::assert_snapshot!(yaml);
    }

    #[test]
    fn renders_the_url_override_alone() {
        let s = settings(Some("https://kube.example.com"));
        let yaml = render(&KubeconfigInput {
            server: server_url(&s, "https://10.0.0.10:6443"),
            ..input()
        })
        .unwrap();
        insta::assert_snapshot!(yaml);
    }

    #[test]
    fn the_exec_block_is_exactly_the_spec_shape() {
        let yaml = render(&input()).unwrap();
        let doc: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
        let exec = &doc["users"][0]["user"]["exec"];
        assert_eq!(exec["apiVersion"], "client.authentication.k8s.io/v1");
        assert_eq!(exec["command"], "ichor");
        let args: Vec<&str> = exec["args"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(
            args,
            [
                "auth",
                "token",
                "--issuer",
                "https://ichor.example.com",
                "--client-id",
                "ichor-cli",
                "--audience",
                "ichor-kube"
            ]
        );
        assert_eq!(exec["interactiveMode"], "IfAvailable");
        assert_eq!(exec["provideClusterInfo"], false);
        assert!(exec["installHint"].as_str().unwrap().contains("ichor CLI"));
        let ca = doc["clusters"][0]["cluster"]["certificate-authority-data"]
            .as_str()
            .unwrap();
        assert_eq!(
            base64::engine::general_purpose::STANDARD.decode(ca).unwrap(),
            CA.as_bytes()
        );
        assert!(doc["clusters"][0]["cluster"].get("tls-server-name").is_none());
        for secret_key in [
            "token:",
            "client-key-data",
            "client-certificate-data",
            "password",
            "auth-provider",
        ] {
            assert!(!yaml.contains(secret_key), "{secret_key}");
        }
    }

    #[test]
    fn refuses_a_ca_bundle_with_a_private_key_or_no_certificate() {
        let with_key = format!("{CA}-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
        let err = render(&KubeconfigInput {
            ca_pem: &with_key,
            ..input()
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the cluster CA must be PEM certificates only: it contains a \"PRIVATE KEY\" block"
        );
        let err = render(&KubeconfigInput {
            ca_pem: "not a certificate\n",
            ..input()
        })
        .unwrap_err();
        assert!(matches!(err, KubeconfigError::CaBundle(_)), "{err}");
    }

    #[test]
    fn renders_without_certificate_authority_data_when_no_ca_is_known() {
        let yaml = render(&KubeconfigInput {
            ca_pem: "",
            tls_server_name: Some("kube-apiserver.prod.internal"),
            ..input()
        })
        .unwrap();
        assert!(!yaml.contains("certificate-authority"), "{yaml}");
        insta::assert_snapshot!(yaml);
    }

    #[test]
    fn refuses_a_server_that_is_not_https() {
        let err = render(&KubeconfigInput {
            server: "http://10.0.0.10:6443",
            ..input()
        })
        .unwrap_err();
        assert!(matches!(err, KubeconfigError::Server(_)), "{err}");
    }
}
