//! A compromised issuer pod holds the issuer ServiceAccount's token, and that account may
//! impersonate: the API writes `IchorUser`s as the signed-in person. User names cannot be listed
//! in advance, so the users rule has no `resourceNames`; with the legacy `impersonate` verb the
//! account could therefore act as `system:kube-controller-manager`, whose bootstrap role reads
//! every Secret (and so every ServiceAccount token: the whole cluster).
//!
//! The attack, through the real kube-apiserver with the chart's roles: as the issuer's
//! ServiceAccount, impersonate `system:kube-controller-manager` (alone, and with a group the
//! issuer may impersonate) and read a Secret that user may read. The chart grants constrained
//! impersonation (Kubernetes 1.36+): whoever the issuer impersonates, the request can only be a
//! create, update or delete of an `IchorUser` in `ichor-system`. So the read is refused, while
//! the API's own write as a signed-in admin still goes through, and even a read of `IchorUser`s
//! as that admin is refused.

use std::time::Duration;

use ichor_testkit::install::{self, NAMESPACE};

use super::super::{cluster, issuer_client, runtime};

/// Sends `method path` (with `body`) as the issuer's account impersonating `user` in `groups`
/// (the headers the API sends): the HTTP status.
async fn as_issuer(
    client: &kube::Client,
    user: &str,
    groups: &[&str],
    method: &str,
    path: &str,
    body: &str,
) -> u16 {
    let mut request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .header("impersonate-user", user);
    for g in groups {
        request = request.header("impersonate-group", *g);
    }
    let request = request.body(body.as_bytes().to_vec()).unwrap();
    match client.request_text(request).await {
        Ok(_) => 200,
        Err(kube::Error::Api(status)) => status.code,
        Err(e) => panic!("{method} {path}: {e}"),
    }
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn the_issuers_account_cannot_act_as_the_controller_manager_only_write_ichor_users() -> anyhow::Result<()> {
    let Some(plane) = cluster(&[("alice", "admin")], &[])? else {
        return Ok(());
    };
    plane.apply(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: victim\n  namespace: kube-system\nstringData:\n  token: s3cret\n",
    )?;
    let secret = "/api/v1/namespaces/kube-system/secrets/victim";
    let users = format!("/apis/ichor.maesh.dev/v1alpha1/namespaces/{NAMESPACE}/ichorusers");

    // The controller manager may read it: the admin (system:masters) impersonating it does.
    let by_admin = plane.kubectl_as(
        Some(("system:kube-controller-manager", &[])),
        &["get", "secret", "victim", "-n", "kube-system", "-o", "name"],
        None,
    )?;
    assert_eq!(
        by_admin.as_deref().map(str::trim),
        Ok("secret/victim"),
        "the baseline"
    );

    runtime(2)?.block_on(async {
        let client = issuer_client(&plane).await?;
        // What the account may do: the API's write as a signed-in admin (waited for: the chart's
        // roles reach the authorizer moments after they are created).
        let bob = install::ichor_user("bob", &["viewer"]);
        let mut created = 0;
        for _ in 0..80 {
            created = as_issuer(&client, "ichor:alice", &["ichor:admin"], "POST", &users, &bob).await;
            if created == 200 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        assert_eq!(created, 200, "the API's write as an admin was refused");

        // The attack: the controller manager's read, alone and with a group the issuer may
        // impersonate. Refused.
        for groups in [&[][..], &["ichor:admin"][..]] {
            let status = as_issuer(
                &client,
                "system:kube-controller-manager",
                groups,
                "GET",
                secret,
                "",
            )
            .await;
            assert_eq!(
                status, 403,
                "the issuer's account read a Secret as the controller manager {groups:?}"
            );
        }
        // Nor anything but the writes as the admin, though the admin may read users.
        let status = as_issuer(
            &client,
            "ichor:alice",
            &["ichor:admin"],
            "GET",
            &format!("{users}/bob"),
            "",
        )
        .await;
        assert_eq!(status, 403, "the issuer's account read an IchorUser as the admin");
        let status = as_issuer(
            &client,
            "ichor:alice",
            &["ichor:admin"],
            "DELETE",
            &format!("{users}/bob"),
            "",
        )
        .await;
        assert_eq!(status, 200, "the API's delete as an admin");
        anyhow::Ok(())
    })
}
