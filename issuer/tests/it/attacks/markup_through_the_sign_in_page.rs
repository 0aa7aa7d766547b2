//! Markup through the sign-in page: another site posts the sign-in form with a user name that
//! closes the page's data block and starts a script (the page answers a wrong password with the
//! form again, the user name kept), or links to an authorization request whose client or
//! redirect URI is markup. The user name comes back only as data of the JSON block (every `<`
//! escaped) and HTML-escaped in the no-script form, an authorization request with markup never
//! gets a sign-in page, and every page forbids inline script.

use crate::common::*;
use axum::http::StatusCode;

const SCRIPT_IN_NAME: &str = "</script><script>alert(1)</script><!--";

/// The text of the page's JSON data block, parsed.
fn data_of(page: &str) -> serde_json::Value {
    let start = "<script type=\"application/json\" id=\"ichor-sign-in\">";
    let rest = &page[page.find(start).expect("the data block") + start.len()..];
    serde_json::from_str(&rest[..rest.find("</script>").expect("its end")]).expect("JSON")
}

/// The scripts of a page: each loads a file from `/assets/` or is the data block.
fn assert_no_inline_script(page: &str) {
    for script in page.split("<script").skip(1) {
        let tag = &script[..script.find('>').expect("tag end")];
        assert!(
            tag.contains("src=\"/assets/") || tag.contains("type=\"application/json\""),
            "an inline script: <script{tag}>"
        );
    }
}

#[tokio::test]
async fn a_user_name_posted_from_another_site_comes_back_as_data_only() {
    let h = Harness::new();
    let (location, ticket) = h.sign_in_page().await;
    let page = h.get(&location).await.text();
    let scripts = page.matches("<script").count();

    let body = form(&[
        ("ticket", &ticket),
        ("username", SCRIPT_IN_NAME),
        ("password", "wrong wrong wrong"),
    ]);
    let reply = h.post_form("/oidc/login", &body).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    let text = reply.text();
    // No element more than on the first page: the name added none.
    assert_eq!(text.matches("<script").count(), scripts, "{text}");
    assert!(!text.contains("alert(1)</script>"), "{text}");
    assert!(!text.contains("<!--"), "{text}");
    assert_no_inline_script(&text);
    let data = data_of(&text);
    assert_eq!(data["username"], SCRIPT_IN_NAME, "the name, as typed");
    assert_eq!(data["error"]["key"], "wrongCredentials");
    assert_eq!(data["ticket"], ticket.as_str());
    assert!(
        text.contains("value=\"&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;!--\""),
        "the no-script form has it escaped: {text}"
    );
    let csp = reply.headers["content-security-policy"].to_str().expect("csp");
    assert!(
        csp.contains("script-src 'self';") && !csp.contains("unsafe"),
        "{csp}"
    );
}

#[tokio::test]
async fn an_authorization_request_with_markup_gets_no_sign_in_page() {
    let h = Harness::new();
    let markup = "\"><script>alert(1)</script>";
    for (client, redirect) in [
        (markup, CLI_REDIRECT),
        (
            "ichor-cli",
            "http://127.0.0.1:38123/callback\"><script>alert(1)</script>",
        ),
        ("ichor-cli", "http://127.0.0.1:38123/callback?x=<script>"),
        ("ichor-ui", "https://evil.example/<script>"),
    ] {
        let reply = h
            .get(&Harness::authorize_query(client, redirect, "openid", ""))
            .await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{client} {redirect}");
        assert!(reply.headers.get("location").is_none());
        let text = reply.text();
        assert!(!text.contains("<script"), "{text}");
        assert!(!text.contains("ichor-sign-in"), "no sign-in form: {text}");
        assert_eq!(
            reply.headers["content-security-policy"],
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; \
             form-action 'none'"
        );
    }
}
