//! A slow kube-apiserver outlasting the `IchorUser` webhook: each read the webhook makes is
//! bounded (3 s), but one review may make several in turn (the requester read fresh, then a
//! credentials entry or the other admins), together past the kube-apiserver's 5 s timeout for
//! the webhook. All reads of one review share one deadline under it, so the answer is the
//! webhook's own refusal, saying which read did not answer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ichor_controller::admission::access::UserLister;
use ichor_controller::admission::fixtures::{self, FakeLister, FakeReviewer, NAMESPACE, OPERATOR, user};
use ichor_controller::admission::users;
use ichor_controller::admission::{AdmissionError, AdmissionState, controller_identity};
use ichor_renderers::crd::IchorUser;

use crate::admission::outcome;

/// Each read from the kube-apiserver answers after this long: within its own timeout.
const SLOW: Duration = Duration::from_millis(2500);

struct SlowLister(FakeLister);

#[async_trait]
impl UserLister for SlowLister {
    fn cached_users(&self, namespace: &str) -> Result<Vec<Arc<IchorUser>>, AdmissionError> {
        self.0.cached_users(namespace)
    }

    async fn read_user(&self, namespace: &str, name: &str) -> Result<Option<IchorUser>, AdmissionError> {
        tokio::time::sleep(SLOW).await;
        self.0.read_user(namespace, name).await
    }

    async fn fresh_requester(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<IchorUser>, AdmissionError> {
        tokio::time::sleep(SLOW).await;
        self.0.fresh_requester(namespace, name).await
    }

    async fn read_credentials(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ichor_renderers::auth::credentials::CredentialsEntry>, AdmissionError> {
        tokio::time::sleep(SLOW).await;
        self.0.read_credentials(namespace, name).await
    }
}

#[tokio::test]
async fn two_slow_reads_in_one_review_end_in_the_webhooks_refusal_before_its_timeout() {
    let lister = SlowLister(FakeLister::with(&[("root", &["admin"], false)]));
    let state = AdmissionState::new(
        Arc::new(FakeReviewer::default()),
        Arc::new(lister),
        controller_identity(NAMESPACE),
    );
    // A re-enable: the requester read fresh, then the user's credentials entry.
    let (new, old) = (
        user("napper", &["viewer"], false),
        user("napper", &["viewer"], true),
    );
    let request = fixtures::request(users::KIND, "UPDATE", &OPERATOR, new, old).unwrap();
    let started = Instant::now();
    let verdict = outcome(users::review(&state, &request).await);
    let took = started.elapsed();
    assert!(took < Duration::from_millis(4900), "took {took:?}");
    assert!(took >= Duration::from_millis(4500), "took {took:?}");
    let refusal = verdict.unwrap_err();
    assert!(refusal.starts_with("spec.disabled: "), "{refusal}");
    assert!(
        refusal.contains("credentials entry of user \"napper\""),
        "{refusal}"
    );
    assert!(refusal.contains("4.5s"), "{refusal}");
}
