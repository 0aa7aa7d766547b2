//! `kill -9` of the real `ichor-issuer` process while it rotates refresh tokens into the local store: no entry corrupted, no family lost or set back.

use super::*;

/// The files of an `ichor-issuer` deployment that outlives its processes: the same ports (so
/// the same `iss`), keys, TLS pair, users and state directory for every start.
struct Deployment {
    dir: tempfile::TempDir,
    external: u16,
    internal: u16,
    issuer: String,
    ca_pem: String,
}

impl Deployment {
    fn new(users: &[&str]) -> Deployment {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let (ca_pem, _, _) = conformance_common::lay_out(dir.path(), users, SignedDuration::from_hours(30));
        let (external, internal) = (conformance_common::free_port(), conformance_common::free_port());
        Deployment {
            dir,
            external,
            internal,
            issuer: format!("https://127.0.0.1:{external}"),
            ca_pem,
        }
    }

    fn credentials_path(&self) -> PathBuf {
        self.dir.path().join("state/credentials.json")
    }

    fn spawn(&self) -> Proc {
        let p = |s: &str| self.dir.path().join(s);
        let child = Command::new(env!("CARGO_BIN_EXE_ichor-issuer"))
            .args(["--external-url", &self.issuer])
            .args(["--listen", &format!("127.0.0.1:{}", self.external)])
            .args(["--internal-listen", &format!("127.0.0.1:{}", self.internal)])
            .args(["--metrics-listen", "127.0.0.1:0"])
            .arg("--ichor-tls-dir")
            .arg(p("tls"))
            .arg("--keys-file")
            .arg(p("keys.json"))
            .args(["--store", "local"])
            .arg("--local-users-dir")
            .arg(p("users"))
            .arg("--local-state-dir")
            .arg(p("state"))
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        Proc(child)
    }

