//! One user's many sessions refreshing at once through one issuer on the Kubernetes store: every
//! rotation rewrites the same key of the real credentials Secret, so the user's writes wait in
//! their line instead of racing each other into the apiserver's conflicts. With immediate retries
//! on any 503, none comes; no session is lost, and each grant is exactly one rotation in the
//! Secret.

use std::sync::Arc;

use axum::http::StatusCode;
use ichor_issuer::keys::{KeyRing, LoadedKeys};
use ichor_issuer::oidc::Settings;
use ichor_issuer::store::UserStore;
use ichor_issuer::store::kube::KubeStore;
use jiff::SignedDuration;

use super::{cluster, issuer_client, refresh_of, runtime, stored_entry};
use crate::common::{self, ManualClock, MemoryStore, replica};
use crate::faults::busy_user::{peer, sessions};

/// Sessions of the one user.
const SESSIONS: usize = 24;
/// Grants each session takes.
const ROUNDS: u64 = 4;

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn many_sessions_of_one_user_refreshing_at_once_on_the_real_secret_get_no_503_and_rotate_once_per_grant()
-> anyhow::Result<()> {
    let Some(plane) = cluster(&[("alice", "admin")], &[("alice", &common::entry(false))])? else {
        return Ok(());
    };
    let runtime = runtime(4)?;
    runtime.block_on(async {
        let store = Arc::new(KubeStore::new(issuer_client(&plane).await?));
        let clock = Arc::new(ManualClock::new(common::start()));
        let ring = Arc::new(KeyRing::with_keys(LoadedKeys::from_document(
            &common::first_document(common::start()),
        )?));
        let h = Arc::new(replica(
            Arc::clone(&store) as Arc<dyn UserStore>,
            Arc::new(MemoryStore::default()),
            ring,
            Arc::new(Settings::new(common::settings())),
            clock,
        ));
        let (entry, tokens) = sessions(&h, &common::entry(false), SESSIONS);
        let (_, version) = store.read_credentials("alice").await?;
        store.write_credentials("alice", &version, Some(&entry)).await?;

        let tasks: Vec<_> = tokens
            .into_iter()
            .enumerate()
            .map(|(i, (fam, mut token))| {
                let h = Arc::clone(&h);
                tokio::spawn(async move {
                    let (mut granted, mut unavailable, mut n) = (0u64, 0u64, 0);
                    while granted < ROUNDS {
                        let reply = h.refresh_from(&token, peer(i, n)).await;
                        n += 1;
                        match reply.status {
                            StatusCode::OK => {
                                granted += 1;
                                token = refresh_of(&reply.json());
                            }
                            // Retried at once with the same token.
                            StatusCode::SERVICE_UNAVAILABLE => unavailable += 1,
                            // Past a session's write cap (20 at once, then one per 10 s), which
                            // this frozen clock refills only when asked: a second, as
                            // `Retry-After` says.
                            StatusCode::TOO_MANY_REQUESTS => h.clock.advance(SignedDuration::from_secs(1)),
                            other => panic!("session {fam}: {other} {}", reply.text()),
                        }
                    }
                    (fam, unavailable)
                })
            })
            .collect();
        let mut seen = Vec::new();
        for task in tasks {
            seen.push(task.await?);
        }

        let unavailable: u64 = seen.iter().map(|(_, u)| u).sum();
        assert_eq!(unavailable, 0, "no 503 for {SESSIONS} sessions of one user");
        let stored = stored_entry(&plane, "alice")?.expect("alice's entry");
        assert_eq!(stored.families.len(), SESSIONS, "no session lost");
        for (fam, _) in &seen {
            assert_eq!(
                stored.family(fam).map(|f| f.generation),
                Some(1 + ROUNDS),
                "session {fam}: one rotation in the Secret per grant"
            );
        }
        anyhow::Ok(())
    })?;
    Ok(())
}
