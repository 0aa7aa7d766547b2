//! A key rotation under load against the real binary: a relying party verifying every ID token with the served JWKS sees no failure.

use super::*;

/// A relying party: verifies ID tokens with the issuer's JWKS, fetched once and again only when
/// a token names a kid it does not know.
struct RelyingParty {
    client: reqwest::Client,
    issuer: String,
    jwks: Mutex<(Vec<String>, openidconnect::core::CoreJsonWebKeySet)>,
    fetches: AtomicUsize,
}

impl RelyingParty {
    async fn fetch(
        client: &reqwest::Client,
        issuer: &str,
    ) -> (Vec<String>, openidconnect::core::CoreJsonWebKeySet) {
        let body = client
            .get(format!("{issuer}/oidc/jwks"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let value: Value = serde_json::from_str(&body).unwrap();
        let kids = value["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["kid"].as_str().unwrap().to_owned())
            .collect();
        (kids, serde_json::from_str(&body).unwrap())
    }

    async fn new(client: reqwest::Client, issuer: String) -> RelyingParty {
        let jwks = Self::fetch(&client, &issuer).await;
        RelyingParty {
            client,
            issuer,
            jwks: Mutex::new(jwks),
            fetches: AtomicUsize::new(1),
        }
    }

    async fn verify(&self, id_token: &str) -> Result<String, String> {
        use openidconnect::{
            ClientId, IssuerUrl, Nonce,
            core::{CoreIdToken, CoreIdTokenVerifier},
        };
        let kid = jose_header(id_token)["kid"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if !self.jwks.lock().unwrap().0.contains(&kid) {
            let fresh = Self::fetch(&self.client, &self.issuer).await;
            self.fetches.fetch_add(1, Ordering::SeqCst);
            *self.jwks.lock().unwrap() = fresh;
        }
        let jwks = self.jwks.lock().unwrap().1.clone();
        let verifier = CoreIdTokenVerifier::new_public_client(
            ClientId::new("ichor-kube".to_owned()),
            IssuerUrl::new(self.issuer.clone()).unwrap(),
            jwks,
        );
        let token: CoreIdToken = id_token.parse().map_err(|e| format!("{e:?}"))?;
        let claims = token
            .claims(&verifier, |_: Option<&Nonce>| Ok::<(), String>(()))
            .map_err(|e| format!("kid {kid}: {e}"))?;
        Ok(claims.subject().to_string())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_rotation_under_load_fails_no_verification() {
    const WORKERS: usize = 3;
    let mut issuer = conformance_common::RunningIssuer::start(conformance_common::Options::default()).await;
    let old_kids = issuer.jwks_kids().await;
    assert_eq!(old_kids.len(), 1, "{old_kids:?}");
    let mut tokens = Vec::new();
    for _ in 0..WORKERS {
        tokens.push(refresh_of(&issuer.cli_sign_in(None).await));
    }
    let rp =
        Arc::new(RelyingParty::new(client_from(&issuer.ca_pem, [127, 0, 2, 1]), issuer.issuer.clone()).await);
    let stop = Arc::new(AtomicBool::new(false));
    let verified = Arc::new(AtomicUsize::new(0));
    // Set once the second document is written; counts the verifications after it.
    let second_doc = Arc::new(AtomicBool::new(false));
    let after_second = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = tokens
        .into_iter()
        .enumerate()
        .map(|(i, mut token)| {
            let rp = Arc::clone(&rp);
            let stop = Arc::clone(&stop);
            let verified = Arc::clone(&verified);
            let second_doc = Arc::clone(&second_doc);
            let after_second = Arc::clone(&after_second);
            let client = client_from(&issuer.ca_pem, [127, 0, 2, u8::try_from(i + 10).unwrap()]);
            let url = issuer.issuer.clone();
            tokio::spawn(async move {
                let mut failures = Vec::new();
                let mut kids = Vec::new();
                // At most 55 refreshes per worker: within one source's burst of 60.
                for _ in 0..55 {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    match http_refresh(&client, &url, &token).await {
                        Refresh::Ok(body) => {
                            token = refresh_of(&body);
                            let id = body["id_token"].as_str().unwrap();
                            let kid = jose_header(id)["kid"].as_str().unwrap().to_owned();
                            match rp.verify(id).await {
                                Ok(sub) if sub == "alice" => {
                                    verified.fetch_add(1, Ordering::SeqCst);
                                    if second_doc.load(Ordering::SeqCst) {
                                        after_second.fetch_add(1, Ordering::SeqCst);
                                    }
                                }
                                Ok(sub) => failures.push(format!("sub {sub}")),
                                Err(e) => failures.push(e),
                            }
                            if kids.last() != Some(&kid) {
                                kids.push(kid);
                            }
                        }
                        Refresh::Refused(status, body) => failures.push(format!("refresh {status}: {body}")),
                        Refresh::Lost => failures.push("refresh: no answer".to_owned()),
                    }
                    tokio::time::sleep(Duration::from_millis(30)).await;
                }
                (failures, kids)
            })
        })
        .collect();

    // Let the load run, then publish the controller's next document: a rotation planned an hour
    // ago, so the new keys are already active and sign at once, next to the old ones.
    let deadline = Instant::now() + Duration::from_secs(10);
    while verified.load(Ordering::SeqCst) < 10 {
        assert!(Instant::now() < deadline, "no load");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let doc1 = issuer.rotate_keys_at(Timestamp::now() - SignedDuration::from_hours(1));
    assert_eq!(doc1.keys().len(), 2, "a new RSA key next to the old one");
    // Then the controller's following document marks the old keys superseded (retireAfter).
    let rotated_at = verified.load(Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(10);
    while verified.load(Ordering::SeqCst) < rotated_at + 10 {
        assert!(Instant::now() < deadline, "no load after the rotation");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    issuer.rotate_keys_at(Timestamp::now());
    second_doc.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(10);
    let new_kid = loop {
        let kids = issuer.jwks_kids().await;
        if let Some(k) = kids.iter().find(|k| !old_kids.contains(k)) {
            break k.clone();
        }
        assert!(Instant::now() < deadline, "the new key was never published");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // The load goes on over the second document, then stops.
    let deadline = Instant::now() + Duration::from_secs(10);
    while after_second.load(Ordering::SeqCst) < 4 * WORKERS {
        assert!(Instant::now() < deadline, "no load after the second document");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let mut all_failures = Vec::new();
    let mut saw_both = 0;
    for w in workers {
        let (failures, kids) = w.await.unwrap();
        all_failures.extend(failures);
        if kids.contains(&old_kids[0]) && kids.contains(&new_kid) {
            saw_both += 1;
        }
    }
    assert!(all_failures.is_empty(), "failed verifications: {all_failures:?}");
    assert_eq!(
        saw_both, WORKERS,
        "every session got ID tokens of the old and then of the new key"
    );
    assert!(verified.load(Ordering::SeqCst) >= 30);
    assert!(
        rp.fetches.load(Ordering::SeqCst) >= 2,
        "the relying party re-fetched the JWKS on the new kid"
    );
    drop(issuer);
}
