//! Nothing is stored before authentication: an `ichor-issuer --store kube` process, as the chart
//! runs it, walks the browser's path up to a failed sign-in — the authorization request of a
//! registered client, the sign-in page, a wrong password for an existing user and a password for
//! a user that does not exist — and writes nothing anywhere: the apiserver's audit log shows the
//! issuer's ServiceAccount making reads only (and reading the credentials Secret for each
//! sign-in, so the window did see its requests), the process's own empty home, temporary and
//! working directories stay empty, its mounted files are unchanged, and no answer sets a cookie.
//! A successful sign-in afterwards is the control: its refresh family is a write the same audit
//! log does show.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use ichor_renderers::auth::credentials::CREDENTIALS_SECRET_NAME;
use ichor_testkit::control_plane::{AuditEvent, ControlPlane};
use ichor_testkit::install::{self, ISSUER_SERVICE_ACCOUNT};
use ichor_testkit::issuer::sign_in::Authorize;

use super::{cluster, password_entry, runtime};
use crate::conformance_common::{Options as IssuerOptions, RunningIssuer, Store};

/// What the sign-in page says to an unknown user and to a wrong password alike.
const WRONG_CREDENTIALS: &str = "The user name or password is incorrect.";

/// Every file and directory under `root`: its path relative to `root`, its length and its
/// modification time.
fn tree(root: &Path) -> BTreeMap<PathBuf, (u64, Option<SystemTime>)> {
    let mut out = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                pending.push(entry.path());
            }
            let relative = entry.path().strip_prefix(root).unwrap().to_path_buf();
            out.insert(relative, (meta.len(), meta.modified().ok()));
        }
    }
    out
}

/// The audit IDs of every request so far.
fn audit_ids(plane: &ControlPlane) -> anyhow::Result<BTreeSet<String>> {
    Ok(plane.audit_events()?.into_iter().map(|e| e.audit_id).collect())
}

/// The completed requests of the issuer's ServiceAccount whose audit ID is not in `before`.
fn issuer_requests_since(plane: &ControlPlane, before: &BTreeSet<String>) -> anyhow::Result<Vec<AuditEvent>> {
    let issuer = install::service_account_user(ISSUER_SERVICE_ACCOUNT);
    Ok(plane
        .audit_events()?
        .into_iter()
        .filter(|e| e.stage == "ResponseComplete" && e.user.username == issuer)
        .filter(|e| !before.contains(&e.audit_id))
        .collect())
}

fn is_read(e: &AuditEvent) -> bool {
    matches!(e.verb.as_str(), "get" | "list" | "watch")
}

fn reads_credentials(e: &AuditEvent) -> bool {
    e.verb == "get"
        && e.object_ref
            .as_ref()
            .is_some_and(|o| o.resource == "secrets" && o.name == CREDENTIALS_SECRET_NAME)
}

