//! What `ichor auth kubeconfig` accepts from the server before it writes or prints anything.
//!
//! A kubeconfig is a program: kubectl runs its `exec` command with its arguments and
//! environment on every call, sends credentials to its `server`, and prints its `installHint`.
//! The one Ichor's `GetMyKubeconfig` renders has a fixed shape, so anything else is refused:
//!
//! - one cluster, one user, one context naming both, and `current-context` naming it;
//! - the cluster: an `https` server with a host and no user info, `certificate-authority-data`
//!   (when present) base64 of PEM certificates only (the issuer's own rule: never a private key),
//!   an optional `tls-server-name`,
//!   and no other field (no `insecure-skip-tls-verify`, CA file, proxy or extension);
//! - the user: an `exec` block only (no token, client key, auth provider, username, `as`), whose
//!   command is `ichor` with exactly the arguments `auth token --issuer <the issuer this command
//!   asked> --client-id ichor-cli --audience ichor-kube [--ca-file <the path given>]`, no
//!   environment, `provideClusterInfo` false, and an `installHint` without control characters;
//! - no control character in any name.

use base64::Engine as _;
use ichor_issuer::api::kubeconfig::{EXEC_API_VERSION, EXEC_COMMAND, exec_args};
use serde::Deserialize;

use super::issuer_url::IssuerUrl;

