//! The `talosconfig` file (what `talosctl` reads): named contexts, each with the API endpoints
//! and the mutual-TLS material — the Talos CA, and the client certificate and key whose
//! Organization is the caller's role (`os:admin` is needed to apply a configuration).
//!
//! Layout (spec talos-machine-api.md §4): top-level `context: <name>` and
//! `contexts: {<name>: {endpoints, nodes, ca, crt, key}}`, where `ca`, `crt` and `key` are
//! standard base64 of PEM text. Talos's client keys are Ed25519 in a PEM block labelled
//! `ED25519 PRIVATE KEY` (PKCS#8 inside); rustls only knows the standard labels, so the block is
//! relabelled `PRIVATE KEY` here.

use std::{
    collections::BTreeMap,
    fmt,
    net::{IpAddr, SocketAddr},
    path::{Path, PathBuf},
};

use base64::{Engine, engine::general_purpose::STANDARD};
use serde::Deserialize;

/// The Talos API port (`constants.ApidPort`), used when an endpoint names none.
pub const APID_PORT: u16 = 50000;

/// The largest talosconfig read: 1 MiB (a real one is a few kilobytes).
const MAX_BYTES: u64 = 1024 * 1024;

/// Why the talosconfig cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TalosConfigError {
    /// The file could not be read.
    #[error("talosconfig {path}: cannot read it ({reason}); pass --talosconfig FILE or set TALOSCONFIG")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        reason: String,
    },
    /// The file is not a talosconfig.
    #[error("talosconfig {path}: not valid YAML of a talosconfig: {reason}")]
    Yaml {
        /// The file.
        path: String,
        /// The parser's message.
        reason: String,
    },
    /// No context is selected.
    #[error("talosconfig {path}: `context` is empty; pass --talos-context NAME")]
    NoContext {
        /// The file.
        path: String,
    },
    /// The selected context does not exist.
    #[error("talosconfig {path}: context {name:?} is not in `contexts` (it has: {known})")]
    UnknownContext {
        /// The file.
        path: String,
        /// The context asked for.
        name: String,
        /// The contexts the file has, comma-separated.
        known: String,
    },
    /// A context lacks a field.
    #[error("talosconfig {path}: contexts.{context}.{field}: required for mutual TLS but missing or empty")]
    Missing {
        /// The file.
        path: String,
        /// The context.
        context: String,
        /// `ca`, `crt` or `key`.
        field: &'static str,
    },
    /// A field is not base64 of PEM.
    #[error("talosconfig {path}: contexts.{context}.{field}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// The context.
        context: String,
        /// `ca`, `crt`, `key` or `endpoints[i]`.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

#[derive(Deserialize)]
struct RawConfig {
    #[serde(default)]
    context: Option<String>,
    #[serde(default)]
    contexts: BTreeMap<String, RawContext>,
}

#[derive(Deserialize)]
struct RawContext {
    #[serde(default)]
    endpoints: Vec<String>,
    #[serde(default)]
    ca: Option<String>,
    #[serde(default)]
    crt: Option<String>,
    #[serde(default)]
    key: Option<String>,
}

/// One Talos API endpoint: a host (IP address or DNS name) and a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The host, without brackets for IPv6; also the TLS server name checked against the
    /// apid certificate's SANs (as talosctl does).
    pub host: String,
    /// The port (50000 unless the endpoint names one).
    pub port: u16,
}

/// Why a talosconfig endpoint is not `host[:port]`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// The part after the last `:` is not a port.
    #[error("{endpoint:?}: the port {port:?} is not a number from 0 to 65535")]
    Port {
        /// The endpoint as written (trimmed).
        endpoint: String,
        /// The part taken for the port.
        port: String,
    },
    /// The host is neither an IP address nor a DNS name.
    #[error("{0:?}: not host[:port] (an IP address or DNS name, optionally with a port)")]
    Host(String),
}

