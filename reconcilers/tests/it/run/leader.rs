//! Leader election against a scripted API server, and when a Lease may be taken.

use super::*;

// ─── leader election against a scripted API server ───────────────────────────────────────────

type Script = Arc<Mutex<VecDeque<(String, u16, Value)>>>;

/// A kube client whose requests are answered in order from `script`: each entry names the
/// expected `METHOD path` and the answer. The requests are recorded with their bodies.
fn scripted(script: Script, seen: Arc<Mutex<Vec<(String, Value)>>>) -> kube::Client {
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let script = script.clone();
        let seen = seen.clone();
        async move {
            let line = format!("{} {}", req.method(), req.uri().path());
            let body = req.into_body().collect_bytes().await.unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            seen.lock().unwrap().push((line.clone(), body));
            let (expected, status, answer) = script.lock().unwrap().pop_front().expect("a scripted answer");
            assert_eq!(line, expected);
            let response = http::Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(serde_json::to_vec(&answer).unwrap()))
                .unwrap();
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    kube::Client::new(service, NAMESPACE)
}

const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/ichor-system/leases/ichor-controller";

fn lease(holder: &str, rv: &str, transitions: i32) -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "ichor-controller", "namespace": "ichor-system", "resourceVersion": rv},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
            "renewTime": "2027-03-01T12:00:00.000000Z", "leaseTransitions": transitions}})
}

fn elector(script: Script, seen: Arc<Mutex<Vec<(String, Value)>>>) -> Elector {
    Elector::new(
        scripted(script, seen),
        LeaseConfig::new(NAMESPACE, "ichor-controller", "pod-a"),
    )
}

#[tokio::test]
async fn a_lost_race_for_the_lease_is_a_standby_not_an_error() {
    let script: Script = Arc::new(Mutex::new(VecDeque::from([
        (format!("GET {LEASE}"), 200, lease("", "5", 0)),
        (format!("PUT {LEASE}"), 409, status(409, "Conflict")),
        (format!("GET {LEASE}"), 200, lease("pod-a", "7", 1)),
        (format!("PUT {LEASE}"), 200, lease("pod-a", "8", 1)),
    ])));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut e = elector(script.clone(), seen.clone());
    assert!(!e.step(Instant::now(), now()).await.unwrap());
    assert!(e.step(Instant::now(), now()).await.unwrap(), "own lease renewed");
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen[3].1["spec"]["leaseTransitions"],
        json!(1),
        "a renewal is no transition"
    );
}

#[tokio::test]
async fn an_unreachable_api_server_is_an_error_and_leadership_lapses_at_its_deadline() {
    let script: Script = Arc::new(Mutex::new(VecDeque::from([(
        format!("GET {LEASE}"),
        500,
        status(500, "InternalError"),
    )])));
    let mut e = elector(script, Arc::new(Mutex::new(Vec::new())));
    assert!(e.step(Instant::now(), now()).await.is_err());

    let flag = LeaderFlag::elected();
    let t0 = Instant::now();
    flag.lead_until(t0 + Duration::from_secs(10));
    assert!(flag.is_leader_at(t0 + Duration::from_secs(9)));
    assert!(!flag.is_leader_at(t0 + Duration::from_secs(10)));
    flag.stop();
    assert!(!flag.is_leader_at(t0));
    assert!(LeaderFlag::always().is_leader());
}

#[test]
fn the_lease_may_be_taken_when_free_own_or_stale() {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    let held = LeaseSpec {
        holder_identity: Some("pod-b".into()),
        lease_duration_seconds: Some(15),
        ..LeaseSpec::default()
    };
    let d = Duration::from_secs(30);
    assert!(may_take(None, "pod-a", Duration::ZERO, d));
    assert!(!may_take(Some(&held), "pod-a", Duration::from_secs(14), d));
    assert!(may_take(Some(&held), "pod-a", Duration::from_secs(15), d));
    assert!(may_take(Some(&held), "pod-b", Duration::ZERO, d));
    let free = LeaseSpec {
        holder_identity: Some(String::new()),
        ..held
    };
    assert!(may_take(Some(&free), "pod-a", Duration::ZERO, d));
}
