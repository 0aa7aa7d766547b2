//! What the seed's hardware run found, on a real apiserver:
//!
//! - A signing-key rotation by the controller's own timeline is accepted with no apiserver
//!   restart. The timeline is the one `ichor dev` runs (`LocalController`, the same code and
//!   state directory), ticked at two past instants before the issuer starts: the first key 30
//!   days and 9.5 minutes ago, the rotation 30 days later, so that the successor — published 10
//!   minutes before it signs — starts signing half a minute into the test.
//! - The issuer stopped: tokens already issued keep working until they expire (the apiserver
//!   holds the keys), no new one can be had, client-certificate access and `/readyz` are
//!   unaffected.
//! - The apiserver restarted while the issuer is down: Ichor tokens are refused until the
//!   issuer is back, then accepted without another restart.

use std::path::Path;
use std::time::{Duration, Instant};

use ichor_cli::commands::dev::{Layout, prepare};
use ichor_cli::local::{CredentialsRemover, LocalController, LocalPaths};
use ichor_controller_core::identity::effects::RemoveCredentialsKeyRequest;
use ichor_controller_core::perform::OsKeyMaterial;
use ichor_renderers::trust::{KEYS_JSON, SIGNING_SECRET};
use jiff::{SignedDuration, Timestamp};

use crate::apiserver::site::{ADMIN_PASSWORD, RESTART_TIMEOUT, Site};

/// Nothing to remove before the issuer ever ran.
struct NoCredentials;

impl CredentialsRemover for NoCredentials {
    fn remove(&mut self, _: &RemoveCredentialsKeyRequest) -> Result<(), String> {
        Ok(())
    }
}

/// Runs the key timeline of `ichor dev`'s controller at `now - 30 d - 9.5 min` and `now - 9.5 min`.
fn age_the_keys(root: &Path) {
    let layout = Layout::new(root);
    prepare(&layout).unwrap();
    let mut controller = LocalController::new(
        LocalPaths {
            manifests: layout.manifests.clone(),
            secrets: layout.secrets.clone(),
            credentials: layout.issuer.join("credentials.json"),
        },
        Box::new(OsKeyMaterial),
        Box::new(NoCredentials),
    )
    .unwrap();
    let rotated = Timestamp::now() - SignedDuration::from_secs(9 * 60 + 30);
    let first = rotated - SignedDuration::from_hours(30 * 24);
    for at in [first, rotated] {
        let report = controller.tick(at);
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
}

/// `(kid, activeFrom)` of every RSA key of the issuer's keys.json, oldest first.
fn rsa_keys(site: &Site) -> Vec<(String, Timestamp)> {
    let path = site
        .dev
        .ca_file
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join(SIGNING_SECRET)
        .join(KEYS_JSON);
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut keys: Vec<(String, Timestamp)> = doc["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["kid"].as_str().unwrap().to_owned(),
                k["activeFrom"].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect();
    keys.sort_by_key(|(_, at)| *at);
    keys
}

fn kid(token: &str) -> String {
    use base64::Engine as _;
    let header = token.split('.').next().unwrap();
    let header: serde_json::Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(header)
            .unwrap(),
    )
    .unwrap();
    header["kid"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane: hack/kube/build.sh"]
async fn a_key_rotation_and_an_issuer_outage_on_a_real_apiserver() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(mut site) = Site::start_seeded("", &[], age_the_keys).await else {
        return;
    };
    let keys = rsa_keys(&site);
    assert_eq!(keys.len(), 2, "the timeline rotated once: {keys:?}");
    let (old, new) = (&keys[0], &keys[1]);
    let pid = site.plane.pid(0);

    let before = site.kube_token("admin", ADMIN_PASSWORD).await.unwrap();
    assert_eq!(
        &kid(&before),
        &old.0,
        "the old key signs until its successor is active"
    );
    assert_eq!(site.plane.whoami_with_token(0, &before).unwrap().0, "ichor:admin");

    // The successor starts signing by the timeline; the apiserver accepts it as it is.
    let wait = new.1.duration_since(Timestamp::now()).as_secs_f64().max(0.0) + 1.0;
    assert!(wait < 120.0, "the successor signs in {wait} s");
    tokio::time::sleep(Duration::from_secs_f64(wait)).await;
    let after = site.kube_token("admin", ADMIN_PASSWORD).await.unwrap();
    assert_eq!(&kid(&after), &new.0, "the successor signs from its activeFrom");
    assert_eq!(site.plane.whoami_with_token(0, &after).unwrap().0, "ichor:admin");
    assert_eq!(
        site.plane.whoami_with_token(0, &before).unwrap().0,
        "ichor:admin",
        "the old key's tokens stay valid"
    );
    assert_eq!(site.plane.pid(0), pid, "no apiserver restart");
    eprintln!("rotation from {} to {} accepted without a restart", old.0, new.0);

    // The issuer stops: what was issued keeps working, nothing new can be had.
    let issued = site.kube_token("admin", ADMIN_PASSWORD).await.unwrap();
    site.stop_issuer();
    assert_eq!(site.plane.whoami_with_token(0, &issued).unwrap().0, "ichor:admin");
    assert!(
        site.kube_token("admin", ADMIN_PASSWORD).await.is_err(),
        "a token from a stopped issuer"
    );
    assert_eq!(site.plane.readyz(0).unwrap().status, 200);
    let admin = site
        .plane
        .kubectl_run(
            &["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"],
            None,
        )
        .unwrap();
    assert_eq!(
        admin,
        ichor_testkit::control_plane::ADMIN_USER,
        "client certificates are unaffected"
    );

    // The apiserver restarts while the issuer is down: it serves, but cannot trust Ichor yet.
    let took = site.plane.restart_apiserver(0, None, RESTART_TIMEOUT).unwrap();
    eprintln!("apiserver restarted with the issuer down in {took:?}");
    assert_eq!(site.plane.readyz(0).unwrap().status, 200);
    let refused = site.plane.whoami_with_token(0, &issued).unwrap_err().to_string();
    assert!(refused.contains("Unauthorized"), "{refused}");
    let restarted_pid = site.plane.pid(0);

    // The issuer is back: the apiserver finds it on its own.
    site.start_issuer();
    let back = Instant::now();
    loop {
        if site.plane.whoami_with_token(0, &issued).is_ok() {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(90),
            "Ichor tokens are still refused 90 s after the issuer is back"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!(
        "Ichor tokens accepted again {:?} after the issuer came back",
        back.elapsed()
    );
    assert_eq!(site.plane.pid(0), restarted_pid, "without another restart");
}
