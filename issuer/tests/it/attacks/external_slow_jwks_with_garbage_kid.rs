//! A token naming a `kid` the provider does not publish makes the issuer read the provider's
//! JWKS again (at most every refetch interval). The attack: while the provider answers slowly,
//! send such a garbage token now and then; if the read held the verifier's one lock, every
//! external user's API call would wait behind it. A valid token (its key already known) must be
//! verified at once while the garbage token's read is in flight.
//!
//! And a discovery document naming an `http` `jwks_uri`: the keys would come over a connection
//! anyone on the path can rewrite. The verifier fetches over https only, so it yields no keys
//! and the plain-HTTP address is never contacted.
//!
//! The provider is a small HTTPS server here (under a test CA), because the attack needs its
//! JWKS endpoint to be slow on demand.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use ichor_issuer::external::{ExternalVerifier, provider::ProviderInput};
use ichor_testkit::pki::{TestCa, server_config};
use jiff::Timestamp;
use josekit::jwk::{Jwk, KeyPair as _};
use josekit::jws::{JwsHeader, RS256, alg::rsassa::RsassaJwsSigner};
use josekit::jwt::JwtPayload;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

const CLIENT: &str = "ichor-ui";
/// How long the JWKS endpoint takes to answer once slowed.
const SLOW: Duration = Duration::from_secs(4);

/// The provider: discovery and JWKS over HTTPS on 127.0.0.1.
struct Provider {
    issuer: String,
    ca_pem: String,
    /// JWKS requests received.
    jwks_requests: Arc<AtomicUsize>,
    /// Milliseconds every JWKS answer waits from now on.
    jwks_delay_ms: Arc<AtomicU64>,
}

/// Reads one request head; `None` when the client went away.
async fn request_path<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut byte).await.ok()?;
        if n == 0 || head.len() > 64 * 1024 {
            return None;
        }
        head.extend_from_slice(&byte[..n]);
    }
    let line = String::from_utf8_lossy(&head).lines().next()?.to_owned();
    line.split(' ').nth(1).map(str::to_owned)
}

impl Provider {
    /// Starts it publishing `jwks` (the public keys); its discovery names `jwks_uri`, or its
    /// own https `/jwks` when `None`.
    async fn start(jwks: serde_json::Value, jwks_uri: Option<String>) -> Self {
        let ca = TestCa::new("test idp").unwrap();
        let pair = ca.serving_for_ip("idp", IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
        let mut config = (*server_config(&pair).unwrap()).clone();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("https://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let discovery = json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"),
            "jwks_uri": jwks_uri.unwrap_or_else(|| format!("{issuer}/jwks")),
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
        })
        .to_string();
        let jwks = jwks.to_string();
        let jwks_requests = Arc::new(AtomicUsize::new(0));
        let jwks_delay_ms = Arc::new(AtomicU64::new(0));
        let (requests, delay) = (Arc::clone(&jwks_requests), Arc::clone(&jwks_delay_ms));
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, discovery, jwks) = (acceptor.clone(), discovery.clone(), jwks.clone());
                let (requests, delay) = (Arc::clone(&requests), Arc::clone(&delay));
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Some(path) = request_path(&mut tls).await else {
                        return;
                    };
                    let body = match path.as_str() {
                        "/.well-known/openid-configuration" => discovery,
                        "/jwks" => {
                            requests.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(delay.load(Ordering::SeqCst))).await;
                            jwks
                        }
                        _ => String::new(),
                    };
                    let status = if body.is_empty() {
                        "404 Not Found"
                    } else {
                        "200 OK"
                    };
                    let answer = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = tls.write_all(answer.as_bytes()).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        Self {
            issuer,
            ca_pem: ca.pem,
            jwks_requests,
            jwks_delay_ms,
        }
    }

    fn verifier(&self, refetch_interval: Duration) -> Arc<ExternalVerifier> {
        let provider = ProviderInput {
            issuer_url: Some(self.issuer.clone()),
            client_id: Some(CLIENT.to_owned()),
            kube_client_id: Some("kubernetes".to_owned()),
            ca: Some(("idp-ca".to_owned(), Ok(self.ca_pem.as_bytes().to_vec()))),
            ..ProviderInput::default()
        }
        .validate("https://ichor.example.com")
        .unwrap()
        .unwrap();
        ExternalVerifier::with_refetch_interval(provider, refetch_interval).unwrap()
    }
}