/// The `Set-Cookie` headers of an answer.
fn cookies(response: &reqwest::Response) -> Vec<String> {
    response
        .headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect()
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn nothing_is_stored_before_authentication() -> anyhow::Result<()> {
    let entry = password_entry();
    let Some(plane) = cluster(&[("alice", "admin")], &[("alice", &entry)])? else {
        return Ok(());
    };
    // The migration phase an installation's legacy Secret carries once any issuer read it (the
    // first read gives a Secret without one the phase `legacy`, a write of its metadata).
    let phase = serde_json::json!({"metadata": {"annotations": {
        ichor_renderers::contract::CREDENTIALS_LAYOUT_ANNOTATION: ichor_renderers::contract::LAYOUT_LEGACY}}});
    let args = install::merge_patch_args("secret", CREDENTIALS_SECRET_NAME, &phase, false);
    plane.kubectl_run(&args.iter().map(String::as_str).collect::<Vec<_>>(), None)?;

    // The process's home, temporary and working directories: fresh, empty, and watched; the
    // XDG directories point at paths that do not exist, so creating one shows in `scratch`.
    let scratch = tempfile::tempdir()?;
    let (home, tmp, cwd) = (
        scratch.path().join("home"),
        scratch.path().join("tmp"),
        scratch.path().join("cwd"),
    );
    for dir in [&home, &tmp, &cwd] {
        std::fs::create_dir(dir)?;
    }
    let path = |p: &Path| p.display().to_string();
    let options = IssuerOptions {
        store: Store::Kube {
            kubeconfig: install::component_kubeconfig(&plane, 0, ISSUER_SERVICE_ACCOUNT)?,
            ca_file: plane.ca_file(),
        },
        env: vec![
            ("HOME", path(&home)),
            ("TMPDIR", path(&tmp)),
            ("XDG_CACHE_HOME", path(&scratch.path().join("xdg-cache"))),
            ("XDG_CONFIG_HOME", path(&scratch.path().join("xdg-config"))),
            ("XDG_DATA_HOME", path(&scratch.path().join("xdg-data"))),
            ("XDG_STATE_HOME", path(&scratch.path().join("xdg-state"))),
            ("XDG_RUNTIME_DIR", path(&scratch.path().join("xdg-runtime"))),
        ],
        cwd: Some(cwd.clone()),
        ..IssuerOptions::default()
    };

    let runtime = runtime(1)?;
    runtime.block_on(async {
        let issuer = RunningIssuer::start(options).await;
        let mounted_before = tree(issuer.dir.path());
        let before = audit_ids(&plane)?;
        let http = &issuer.client;

        // The authorization request of the registered client `ichor-cli`, as a browser opens it.
        let request = Authorize::cli("nothing-stored-verifier-0123456789-abcdefghijklmnopqrstuvwxyz");
        let authorize = http.get(request.url(&issuer.url)).send().await?;
        assert!(
            authorize.status().is_redirection(),
            "authorize: {}",
            authorize.status()
        );
        assert_eq!(
            cookies(&authorize),
            Vec::<String>::new(),
            "authorize set a cookie"
        );
        let location = authorize
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert!(location.starts_with("/oidc/login?ticket="), "{location}");
        let ticket =
            ichor_testkit::issuer::sign_in::query_param(&format!("{}{location}", issuer.url), "ticket")
                .expect("a ticket");

        // The sign-in page.
        let page = http.get(format!("{}{location}", issuer.url)).send().await?;
        assert_eq!(page.status(), 200);
        assert_eq!(
            cookies(&page),
            Vec::<String>::new(),
            "the sign-in page set a cookie"
        );
        let html = page.text().await?;
        assert!(html.contains("name=\"password\""), "{html}");

        // A wrong password for alice, then a password for a user nobody created, as the form
        // posts them.
        for (user, password) in [("alice", "not alice's password"), ("mallory", "any password")] {
            let refused = http
                .post(format!("{}/oidc/login", issuer.url))
                .form(&[
                    ("ticket", ticket.as_str()),
                    ("username", user),
                    ("password", password),
                ])
                .send()
                .await?;
            assert_eq!(refused.status(), 401, "{user}");
            assert_eq!(
                cookies(&refused),
                Vec::<String>::new(),
                "a refused sign-in of {user} set a cookie"
            );
            let body = refused.text().await?;
            assert!(body.contains(WRONG_CREDENTIALS), "{user}: {body}");
        }

        // The apiserver: reads only, and the credentials Secret read for each of the two
        // sign-ins (the window holds the issuer's requests of the sequence).
        let during = issuer_requests_since(&plane, &before)?;
        let writes: Vec<String> = during
            .iter()
            .filter(|e| !is_read(e))
            .map(AuditEvent::describe)
            .collect();
        assert_eq!(
            writes,
            Vec::<String>::new(),
            "requests of the issuer that are not reads"
        );
        let credential_reads = during.iter().filter(|e| reads_credentials(e)).count();
        assert!(
            credential_reads >= 2,
            "{credential_reads} reads of the credentials Secret in: {:#?}",
            during.iter().map(AuditEvent::describe).collect::<Vec<_>>()
        );

        // The files: the process's own directories are as empty as they were made, and what it
        // mounts is unchanged.
        assert_eq!(
            tree(scratch.path()).into_keys().collect::<Vec<_>>(),
            [PathBuf::from("cwd"), PathBuf::from("home"), PathBuf::from("tmp")],
            "the issuer created something in its home, temporary, working or XDG directories"
        );
        assert_eq!(
            tree(issuer.dir.path()),
            mounted_before,
            "the issuer changed its mounted files"
        );

        // The control: a sign-in that succeeds stores its refresh family, and the audit log shows
        // that write.
        let ended = audit_ids(&plane)?;
        issuer.cli_sign_in(None).await;
        let after = issuer_requests_since(&plane, &ended)?;
        let stored: Vec<String> = after
            .iter()
            .filter(|e| !is_read(e))
            .map(AuditEvent::describe)
            .collect();
        assert!(
            stored.iter().any(|w| w.starts_with("patch secrets ")),
            "a successful sign-in wrote no Secret: {stored:?}"
        );
        anyhow::Ok(())
    })?;
    Ok(())
}