impl Endpoint {
    /// Parses `host`, `host:port`, `IP`, `IPv4:port` or `[IPv6]:port`.
    ///
    /// # Errors
    /// What is wrong with `s`: the port, or the host.
    pub fn parse(s: &str) -> Result<Self, EndpointError> {
        let s = s.trim();
        if let Ok(sa) = s.parse::<SocketAddr>() {
            return Ok(Self {
                host: sa.ip().to_string(),
                port: sa.port(),
            });
        }
        if let Ok(ip) = s.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            return Ok(Self {
                host: ip.to_string(),
                port: APID_PORT,
            });
        }
        let (host, port) = match s.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse::<u16>().map_err(|_| EndpointError::Port {
                    endpoint: s.to_owned(),
                    port: p.to_owned(),
                })?,
            ),
            None => (s, APID_PORT),
        };
        let valid_host = !host.is_empty()
            && host.len() <= 253
            && host.split('.').all(|l| {
                !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
        if !valid_host {
            return Err(EndpointError::Host(s.to_owned()));
        }
        Ok(Self {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// The URI tonic dials: `https://host:port`, IPv6 in brackets.
    pub fn uri(&self) -> String {
        match self.host.parse::<IpAddr>() {
            Ok(IpAddr::V6(v6)) => format!("https://[{v6}]:{}", self.port),
            _ => format!("https://{}:{}", self.host, self.port),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.host.parse::<IpAddr>() {
            Ok(IpAddr::V6(v6)) => write!(f, "[{v6}]:{}", self.port),
            _ => write!(f, "{}:{}", self.host, self.port),
        }
    }
}

/// The selected context of a talosconfig, ready for a TLS client.
#[derive(Clone)]
pub struct TalosContext {
    /// The context's name.
    pub name: String,
    /// Its endpoints (may be empty: the caller then dials each node itself).
    pub endpoints: Vec<Endpoint>,
    /// The Talos CA (PEM) the apid serving certificate must chain to.
    pub ca_pem: String,
    /// The client certificate (PEM).
    pub crt_pem: String,
    /// The client key (PEM, relabelled to `PRIVATE KEY` when it was `ED25519 PRIVATE KEY`).
    pub key_pem: String,
}

impl fmt::Debug for TalosContext {
    /// Never prints the key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TalosContext")
            .field("name", &self.name)
            .field("endpoints", &self.endpoints)
            .field("key_pem", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// `~/.talos/config`, talosctl's default, when `$HOME` is set.
pub fn default_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".talos").join("config"))
}

/// Reads `path` and selects `context` (or the file's own `context`).
///
/// # Errors
/// See [`TalosConfigError`]; each names the file and the field.
pub fn load(path: &Path, context: Option<&str>) -> Result<TalosContext, TalosConfigError> {
    use std::io::Read;
    let name = path.display().to_string();
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_BYTES).read_to_string(&mut text))
        .map_err(|e| TalosConfigError::Read {
            path: name.clone(),
            reason: e.to_string(),
        })?;
    parse(&text, &name, context)
}

/// Parses a talosconfig's text; `path` is how errors name it.
///
/// # Errors
/// See [`TalosConfigError`].
pub fn parse(text: &str, path: &str, context: Option<&str>) -> Result<TalosContext, TalosConfigError> {
    let raw: RawConfig = serde_yaml::from_str(text).map_err(|e| TalosConfigError::Yaml {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    let selected = match context.map(str::to_owned).or(raw.context) {
        Some(c) if !c.is_empty() => c,
        _ => {
            return Err(TalosConfigError::NoContext {
                path: path.to_owned(),
            });
        }
    };
    let Some(ctx) = raw.contexts.get(&selected) else {
        return Err(TalosConfigError::UnknownContext {
            path: path.to_owned(),
            name: selected,
            known: raw.contexts.keys().cloned().collect::<Vec<_>>().join(", "),
        });
    };
    let invalid = |field: String, reason: String| TalosConfigError::Invalid {
        path: path.to_owned(),
        context: selected.clone(),
        field,
        reason,
    };
    let decode = |field: &'static str, value: &Option<String>| -> Result<Vec<pem::Pem>, TalosConfigError> {
        let value = value
            .as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| TalosConfigError::Missing {
                path: path.to_owned(),
                context: selected.clone(),
                field,
            })?;
        let bytes = STANDARD
            .decode(value)
            .map_err(|e| invalid(field.to_owned(), format!("not standard base64 ({e})")))?;
        let blocks = pem::parse_many(&bytes)
            .map_err(|e| invalid(field.to_owned(), format!("the decoded text is not PEM ({e})")))?;
        if blocks.is_empty() {
            return Err(invalid(
                field.to_owned(),
                "the decoded text holds no PEM block".to_owned(),
            ));
        }
        Ok(blocks)
    };
    let ca = decode("ca", &ctx.ca)?;
    let crt = decode("crt", &ctx.crt)?;
    let key = decode("key", &ctx.key)?;
    for (field, blocks) in [("ca", &ca), ("crt", &crt)] {
        if let Some(b) = blocks.iter().find(|b| b.tag() != "CERTIFICATE") {
            return Err(invalid(
                field.to_owned(),
                format!(
                    "holds a PEM block {:?} where only CERTIFICATE blocks belong",
                    b.tag()
                ),
            ));
        }
    }
    let [key] = key.as_slice() else {
        return Err(invalid(
            "key".to_owned(),
            "must hold exactly one PEM private key block".to_owned(),
        ));
    };
    let key_pem = match key.tag() {
        "ED25519 PRIVATE KEY" | "PRIVATE KEY" => pem::encode(&pem::Pem::new("PRIVATE KEY", key.contents())),
        "EC PRIVATE KEY" | "RSA PRIVATE KEY" => pem::encode(key),
        other => {
            return Err(invalid(
                "key".to_owned(),
                format!("a PEM block {other:?} is not a private key this client can use"),
            ));
        }
    };
    let endpoints = ctx
        .endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| Endpoint::parse(e).map_err(|r| invalid(format!("endpoints[{i}]"), r.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(TalosContext {
        name: selected.clone(),
        endpoints,
        ca_pem: pem::encode_many(&ca),
        crt_pem: pem::encode_many(&crt),
        key_pem,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn b64(s: &str) -> String {
        STANDARD.encode(s)
    }

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nAAEC\n-----END CERTIFICATE-----\n";
    const ED_KEY: &str = "-----BEGIN ED25519 PRIVATE KEY-----\nAAEC\n-----END ED25519 PRIVATE KEY-----\n";

    fn config(context: &str, key: &str) -> String {
        format!(
            "context: {context}\ncontexts:\n  prod:\n    endpoints: [10.0.0.1, '[fd00::1]:50001', cp.example.com:123]\n    nodes: [10.0.0.2]\n    ca: {}\n    crt: {}\n    key: {}\n",
            b64(CERT),
            b64(CERT),
            b64(key)
        )
    }

    #[test]
    fn an_ed25519_key_block_is_relabelled_to_pkcs8_private_key() {
        let ctx = parse(&config("prod", ED_KEY), "tc", None).unwrap();
        assert!(
            ctx.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"),
            "{}",
            ctx.key_pem
        );
        assert_eq!(ctx.name, "prod");
    }

    #[test]
    fn endpoints_get_the_apid_port_unless_they_name_one() {
        let ctx = parse(&config("prod", ED_KEY), "tc", None).unwrap();
        let uris: Vec<String> = ctx.endpoints.iter().map(Endpoint::uri).collect();
        assert_eq!(
            uris,
            [
                "https://10.0.0.1:50000",
                "https://[fd00::1]:50001",
                "https://cp.example.com:123"
            ]
        );
        assert_eq!(ctx.endpoints[1].host, "fd00::1", "the TLS name has no brackets");
    }

    #[test]
    fn an_unknown_context_names_the_ones_the_file_has() {
        let err = parse(&config("prod", ED_KEY), "tc", Some("stage"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "talosconfig tc: context \"stage\" is not in `contexts` (it has: prod)"
        );
    }

    #[test]
    fn a_missing_key_names_the_field() {
        let text = config("prod", ED_KEY).replace("    key:", "    other:");
        let err = parse(&text, "tc", None).unwrap_err().to_string();
        assert!(err.contains("contexts.prod.key: required"), "{err}");
    }

    #[test]
    fn a_key_that_is_not_base64_is_refused_without_echoing_it() {
        let text = config("prod", ED_KEY).replace(&b64(ED_KEY), "secret%%%");
        let err = parse(&text, "tc", None).unwrap_err().to_string();
        assert!(err.contains("contexts.prod.key: not standard base64"), "{err}");
        assert!(!err.contains("secret"), "{err}");
    }

    #[test]
    fn the_debug_form_never_shows_the_key() {
        let ctx = parse(&config("prod", ED_KEY), "tc", None).unwrap();
        assert!(!format!("{ctx:?}").contains("AAEC"));
    }

    #[test]
    fn an_endpoint_with_a_url_scheme_is_refused() {
        assert!(Endpoint::parse("https://10.0.0.1").is_err());
        assert_eq!(Endpoint::parse("10.0.0.1:7").unwrap().port, 7);
    }
}