/// An RS256 key with its `kid`: its public JWK, and a signer of ID tokens.
fn key(kid: &str) -> (Jwk, RsassaJwsSigner) {
    let pair = RS256.generate_key_pair(2048).unwrap();
    let mut public = pair.to_jwk_public_key();
    public.set_key_id(kid);
    public.set_key_use("sig");
    public.set_algorithm("RS256");
    let signer = RS256.signer_from_jwk(&pair.to_jwk_private_key()).unwrap();
    (public, signer)
}

fn id_token(issuer: &str, kid: &str, signer: &RsassaJwsSigner) -> String {
    let mut header = JwsHeader::new();
    header.set_token_type("JWT");
    header.set_key_id(kid);
    let mut payload = JwtPayload::new();
    payload.set_issuer(issuer);
    payload.set_subject("carol");
    payload.set_audience(vec![CLIENT]);
    let now = SystemTime::now();
    payload.set_issued_at(&now);
    payload.set_expires_at(&(now + Duration::from_secs(300)));
    payload
        .set_claim("email", Some(json!("carol@example.org")))
        .unwrap();
    josekit::jwt::encode_with_signer(&payload, &header, signer).unwrap()
}

fn jwks(keys: &[&Jwk]) -> serde_json::Value {
    json!({"keys": keys.iter().map(|k| serde_json::Value::Object(k.as_ref().clone())).collect::<Vec<_>>()})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_kid_during_a_slow_jwks_read_does_not_delay_a_valid_token() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (public, signer) = key("k1");
    let (_, garbage_signer) = key("garbage");
    let idp = Provider::start(jwks(&[&public]), None).await;
    // Every unknown kid may read the JWKS again: the attack at its most frequent.
    let verifier = idp.verifier(Duration::ZERO);
    let valid = id_token(&idp.issuer, "k1", &signer);
    let garbage = id_token(&idp.issuer, "garbage", &garbage_signer);

    // Discovery and the first JWKS read, answered at once.
    let verified = verifier.verify(&valid, Timestamp::now()).await.unwrap();
    assert_eq!(verified.identity.username, "oidc:carol@example.org");
    let reads = idp.jwks_requests.load(Ordering::SeqCst);

    // The provider slows down; a garbage kid starts a JWKS read that takes SLOW.
    idp.jwks_delay_ms
        .store(u64::try_from(SLOW.as_millis()).unwrap(), Ordering::SeqCst);
    let attacker = {
        let verifier = Arc::clone(&verifier);
        tokio::spawn(async move { verifier.verify(&garbage, Timestamp::now()).await })
    };
    let started = Instant::now();
    while idp.jwks_requests.load(Ordering::SeqCst) == reads {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the garbage kid never made the verifier read the JWKS"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // The valid token meanwhile: verified at once, not after the slow read.
    let started = Instant::now();
    let verified = verifier.verify(&valid, Timestamp::now()).await.unwrap();
    let took = started.elapsed();
    assert_eq!(verified.identity.username, "oidc:carol@example.org");
    assert!(
        took < Duration::from_secs(1),
        "a valid token waited {took:?} behind the garbage kid's JWKS read ({SLOW:?})"
    );

    // The garbage token itself is refused once the read is done.
    let refused = attacker.await.unwrap().unwrap_err();
    assert!(refused.0.contains("signature"), "{}", refused.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discovery_document_naming_an_http_jwks_uri_yields_no_keys_and_no_plain_request() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (public, signer) = key("k1");
    // A plain-HTTP listener counting whoever connects to it.
    let plain = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let plain_uri = format!("http://127.0.0.1:{}/jwks", plain.local_addr().unwrap().port());
    let contacted = Arc::new(AtomicUsize::new(0));
    {
        let contacted = Arc::clone(&contacted);
        tokio::spawn(async move {
            while let Ok((_tcp, _)) = plain.accept().await {
                contacted.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    let idp = Provider::start(jwks(&[&public]), Some(plain_uri)).await;
    let verifier = idp.verifier(Duration::ZERO);
    let valid = id_token(&idp.issuer, "k1", &signer);

    let refused = verifier.verify(&valid, Timestamp::now()).await.unwrap_err();
    assert!(refused.0.contains("cannot be read"), "{}", refused.0);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        contacted.load(Ordering::SeqCst),
        0,
        "the http jwks_uri was contacted"
    );
}
