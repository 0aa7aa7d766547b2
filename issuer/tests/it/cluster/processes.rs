//! Two `ichor-issuer --store kube` processes as the chart runs them: authenticated as the
//! issuer's ServiceAccount, the mounted Secrets as files, one external URL.

use ichor_testkit::install::{self, ISSUER_SERVICE_ACCOUNT};
use serde_json::{Value, json};

use ichor_renderers::auth::credentials::CredentialsEntry;
use ichor_testkit::control_plane::ControlPlane;

use super::{cluster, own_entry, password_entry, per_user_cluster, refresh_of, roles, runtime, stored_entry};
use crate::common::claims;
use crate::conformance_common;

/// The `IchorInstallation` `ichor` with `spec.users.tokenTTL` = `ttl`.
fn installation(ttl: &str) -> String {
    json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorInstallation",
        "metadata": {"name": "ichor"}, "spec": {"users": {"tokenTTL": ttl}}})
    .to_string()
}

/// [`installation`] also requiring a second factor of operators (`spec.users.secondFactor`).
fn installation_requiring_operators_factor(ttl: &str) -> String {
    json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorInstallation",
        "metadata": {"name": "ichor"}, "spec": {"users": {"tokenTTL": ttl,
        "secondFactor": {"roles": {"operator": "required"}}}}})
    .to_string()
}

/// The lifetime of an ID token (`exp - iat`, seconds).
fn lifetime(token_response: &Value) -> i64 {
    let c = claims(token_response["id_token"].as_str().expect("id_token"));
    c["exp"].as_i64().expect("exp") - c["iat"].as_i64().expect("iat")
}

/// Two `ichor-issuer --store kube` processes, as the chart runs them: authenticated as the
/// issuer's ServiceAccount, the mounted Secrets as files, one external URL. Sign-ins and
/// refreshes across them, the token lifetime and the second-factor policy from the cluster's
/// `IchorInstallation` (followed when it changes), the `UserService` over gRPC (answers decided by real SubjectAccessReviews,
/// writes as the caller), `RevokeSessions` and a password change; and the chart's issuer RBAC
/// is exactly what the processes use.
#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn two_issuer_processes_on_the_kube_store_serve_sign_ins_sessions_and_the_user_service_under_the_chart_rbac()
-> anyhow::Result<()> {
    let entry = password_entry();
    let users = [("alice", "admin"), ("carol", "operator")];
    let entries = [("alice", &entry), ("carol", &entry)];
    // An installation made before the per-user layout (the one legacy Secret), then a fresh one
    // (one Secret per user): the chart's grants serve both, and each is used by one of them.
    let Some(legacy) = cluster(&users, &entries)? else {
        return Ok(());
    };
    scenario(&legacy, stored_entry)?;
    let legacy_usage = install::chart_rbac_usage(&legacy, ISSUER_SERVICE_ACCOUNT)?;
    drop(legacy);
    let Some(fresh) = per_user_cluster(&users, &entries)? else {
        return Ok(());
    };
    scenario(&fresh, own_entry)?;
    let fresh_usage = install::chart_rbac_usage(&fresh, ISSUER_SERVICE_ACCOUNT)?;

    // Every request the processes made is granted by the chart's issuer roles, and every rule
    // of those roles was used by one layout or the other.
    eprintln!("issuer requests, legacy layout: {:#?}", legacy_usage.requests);
    eprintln!("issuer requests, per-user layout: {:#?}", fresh_usage.requests);
    let usage = legacy_usage.and(fresh_usage);
    usage.check_granted("the issuer")?;
    usage.check_all_used("the issuer", &[])?;
    Ok(())
}