/// The server's kubeconfig is not the one Ichor renders; nothing was written or printed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the kubeconfig from {issuer} was refused and nothing was written: {reason}. A kubeconfig from \
     Ichor only runs `ichor auth token --issuer {issuer}`; check that --issuer is Ichor's external URL"
)]
pub struct KubeconfigRefused {
    /// The issuer asked.
    pub issuer: String,
    /// What is wrong with it.
    pub reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Config {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    clusters: Vec<Named<Cluster>>,
    users: Vec<Named<User>>,
    contexts: Vec<Named<Context>>,
    current_context: String,
    #[serde(default)]
    preferences: Option<serde_yaml::Mapping>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "user", alias = "context")]
    item: T,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Cluster {
    server: String,
    #[serde(default)]
    certificate_authority_data: Option<String>,
    #[serde(default)]
    tls_server_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct User {
    exec: Exec,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Exec {
    api_version: String,
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Option<Vec<serde_yaml::Value>>,
    #[serde(default)]
    interactive_mode: Option<String>,
    #[serde(default)]
    provide_cluster_info: bool,
    #[serde(default)]
    install_hint: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Context {
    cluster: String,
    user: String,
    #[serde(default)]
    namespace: Option<String>,
}

/// Checks the kubeconfig `text` the server returned to a caller that asked `issuer`, with
/// `ca_file` the (absolute) `--ca-file` it sent.
///
/// # Errors
/// [`KubeconfigRefused`] naming the first thing that is not as Ichor renders it.
pub fn check_kubeconfig(
    text: &str,
    issuer: &IssuerUrl,
    ca_file: Option<&str>,
) -> Result<(), KubeconfigRefused> {
    check(text, issuer, ca_file).map_err(|reason| KubeconfigRefused {
        issuer: issuer.to_string(),
        reason,
    })
}

fn check(text: &str, issuer: &IssuerUrl, ca_file: Option<&str>) -> Result<(), String> {
    let config: Config =
        serde_yaml::from_str(text).map_err(|e| format!("it is not a kubeconfig of Ichor's shape ({e})"))?;
    if config.api_version != "v1" || config.kind != "Config" {
        return Err("it is not an apiVersion v1 kind Config document".to_owned());
    }
    if config.preferences.as_ref().is_some_and(|p| !p.is_empty()) {
        return Err("it sets preferences".to_owned());
    }
    let ([cluster], [user], [context]) = (&config.clusters[..], &config.users[..], &config.contexts[..])
    else {
        return Err(format!(
            "it has {} clusters, {} users and {} contexts, not one of each",
            config.clusters.len(),
            config.users.len(),
            config.contexts.len()
        ));
    };
    for name in [
        &cluster.name,
        &user.name,
        &context.name,
        &context.item.cluster,
        &context.item.user,
    ] {
        plain("a name", name)?;
    }
    if context.item.cluster != cluster.name || context.item.user != user.name {
        return Err("its context does not name its cluster and user".to_owned());
    }
    if config.current_context != context.name {
        return Err("current-context does not name its context".to_owned());
    }
    if let Some(namespace) = &context.item.namespace {
        plain("the context's namespace", namespace)?;
    }
    check_cluster(&cluster.item)?;
    check_exec(&user.item.exec, issuer, ca_file)
}

fn plain(what: &str, value: &str) -> Result<(), String> {
    if value.chars().any(char::is_control) {
        return Err(format!("{what} holds a control character"));
    }
    Ok(())
}

fn check_cluster(cluster: &Cluster) -> Result<(), String> {
    let server = url::Url::parse(&cluster.server).map_err(|_| "its server is not a URL".to_owned())?;
    if server.scheme() != "https" || server.host().is_none() {
        return Err("its server is not an https URL with a host".to_owned());
    }
    if !server.username().is_empty() || server.password().is_some() {
        return Err("its server URL carries user info".to_owned());
    }
    if let Some(name) = &cluster.tls_server_name {
        plain("tls-server-name", name)?;
    }
    if let Some(data) = &cluster.certificate_authority_data {
        let pem = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| "certificate-authority-data is not base64 of PEM text".to_owned())?;
        let labels: Vec<&str> = pem
            .lines()
            .filter_map(|l| l.trim().strip_prefix("-----BEGIN "))
            .collect();
        if let Some(label) = labels.iter().find(|label| **label != "CERTIFICATE-----") {
            return Err(format!(
                "certificate-authority-data holds a {:?} block, not only certificates",
                label.trim_end_matches('-')
            ));
        }
        if labels.is_empty() {
            return Err("certificate-authority-data holds no certificate".to_owned());
        }
    }
    Ok(())
}

fn check_exec(exec: &Exec, issuer: &IssuerUrl, ca_file: Option<&str>) -> Result<(), String> {
    if exec.command != EXEC_COMMAND {
        return Err(format!(
            "its exec command is {:?}, not {EXEC_COMMAND:?}",
            exec.command
        ));
    }
    if exec.api_version != EXEC_API_VERSION {
        return Err(format!("its exec apiVersion is {:?}", exec.api_version));
    }
    // The issuer argument may differ from --issuer by a trailing '/' only.
    let mut args = exec.args.clone();
    if let Some(arg) = args.get_mut(3)
        && IssuerUrl::parse(arg).is_ok_and(|u| u == *issuer)
    {
        issuer.as_str().clone_into(arg);
    }
    if args != exec_args(issuer.as_str(), ca_file) {
        return Err(format!(
            "its exec arguments {:?} are not `auth token --issuer {issuer} --client-id ichor-cli --audience \
             ichor-kube`{}",
            exec.args,
            ca_file
                .map(|p| format!(" with --ca-file {p}"))
                .unwrap_or_default()
        ));
    }
    if exec.env.as_ref().is_some_and(|e| !e.is_empty()) {
        return Err("its exec block sets environment variables".to_owned());
    }
    if exec.provide_cluster_info {
        return Err("its exec block asks for the cluster information".to_owned());
    }
    if let Some(mode) = &exec.interactive_mode
        && !["Never", "IfAvailable", "Always"].contains(&mode.as_str())
    {
        return Err(format!(
            "its exec interactiveMode {mode:?} is not one kubectl knows"
        ));
    }
    if let Some(hint) = &exec.install_hint
        && hint.chars().any(|c| c.is_control() && c != '\n')
    {
        return Err("its installHint holds a control character".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use ichor_issuer::api::kubeconfig::{KubeconfigInput, render};

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIBATAKBggqhkjOPQQDAjAVMRMwEQYDVQQDEwprdWJlcm5ldGVz\n-----END CERTIFICATE-----\n";

    fn issuer() -> IssuerUrl {
        IssuerUrl::parse("https://ichor.example.com").unwrap()
    }

    fn rendered(ca_pem: &str, ca_file: Option<&str>) -> String {
        render(&KubeconfigInput {
            cluster_name: "prod",
            user: "alice",
            server: "https://10.0.0.10:6443",
            tls_server_name: None,
            ca_pem,
            issuer_url: "https://ichor.example.com",
            ca_file,
        })
        .unwrap()
    }

    #[test]
    fn what_the_issuer_renders_passes_with_and_without_a_ca_file() {
        check_kubeconfig(&rendered("", None), &issuer(), None).unwrap();
        let with = rendered("", Some("/home/alice/ca.pem"));
        check_kubeconfig(&with, &issuer(), Some("/home/alice/ca.pem")).unwrap();
        let e = check_kubeconfig(&with, &issuer(), None).unwrap_err();
        assert!(e.reason.contains("exec arguments"), "{e}");
        let e = check_kubeconfig(
            &rendered("", None),
            &IssuerUrl::parse("https://other.example").unwrap(),
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("nothing was written"), "{e}");
    }

    #[test]
    fn certificate_authority_data_holds_certificates_only() {
        check_kubeconfig(&rendered(CA, None), &issuer(), None).unwrap();
        let good = base64::engine::general_purpose::STANDARD.encode(CA);
        let key =
            format!("{CA}-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n");
        let bad = base64::engine::general_purpose::STANDARD.encode(key);
        let e = check_kubeconfig(&rendered(CA, None).replace(&good, &bad), &issuer(), None).unwrap_err();
        assert!(e.reason.contains("PRIVATE KEY"), "{e}");
    }
}
