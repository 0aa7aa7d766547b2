//! kube-apiserver 1.30+ re-reads its `--authentication-config` file when it changes, without a
//! restart: a changed valid file takes effect (here: Ichor's issuer removed, then trusted again),
//! and a changed invalid file is refused and leaves the previous configuration serving. The
//! same process (same PID) serves throughout; the reloads are counted in its metrics.

use std::time::{Duration, Instant};

use crate::apiserver::site::{ADMIN_PASSWORD, Site};

const RELOADS: &str = "apiserver_authentication_config_controller_automatic_reloads_total";
const INVALID: &str = "apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: http://ichor.invalid
    audiences: [ichor-kube]
  claimMappings:
    username:
      claim: sub
      prefix: 'ichor:'
";

/// Waits until the reload counter with `status` passes `before`; how long it took.
async fn reloaded(site: &Site, status: &str, before: f64) -> Duration {
    let started = Instant::now();
    let label = format!("status=\"{status}\"");
    loop {
        if site.plane.metric(0, RELOADS, &label).unwrap() > before {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(150),
            "no {status} reload within 150 s; the log ends:\n{}",
            site.plane.log(0)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The status of `GET /api` with a fresh Ichor token (fresh, so the apiserver's 10-second
/// cache of successful authentications cannot answer: two ID tokens of one user signed within
/// the same second are the same bytes, so it waits for the next second first).
async fn api_status(site: &Site) -> u16 {
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let token = site.kube_token("admin", ADMIN_PASSWORD).await.unwrap();
    site.plane.get_with_token(0, "/api", Some(&token)).unwrap().status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane: hack/kube/build.sh"]
async fn a_running_apiserver_applies_a_valid_file_and_keeps_the_last_good_one_over_an_invalid_file() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(site) = Site::start("", &[]).await else {
        return;
    };
    let pid = site.plane.pid(0);
    let rendered = site.authentication_config("");
    // The same file without its authenticators (its `anonymous` block unchanged: a reload may
    // not change it).
    let mut without_issuers: serde_yaml::Value = serde_yaml::from_str(&rendered).unwrap();
    without_issuers["jwt"] = serde_yaml::Value::Sequence(vec![]);
    let without_issuers = serde_yaml::to_string(&without_issuers).unwrap();
    assert_eq!(api_status(&site).await, 200);
    let success = |s: &Site| s.plane.metric(0, RELOADS, "status=\"success\"").unwrap();
    let failure = |s: &Site| s.plane.metric(0, RELOADS, "status=\"failure\"").unwrap();

    // An invalid file: refused, counted, logged; the rendered configuration keeps serving.
    let before = failure(&site);
    site.plane.write_authentication_config(0, INVALID).unwrap();
    let took = reloaded(&site, "failure", before).await;
    eprintln!("invalid file refused {took:?} after the write");
    assert!(
        site.plane
            .log(0)
            .contains("failed to validate authentication config")
    );
    assert!(site.plane.log(0).contains("URL scheme must be https"));
    // Changing `anonymous` is refused on reload too.
    let before = failure(&site);
    site.plane
        .write_authentication_config(0, ichor_testkit::control_plane::EMPTY_AUTHENTICATION_CONFIG)
        .unwrap();
    reloaded(&site, "failure", before).await;
    assert!(
        site.plane
            .log_unquoted(0)
            .contains("anonymous: Forbidden: changed from initial configuration file")
    );
    assert_eq!(
        api_status(&site).await,
        200,
        "the last good configuration serves on"
    );
    assert_eq!(
        api_status(&site).await,
        200,
        "the last good configuration serves on"
    );
    assert_eq!(site.plane.readyz(0).unwrap().status, 200);

    // A valid file without Ichor's issuer takes effect without a restart.
    let before = success(&site);
    site.plane
        .write_authentication_config(0, &without_issuers)
        .unwrap();
    let took = reloaded(&site, "success", before).await;
    eprintln!("valid file (no issuer) applied {took:?} after the write");
    assert_eq!(
        api_status(&site).await,
        401,
        "Ichor's tokens are refused once it is removed"
    );

    // The rendered file again: trusted again, still the same process.
    let before = success(&site);
    site.plane.write_authentication_config(0, &rendered).unwrap();
    let took = reloaded(&site, "success", before).await;
    eprintln!("valid file (Ichor's issuer) applied {took:?} after the write");
    let started = Instant::now();
    while api_status(&site).await != 200 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "Ichor's tokens are not accepted again"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(site.plane.pid(0), pid, "no restart happened");
}
