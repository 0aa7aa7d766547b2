//! The control plane of the test kit, on its own: two kube-apiservers sharing one etcd, the
//! client-certificate admin on both, RBAC in force for everybody else, one apiserver stopped
//! and restarted while the other serves, a refused authentication file that stops a start, and
//! every process gone after the drop. Prints the start time and the resident sets.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr, missing_docs)]

use std::time::{Duration, Instant};

use ichor_testkit::control_plane::{ADMIN_USER, ControlPlane, Options};

fn pid_alive(pid: &str) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn two_apiservers_share_etcd_restart_one_at_a_time_and_stop_on_drop() {
    let Some(mut plane) = ControlPlane::start(Options {
        apiservers: 2,
        ..Options::default()
    })
    .unwrap() else {
        return;
    };
    let (rss0, rss_etcd) = plane.rss_kib(0);
    let (rss1, _) = plane.rss_kib(1);
    eprintln!(
        "control plane (etcd + 2 kube-apiservers) ready in {:?}; RSS: apiserver 0 {} MiB, apiserver 1 {} MiB, etcd {} MiB",
        plane.started_in(),
        rss0 / 1024,
        rss1 / 1024,
        rss_etcd / 1024
    );

    // The admin is who the certificate says, on both; an object written through one is read
    // through the other (one etcd).
    let whoami = plane
        .kubectl_run(
            &["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"],
            None,
        )
        .unwrap();
    assert_eq!(whoami, ADMIN_USER);
    plane
        .apply("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  namespace: default\ndata:\n  k: v\n")
        .unwrap();
    let other = std::env::temp_dir().join(format!("ichor-admin-1-{}.kubeconfig", std::process::id()));
    std::fs::write(&other, plane.kubeconfig_yaml(1)).unwrap();
    let read = plane
        .kubectl_run(
            &[
                &format!("--kubeconfig={}", other.display()),
                "get",
                "configmap",
                "shared",
                "-o",
                "jsonpath={.data.k}",
            ],
            None,
        )
        .unwrap();
    assert_eq!(read, "v");

    // RBAC: anonymous may read /readyz and nothing else.
    assert_eq!(plane.readyz(1).unwrap().status, 200);
    assert_eq!(
        plane
            .get_with_token(1, "/api/v1/namespaces", None)
            .unwrap()
            .status,
        403
    );
    assert_eq!(plane.get_as_admin(1, "/api/v1/namespaces").unwrap().status, 200);

    // Apiserver 0 restarts while 1 serves.
    let started = Instant::now();
    plane.stop_apiserver(0).unwrap();
    assert!(plane.readyz(0).is_err(), "a stopped apiserver still answers");
    assert_eq!(
        plane
            .get_as_admin(1, "/api/v1/namespaces/default/configmaps/shared")
            .unwrap()
            .status,
        200
    );
    let up = plane.start_apiserver(0, Duration::from_secs(120)).unwrap();
    eprintln!(
        "apiserver 0 back after {up:?} ({:?} including the stop)",
        started.elapsed()
    );
    assert_eq!(
        plane
            .get_as_admin(0, "/api/v1/namespaces/default/configmaps/shared")
            .unwrap()
            .status,
        200
    );

    // A refused authentication file: the apiserver exits at start-up and says why.
    plane.stop_apiserver(1).unwrap();
    plane
        .write_authentication_config(
            1,
            "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt:\n- issuer:\n    url: http://not-https.example\n    audiences: [a]\n  claimMappings:\n    username:\n      claim: sub\n      prefix: \"\"\n",
        )
        .unwrap();
    plane.spawn_apiserver_unready(1).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = plane.apiserver_exited(1) {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the apiserver started with an invalid file"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(!status.success());
    assert!(
        plane.log_unquoted(1).contains(
            "jwt[0].issuer.url: Invalid value: \"http://not-https.example\": URL scheme must be https"
        ),
        "{}",
        plane.log(1)
    );

    let pids: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|p| p.chars().all(|c| c.is_ascii_digit()))
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.contains(&plane.dir().display().to_string()))
        })
        .collect();
    assert!(!pids.is_empty(), "the control plane's processes are visible");
    drop(plane);
    std::thread::sleep(Duration::from_millis(200));
    for pid in pids {
        assert!(!pid_alive(&pid), "process {pid} outlived the control plane");
    }
    let _ = std::fs::remove_file(other);
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn with_distinct_loopback_addresses_three_apiservers_answer_readyz_on_127_0_0_1_2_3_at_one_port() {
    let Some(mut plane) = ControlPlane::start(Options {
        apiservers: 3,
        distinct_loopback_addresses: true,
        ..Options::default()
    })
    .unwrap() else {
        return;
    };
    eprintln!(
        "3 apiservers on distinct addresses ready in {:?}",
        plane.started_in()
    );
    let port = plane.port(0);
    for i in 0..3 {
        assert_eq!(plane.port(i), port, "one secure port for all");
        let address = format!("127.0.0.{}", i + 1);
        assert_eq!(plane.address(i).to_string(), address);
        assert_eq!(plane.url(i), format!("https://{address}:{port}"));
        // Verified against the control plane's CA for that IP address.
        let readyz = plane.readyz(i).unwrap();
        assert_eq!(
            (readyz.status, readyz.body.as_str()),
            (200, "ok"),
            "apiserver {i}"
        );
    }

    // Three processes, one per address: stopping the second silences 127.0.0.2 only.
    plane.stop_apiserver(1).unwrap();
    assert!(
        std::net::TcpStream::connect(("127.0.0.2", port)).is_err(),
        "127.0.0.2 still answers"
    );
    assert_eq!(plane.readyz(0).unwrap().status, 200);
    assert_eq!(plane.readyz(2).unwrap().status, 200);
    plane.start_apiserver(1, Duration::from_secs(120)).unwrap();
    assert_eq!(plane.readyz(1).unwrap().status, 200);

    // kubectl against each address verifies its serving certificate too.
    for i in 0..3 {
        let server = format!("--server={}", plane.url(i));
        let who = plane
            .kubectl_run(
                &[
                    &server,
                    "auth",
                    "whoami",
                    "-o",
                    "jsonpath={.status.userInfo.username}",
                ],
                None,
            )
            .unwrap();
        assert_eq!(who, ADMIN_USER, "apiserver {i}");
    }
}
