//! Disable and role change, seen through kubectl on a real apiserver with one-minute ID tokens:
//! a disabled user's next refresh is refused, so kubectl fails once the ID token it holds
//! expires; a role change reaches kubectl at the next refresh. Both are made the GitOps way
//! (the `IchorUser` files `ichor dev` watches) at the same instant; the seconds from the change
//! to each effect are printed.

use std::time::{Duration, Instant};

use crate::apiserver::site::Site;

/// Rewrites `<manifests>/<name>.yaml` with `edit`.
fn edit_user(site: &Site, name: &str, edit: impl Fn(&str) -> String) {
    let file = site.dev.manifests.join(format!("{name}.yaml"));
    let yaml = std::fs::read_to_string(&file).unwrap();
    let edited = edit(&yaml);
    assert_ne!(yaml, edited, "{name}: the edit changed nothing in {yaml}");
    std::fs::write(&file, edited).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane: hack/kube/build.sh"]
async fn a_disabled_user_loses_kubectl_and_a_role_change_reaches_it_at_the_next_refresh() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(site) = Site::start("", &["--token-ttl", "1m"]).await else {
        return;
    };
    let alice = site.person("alice", &["viewer"], "alice's own password").await;
    let bob = site.person("bob", &["viewer"], "bob's own password!").await;
    for t in [&alice, &bob] {
        let (_, groups) = t.whoami(&site).await;
        assert!(groups.contains(&"ichor:viewer".to_owned()), "{groups:?}");
    }

    edit_user(&site, "alice", |y| {
        if y.contains("disabled: false") {
            y.replace("disabled: false", "disabled: true")
        } else {
            y.replace("spec:\n", "spec:\n  disabled: true\n")
        }
    });
    edit_user(&site, "bob", |y| y.replace("- viewer", "- operator"));
    let changed = Instant::now();

    let (mut alice_out, mut bob_in) = (None, None);
    while alice_out.is_none() || bob_in.is_none() {
        assert!(
            changed.elapsed() < Duration::from_secs(180),
            "3 minutes after the change: alice refused {alice_out:?}, bob operator {bob_in:?}"
        );
        if alice_out.is_none() {
            let out = alice.kubectl(&site, &["auth", "whoami", "-o", "json"]).await;
            if !out.status.success() {
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(stderr.contains("getting credentials: exec"), "{stderr}");
                assert!(stderr.contains("the user is disabled"), "{stderr}");
                eprintln!("alice after {:?}: {stderr}", changed.elapsed());
                alice_out = Some(changed.elapsed());
            }
        }
        if bob_in.is_none() {
            let (_, groups) = bob.whoami(&site).await;
            if groups.contains(&"ichor:operator".to_owned()) {
                assert!(!groups.contains(&"ichor:viewer".to_owned()), "{groups:?}");
                bob_in = Some(changed.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let (alice_out, bob_in) = (alice_out.unwrap(), bob_in.unwrap());
    eprintln!(
        "disable -> kubectl refused after {alice_out:?}; role change -> kubectl groups after {bob_in:?}"
    );
    // Neither may outlive one ID token and a refresh margin.
    assert!(alice_out < Duration::from_secs(75), "{alice_out:?}");
    assert!(bob_in < Duration::from_secs(75), "{bob_in:?}");
    // Bob's new role is authorized at once.
    assert!(
        bob.can_i(&site, "create", "talosoperations.ichor.maesh.dev")
            .await
    );
}
