//! A blocking HTTPS GET for probing the apiservers (`/readyz`, `/metrics`) from synchronous
//! tests: rustls over a `TcpStream`, HTTP/1.1 with `Connection: close`, trusting one CA and
//! optionally presenting a client certificate. Nothing here is for production traffic.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};

use super::pki::Pair;

/// The largest response body read.
const MAX_BODY: u64 = 16 * 1024 * 1024;

/// One response: status code and body.
#[derive(Clone, Debug)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// The body as text (lossy UTF-8).
    pub body: String,
}

fn der_certs(pem_text: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<_> = pem::parse_many(pem_text)?
        .into_iter()
        .filter(|p| p.tag() == "CERTIFICATE")
        .map(|p| CertificateDer::from(p.into_contents()))
        .collect();
    anyhow::ensure!(!certs.is_empty(), "no CERTIFICATE in the PEM given");
    Ok(certs)
}

/// A client configuration that trusts `ca_pem` and presents `client` when given.
pub fn client_config(ca_pem: &str, client: Option<&Pair>) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in der_certs(ca_pem)? {
        roots.add(cert)?;
    }
    let builder =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some(pair) => {
            let key = pem::parse(&pair.key_pem)?;
            builder.with_client_auth_cert(
                der_certs(&pair.cert_pem)?,
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.into_contents())),
            )?
        }
    };
    Ok(Arc::new(config))
}

/// `GET https://<address><path>` with a bearer token when given; the server certificate must be
/// valid for the address's IP.
pub fn get(
    config: &Arc<rustls::ClientConfig>,
    address: SocketAddr,
    path: &str,
    bearer: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<Response> {
    let tcp =
        TcpStream::connect_timeout(&address, timeout).with_context(|| format!("connecting to {address}"))?;
    tcp.set_read_timeout(Some(timeout))?;
    tcp.set_write_timeout(Some(timeout))?;
    let name = ServerName::IpAddress(address.ip().into());
    let conn = rustls::ClientConnection::new(Arc::clone(config), name)?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let auth = bearer
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\n{auth}Accept: */*\r\nConnection: close\r\n\r\n"
    )?;
    tls.flush()?;
    let mut raw = Vec::new();
    match std::io::Read::by_ref(&mut tls)
        .take(MAX_BODY)
        .read_to_end(&mut raw)
    {
        Ok(_) => {}
        // Go's TLS stack closes without close_notify on Connection: close.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(e).with_context(|| format!("reading the answer of {address}{path}")),
    }
    parse(&raw)
}

fn parse(raw: &[u8]) -> anyhow::Result<Response> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("no end of headers in the answer"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("no status line in the answer: {head}"))?;
    let chunked = head
        .lines()
        .any(|l| l.to_ascii_lowercase().replace(' ', "") == "transfer-encoding:chunked");
    let body = if chunked { dechunk(body) } else { body.to_owned() };
    Ok(Response { status, body })
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_plain_and_chunked_answers() {
        let plain = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").unwrap();
        assert_eq!((plain.status, plain.body.as_str()), (200, "ok"));
        let chunked = parse(
            b"HTTP/1.1 500 Internal\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!((chunked.status, chunked.body.as_str()), (500, "abcde"));
        assert!(parse(b"garbage").is_err());
    }
}