    async fn wait_ready(&self, child: &mut Proc, client: &reqwest::Client) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.0.try_wait().unwrap() {
                panic!("ichor-issuer exited before it was ready: {status}");
            }
            if let Ok(r) = client.get(format!("{}/readyz", self.issuer)).send().await
                && r.status().is_success()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "ichor-issuer was not ready within 20 s"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// An issuer process, killed (SIGKILL) and reaped on drop, so a failing test leaves none behind.
struct Proc(Child);

impl Proc {
    /// `kill -9` and reap.
    fn kill_9(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Signs `user` in for `ichor-cli` with `offline_access` through the real endpoints.
async fn http_sign_in(client: &reqwest::Client, issuer: &str, user: &str) -> Value {
    let request = Authorize::cli(VERIFIER);
    sign_in::sign_in(client, issuer, &request, user, common::PASSWORD, SlowDown::Refuse)
        .await
        .unwrap_or_else(|refusal| panic!("{refusal}"))
}

/// One client session: the user, and the last successor the client received.
struct Session {
    user: String,
    token: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_during_credentials_writes_corrupts_no_entry_and_loses_no_family() {
    const USERS: [&str; 2] = ["alice", "bob"];
    const FAMILIES_PER_USER: usize = 3;
    const KILLS: usize = 5;
    let deployment = Deployment::new(&USERS);
    let client = client_from(&deployment.ca_pem, [127, 0, 0, 1]);
    let mut child = deployment.spawn();
    deployment.wait_ready(&mut child, &client).await;

    let mut sessions = Vec::new();
    for user in USERS {
        for _ in 0..FAMILIES_PER_USER {
            let response = http_sign_in(&client, &deployment.issuer, user).await;
            sessions.push(Session {
                user: user.to_owned(),
                token: refresh_of(&response),
            });
        }
    }
    let sessions: Vec<Arc<Mutex<Session>>> = sessions.into_iter().map(|s| Arc::new(Mutex::new(s))).collect();
    let mut total_acked = 0;
    let mut total_lost = 0;
    let unavailable = Arc::new(AtomicUsize::new(0));

    for life in 0..KILLS {
        if life > 0 {
            child = deployment.spawn();
            deployment.wait_ready(&mut child, &client).await;
        }
        // Every session refreshes in a loop; the process is killed after `kill_after`
        // acknowledged rotations, with the other sessions' requests in flight.
        let acked = Arc::new(AtomicUsize::new(0));
        let refused = Arc::new(Mutex::new(Vec::<String>::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let kill_after = 6 + 5 * life;
        let workers: Vec<_> = sessions
            .iter()
            .enumerate()
            .map(|(i, session)| {
                let session = Arc::clone(session);
                let acked = Arc::clone(&acked);
                let refused = Arc::clone(&refused);
                let stop = Arc::clone(&stop);
                let unavailable = Arc::clone(&unavailable);
                // Each worker leaves from its own loopback address: its own token bucket.
                let client = client_from(&deployment.ca_pem, [127, 0, 1, u8::try_from(i + 1).unwrap()]);
                let issuer = deployment.issuer.clone();
                tokio::spawn(async move {
                    let mut lost = 0;
                    while !stop.load(Ordering::SeqCst) {
                        let token = session.lock().unwrap().token.clone();
                        match http_refresh(&client, &issuer, &token).await {
                            Refresh::Ok(body) => {
                                session.lock().unwrap().token = refresh_of(&body);
                                acked.fetch_add(1, Ordering::SeqCst);
                            }
                            // "Try again" (the store's conflict retries ran out under this
                            // load): nothing was written; retry with the same token.
                            Refresh::Refused(503, body) if body.contains("temporarily_unavailable") => {
                                unavailable.fetch_add(1, Ordering::SeqCst);
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                            Refresh::Refused(status, body) => {
                                refused.lock().unwrap().push(format!("{status}: {body}"));
                                return lost;
                            }
                            Refresh::Lost => {
                                lost += 1;
                                return lost;
                            }
                        }
                    }
                    lost
                })
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        while acked.load(Ordering::SeqCst) < kill_after {
            assert!(
                Instant::now() < deadline,
                "life {life}: too few rotations within 10 s"
            );
            assert!(
                refused.lock().unwrap().is_empty(),
                "{:?}",
                refused.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // SIGKILL: no destructor, no flush, in the middle of the write load.
        child.kill_9();
        stop.store(true, Ordering::SeqCst);
        for w in workers {
            total_lost += w.await.unwrap();
        }
        total_acked += acked.load(Ordering::SeqCst);
        let refused = refused.lock().unwrap().clone();
        assert!(
            refused.is_empty(),
            "life {life}: a refresh was refused around a crash: {refused:?}"
        );

        // After every crash the file parses, every entry parses, and every family is at least
        // at the generation its client last received.
        let entries = parse_credentials_file(&deployment.credentials_path());
        for session in &sessions {
            let s = session.lock().unwrap();
            let family = entries
                .get(&s.user)
                .and_then(|e| e.family(&family_of(&s.token)))
                .unwrap_or_else(|| panic!("life {life}: a family of {} was lost", s.user));
            assert!(
                family.generation >= generation_of(&s.token),
                "life {life}: a family of {} went back from generation {} to {}",
                s.user,
                generation_of(&s.token),
                family.generation
            );
        }
    }
    assert!(total_acked >= 6 * KILLS, "{total_acked} rotations");
    assert!(total_lost > 0, "no request was in flight at any kill");
    eprintln!(
        "{total_acked} rotations acknowledged, {total_lost} requests cut by kill -9, {} answered 503",
        unavailable.load(Ordering::SeqCst)
    );

    // The last successor each client received still refreshes on a fresh process (directly, or
    // as the 10-second grace retry when the crash ate the answer of a committed rotation).
    let mut child = deployment.spawn();
    deployment.wait_ready(&mut child, &client).await;
    for session in &sessions {
        let (user, token) = {
            let s = session.lock().unwrap();
            (s.user.clone(), s.token.clone())
        };
        match http_refresh(&client, &deployment.issuer, &token).await {
            Refresh::Ok(body) => {
                let next = refresh_of(&body);
                assert_eq!(family_of(&next), family_of(&token));
                assert!(generation_of(&next) > generation_of(&token));
            }
            Refresh::Refused(status, body) => panic!("{user}: {status} {body}"),
            Refresh::Lost => panic!("no answer"),
        }
    }
    child.kill_9();
    // No temporary file of an interrupted write is read as the store.
    let entries = parse_credentials_file(&deployment.credentials_path());
    assert_eq!(entries.len(), USERS.len());
    assert_eq!(
        entries.values().map(|e| e.families.len()).sum::<usize>(),
        USERS.len() * FAMILIES_PER_USER
    );
}
