//! The second sign-in step on the kube store, across two `ichor-issuer --store kube` processes
//! as the chart runs them: one authenticator-app code presented to both at once is accepted by
//! one only (the entry's conditional write is the single point of truth), a recovery code works
//! once across them, and the token of the sign-in says how the user signed in.

use ichor_renderers::auth::totp;
use ichor_testkit::install::{self, ISSUER_SERVICE_ACCOUNT};
use ichor_testkit::issuer::harness::{TOTP_SECRET, factor_entry};
use ichor_testkit::issuer::sign_in::{self, Authorize, query_param};
use serde_json::{Value, json};

use super::{own_entry, password_entry, per_user_cluster, runtime};
use crate::common::claims;
use crate::conformance_common::{Options as IssuerOptions, PASSWORD, RunningIssuer, Store};

const VERIFIER: &str = "second-factor-verifier-0123456789-abcdefghijklmnopqrstuvwxyz";

fn request() -> Authorize<'static> {
    Authorize {
        state: "st-factor",
        nonce: "no-factor",
        ..Authorize::cli(VERIFIER)
    }
}

/// dave's password step on `issuer`: the second-factor ticket.
async fn password_step(issuer: &RunningIssuer) -> anyhow::Result<String> {
    let authorize = sign_in::answer(
        "authorize",
        issuer
            .client
            .get(request().url(&issuer.url))
            .header("accept", "application/json"),
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let login = sign_in::answer(
        "login",
        issuer
            .client
            .post(format!("{}/oidc/login", issuer.url))
            .json(&json!({"ticket": authorize["ticket"], "username": "dave", "password": PASSWORD})),
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    anyhow::ensure!(
        login.get("redirect_uri").is_none(),
        "a code before the factor: {login}"
    );
    login["factor_ticket"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("no factor_ticket in {login}"))
}

/// The second step on `issuer`: the answer, or its status and body.
async fn factor(issuer: &RunningIssuer, ticket: &str, code: &str) -> Result<Value, (u16, String)> {
    sign_in::answer(
        "factor",
        issuer
            .client
            .post(format!("{}/oidc/login/factor", issuer.url))
            .json(&json!({"factor_ticket": ticket, "code": code})),
    )
    .await
    .map_err(|r| (r.code(), r.body))
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn one_authenticator_code_is_accepted_once_across_two_issuer_processes() -> anyhow::Result<()> {
    let (with_factors, recovery_codes) = factor_entry();
    let mut entry = password_entry();
    entry.factors = with_factors.factors;
    let Some(plane) = per_user_cluster(&[("dave", "admin")], &[("dave", &entry)])? else {
        return Ok(());
    };
    let options = IssuerOptions {
        store: Store::Kube {
            kubeconfig: install::component_kubeconfig(&plane, 0, ISSUER_SERVICE_ACCOUNT)?,
            ca_file: plane.ca_file(),
        },
        ..IssuerOptions::default()
    };
    let runtime = runtime(2)?;
    let winner = runtime.block_on(async {
        let a = RunningIssuer::start(options.clone()).await;
        let b = a.replica(&options).await;

        // The same ticket and the same code on both processes at once: one sign-in.
        let pending = password_step(&a).await?;
        let code = totp::code_at(TOTP_SECRET, jiff::Timestamp::now())?;
        let (on_a, on_b) = tokio::join!(factor(&a, &pending, &code), factor(&b, &pending, &code));
        let (won, lost) = match (on_a, on_b) {
            (Ok(won), Err(lost)) | (Err(lost), Ok(won)) => (won, lost),
            (a, b) => anyhow::bail!("not exactly one acceptance: A {a:?}, B {b:?}"),
        };
        // The other write conflicted, read again and found the ticket spent (its sign-in
        // completed on the other process).
        assert_eq!(lost.0, 400, "{}", lost.1);
        assert!(lost.1.contains("no longer valid"), "{}", lost.1);
        // And again on a fresh sign-in, as a relayed (phished) code would come: refused.
        let again = password_step(&b).await?;
        let replay = factor(&b, &again, &code)
            .await
            .expect_err("a used code was accepted");
        assert_eq!(replay.0, 401, "{}", replay.1);

        // A recovery code on B is good once; on A it is used.
        factor(&b, &again, &recovery_codes[0])
            .await
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let third = password_step(&a).await?;
        let used = factor(&a, &third, &recovery_codes[0])
            .await
            .expect_err("a used recovery code was accepted");
        assert_eq!(used.0, 401, "{}", used.1);

        // The winner's code gives a token that says how dave signed in.
        let redirect = won["redirect_uri"].as_str().unwrap_or_default();
        let code = query_param(redirect, "code").ok_or_else(|| anyhow::anyhow!("no code: {won}"))?;
        let request = request();
        let tokens = sign_in::answer(
            "token",
            a.client
                .post(format!("{}/oidc/token", a.url))
                .form(&request.exchange(&code)),
        )
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok::<_, anyhow::Error>(claims(tokens["id_token"].as_str().unwrap_or_default()))
    })?;
    assert_eq!(winner["amr"], json!(["pwd", "otp", "mfa"]), "{winner}");

    // The store holds the use: the step of the accepted code, nine recovery codes left.
    let stored = own_entry(&plane, "dave")?.ok_or_else(|| anyhow::anyhow!("dave's entry is gone"))?;
    let totp = stored.factors.totp.as_ref().expect("the app is still enrolled");
    assert!(totp.last_step > 0, "the accepted step was recorded");
    let left = stored.factors.recovery.as_ref().map_or(0, |r| r.digests.len());
    assert_eq!(left, 9);
    Ok(())
}