/// The processes' scenario on `plane`; `stored` reads a user's entry where the layout keeps it.
fn scenario(
    plane: &ControlPlane,
    stored: fn(&ControlPlane, &str) -> anyhow::Result<Option<CredentialsEntry>>,
) -> anyhow::Result<()> {
    use conformance_common::{Options as IssuerOptions, PASSWORD, RunningIssuer, Store};
    use ichor_issuer::api::proto::{
        ChangeOwnPasswordRequest, CreateUserRequest, DeleteUserRequest, ListUsersRequest,
        RevokeSessionsRequest, UpdateUserRequest, create_user_request::InitialPassword,
    };
    plane.apply(&installation("2m"))?;

    let options = IssuerOptions {
        store: Store::Kube {
            kubeconfig: install::component_kubeconfig(plane, 0, ISSUER_SERVICE_ACCOUNT)?,
            ca_file: plane.ca_file(),
        },
        ..IssuerOptions::default()
    };
    let runtime = runtime(2)?;
    runtime.block_on(async {
        let a = RunningIssuer::start(options.clone()).await;
        let b = a.replica(&options).await;

        // The installation's 2m, not the flag's 5m.
        let alice = a.cli_sign_in(Some("ichor-ui")).await;
        assert_eq!(lifetime(&alice), 120, "the token TTL of the IchorInstallation");
        let rotated = b.refresh(&refresh_of(&alice)).await;
        assert_eq!(lifetime(&rotated), 120);
        plane.apply(&installation("3m"))?;
        let mut token = refresh_of(&rotated);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let next = a.refresh(&token).await;
            token = refresh_of(&next);
            if lifetime(&next) == 180 {
                break;
            }
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "the IchorInstallation's new tokenTTL was not followed within 20 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }

        // The second-factor policy is followed too: required of operators, carol (an operator
        // without a factor) gets no Kubernetes token, not even from the session she had, and is
        // told to set one up in the web UI; alice (an admin) is not concerned.
        let carol_kube = a
            .sign_in("carol", PASSWORD, None)
            .await
            .map_err(|e| anyhow::anyhow!("carol's Kubernetes sign-in before the policy: {e:?}"))?;
        plane.apply(&installation_requiring_operators_factor("3m"))?;
        let mut token = refresh_of(&carol_kube);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            match b.try_refresh(&token).await {
                Ok(next) => token = refresh_of(&next),
                Err((status, body)) if body.contains("set up a second factor") => {
                    assert_eq!(status, 400, "{body}");
                    break;
                }
                Err((429, _)) => {}
                Err((status, body)) => anyhow::bail!("carol's refresh: HTTP {status}: {body}"),
            }
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "the IchorInstallation's second-factor policy was not followed within 20 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        let (status, body) = a
            .sign_in("carol", PASSWORD, None)
            .await
            .expect_err("an operator without a factor got a Kubernetes token");
        assert_eq!(status, 403, "{body}");
        assert!(
            body.contains("Sign in to the Ichor web UI, set up a second factor"),
            "{body}"
        );

        // The UserService on B, decided by the apiserver: alice (admin) lists; carol (operator)
        // may not revoke alice's sessions.
        let ui = alice["id_token"].as_str().expect("id_token").to_owned();
        let mut as_alice = b.user_service(&ui).await;
        let listed = as_alice.list_users(ListUsersRequest {}).await?.into_inner();
        let names: Vec<_> = listed.users.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["alice", "carol"]);
        let carol = a
            .sign_in("carol", PASSWORD, Some("ichor-ui"))
            .await
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let mut as_carol = a
            .user_service(carol["id_token"].as_str().expect("id_token"))
            .await;
        // While she must enrol, the UserService lets her only enrol (and say who she is).
        let refused = as_carol
            .revoke_sessions(RevokeSessionsRequest { name: "alice".into() })
            .await
            .expect_err("an operator revoked an admin's sessions");
        assert_eq!(refused.code(), tonic::Code::FailedPrecondition, "{refused:?}");
        assert!(
            refused.message().contains("set up a second factor first"),
            "{refused:?}"
        );
        // The policy lifted (followed like the token TTL): what RBAC decides.
        plane.apply(&installation("3m"))?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let refused = as_carol
                .revoke_sessions(RevokeSessionsRequest { name: "alice".into() })
                .await
                .expect_err("an operator revoked an admin's sessions");
            if refused.code() == tonic::Code::PermissionDenied {
                break;
            }
            assert_eq!(refused.code(), tonic::Code::FailedPrecondition, "{refused:?}");
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "the lifted second-factor policy was not followed within 20 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }

        // carol (an operator) may not create an admin; asked before her sessions are revoked,
        // which would refuse her token first.
        let refused = as_carol
            .create_user(CreateUserRequest {
                name: "erin".into(),
                roles: vec!["admin".into()],
                ..Default::default()
            })
            .await
            .expect_err("an operator created an admin");
        assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
        assert_eq!(roles(plane, "erin")?, None);
        assert_eq!(
            stored(plane, "erin")?,
            None,
            "no credentials after a refused create"
        );

        // RevokeSessions on B ends carol's family on A.
        as_alice
            .revoke_sessions(RevokeSessionsRequest { name: "carol".into() })
            .await?;
        let (status, body) = a
            .try_refresh(&refresh_of(&carol))
            .await
            .expect_err("a revoked family refreshed");
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("invalid_grant"), "{body}");

        // A created user is an IchorUser written as alice, with an entry in the store; carol
        // may not create one.
        as_alice
            .create_user(CreateUserRequest {
                name: "dave".into(),
                roles: vec!["viewer".into()],
                initial_password: Some(InitialPassword::Password("dave's first password".into())),
                ..Default::default()
            })
            .await?;
        assert_eq!(roles(plane, "dave")?, Some(json!(["viewer"])));
        // An administrator's first password must be changed before a Kubernetes token, and
        // signs in to the UI.
        let (status, body) = b
            .sign_in("dave", "dave's first password", None)
            .await
            .expect_err("a first password gave a Kubernetes token");
        assert_eq!(status, 403, "{body}");
        assert!(body.contains("change your password"), "{body}");
        b.sign_in("dave", "dave's first password", Some("ichor-ui"))
            .await
            .map_err(|e| anyhow::anyhow!("dave cannot sign in to the UI: {e:?}"))?;
        // An update and a delete, written as alice too (each write the chart lets the issuer
        // make as someone else is made once).
        as_alice
            .update_user(UpdateUserRequest {
                name: "dave".into(),
                display_name: Some("Dave".into()),
                ..Default::default()
            })
            .await?;
        as_alice
            .delete_user(DeleteUserRequest { name: "dave".into() })
            .await?;
        assert_eq!(roles(plane, "dave")?, None, "dave was deleted");
        // A password change on A: B refuses the old password and takes the new one.
        let mut alice_on_a = a.user_service(&ui).await;
        alice_on_a
            .change_own_password(ChangeOwnPasswordRequest {
                old_password: PASSWORD.into(),
                new_password: "a new password for alice".into(),
                code: String::new(),
            })
            .await?;
        let (status, _) = b
            .sign_in("alice", PASSWORD, None)
            .await
            .expect_err("the old password still signs in");
        assert_eq!(status, 401);
        b.sign_in("alice", "a new password for alice", None)
            .await
            .map_err(|e| anyhow::anyhow!("the new password does not sign in: {e:?}"))?;
        anyhow::Ok(())
    })
}
