//! The second step's page: the UI's sign-in card (`login.html`, as [`super::page`] serves it for
//! the password) with the second step's data block — the second-factor ticket, the kinds
//! offered, whom the sign-in is for, the last refusal — which the card (`parseFactorPage` in
//! `ui/src/lib/signInPage.ts`) shows in the user's language and posts to `/oidc/login/factor` as
//! a form. Beside it the factor form in plain HTML (English) for a browser without scripts, which
//! is the whole page when no UI is built. Every value is HTML-escaped or written as
//! [`page::script_json`].

use axum::{http::StatusCode, response::Response};
use ichor_renderers::auth::credentials::{FACTOR_RECOVERY, FACTOR_TOTP};
use serde::Serialize;

use super::page::{self, CardError, Refusal, escape};
use super::request::CLIENT_CLI;
use crate::ui::UiFiles;

/// The factor form: the second-factor ticket it posts, whom the sign-in is for, the kinds
/// offered and the refusal of the last attempt.
#[derive(Debug, Clone, Copy)]
pub struct FactorForm<'a> {
    /// The signed second-factor ticket, posted back as `factor_ticket`.
    pub ticket: &'a str,
    /// The request's `client_id`.
    pub client_id: &'a str,
    /// The request's (checked) `redirect_uri`.
    pub redirect_uri: &'a str,
    /// The factor kinds offered.
    pub factors: &'a [&'static str],
    /// The options for `navigator.credentials.get` when a passkey is offered.
    pub passkey_options: Option<&'a serde_json::Value>,
    /// The refusal of the last attempt.
    pub error: Option<&'a Refusal>,
}

/// What the code field takes, in the user's words.
fn hint(factors: &[&str]) -> &'static str {
    let totp = factors.contains(&FACTOR_TOTP);
    let recovery = factors.contains(&FACTOR_RECOVERY);
    match (totp, recovery) {
        (true, true) => "Enter the 6-digit code from your authenticator app, or one of your recovery codes.",
        (true, false) => "Enter the 6-digit code from your authenticator app.",
        (false, true) => "Enter one of your recovery codes.",
        (false, false) => {
            "This sign-in asks for your passkey, which this page can use only with JavaScript on: turn it on and reload the page."
        }
    }
}

/// The form in plain HTML.
pub fn markup(form: &FactorForm<'_>) -> String {
    let purpose = escape(&page::purpose(form.client_id, form.redirect_uri));
    let error = form
        .error
        .map(|e| format!("<p class=\"error\" role=\"alert\">{}</p>\n", escape(&e.text)))
        .unwrap_or_default();
    format!(
        "<p class=\"note\">{purpose}</p>\n{error}<form method=\"post\" action=\"/oidc/login/factor\">\n\
         <input type=\"hidden\" name=\"factor_ticket\" value=\"{ticket}\">\n\
         <label for=\"code\">Verification code</label>\n\
         <input id=\"code\" name=\"code\" type=\"text\" autocomplete=\"one-time-code\" \
         autocapitalize=\"none\" spellcheck=\"false\" maxlength=\"64\" required autofocus \
         aria-describedby=\"code-hint\">\n\
         <p class=\"note\" id=\"code-hint\">{hint}</p>\n\
         <button type=\"submit\">Verify</button>\n</form>\n",
        ticket = escape(form.ticket),
        hint = hint(form.factors),
    )
}

/// What the card reads from the second step's page.
#[derive(Serialize)]
struct FactorCardData<'a> {
    factor_ticket: &'a str,
    factors: &'a [&'static str],
    #[serde(skip_serializing_if = "Option::is_none")]
    passkey_options: Option<&'a serde_json::Value>,
    client: &'a str,
    /// The loopback port, for the CLI.
    port: Option<u16>,
    origin: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<CardError>,
}

/// The JSON the card reads for `form`, escaped for the data block.
pub fn card_data(form: &FactorForm<'_>) -> String {
    page::script_json(&FactorCardData {
        factor_ticket: form.ticket,
        factors: form.factors,
        passkey_options: form.passkey_options,
        client: form.client_id,
        port: if form.client_id == CLIENT_CLI {
            page::port_of(form.redirect_uri)
        } else {
            None
        },
        origin: page::origin_of(form.redirect_uri),
        error: form.error.map(CardError::of),
    })
}

/// The factor page for `form`, answered with `status`: the UI's card when `files` has the
/// sign-in page, else the plain form.
pub(crate) async fn respond(files: &UiFiles, status: StatusCode, form: &FactorForm<'_>) -> Response {
    page::card(
        files,
        status,
        &card_data(form),
        &markup(form),
        page::form_csp(form.redirect_uri),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passkey_alone_asks_for_javascript_without_a_script() {
        let form = FactorForm {
            ticket: "t",
            client_id: "ichor-ui",
            redirect_uri: "https://ichor.example/callback",
            factors: &[ichor_renderers::auth::credentials::FACTOR_PASSKEY],
            passkey_options: None,
            error: None,
        };
        assert!(markup(&form).contains("only with JavaScript on"));
    }

    #[test]
    fn the_form_escapes_its_ticket_and_error_and_names_what_it_takes() {
        let refusal = Refusal {
            key: "wrongCode",
            seconds: None,
            text: "<b>no</b>".to_owned(),
        };
        let form = FactorForm {
            ticket: "a\"><script>x</script>",
            client_id: "ichor-ui",
            redirect_uri: "https://ichor.example/callback",
            factors: &[FACTOR_TOTP, FACTOR_RECOVERY],
            passkey_options: None,
            error: Some(&refusal),
        };
        let html = markup(&form);
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        assert!(html.contains("action=\"/oidc/login/factor\""), "{html}");
        assert!(
            html.contains("authenticator app, or one of your recovery codes"),
            "{html}"
        );
        let recovery_only = markup(&FactorForm {
            factors: &[FACTOR_RECOVERY],
            passkey_options: None,
            error: None,
            ..form
        });
        assert!(
            recovery_only.contains("Enter one of your recovery codes."),
            "{recovery_only}"
        );
        assert!(!recovery_only.contains("role=\"alert\""), "{recovery_only}");
    }

    /// The JSON block of a card page, parsed.
    fn data_of(page: &str) -> serde_json::Value {
        let start = format!("<script type=\"application/json\" id=\"{}\">", page::DATA_ID);
        let rest = &page[page.find(&start).expect("the data block") + start.len()..];
        serde_json::from_str(&rest[..rest.find("</script>").expect("its end")]).expect("JSON")
    }

    #[test]
    fn the_cards_data_holds_the_ticket_the_kinds_and_whom_it_is_for_and_no_markup() {
        let refusal = Refusal {
            key: "tooManyAttempts",
            seconds: Some(9),
            text: "</script><img src=x>".to_owned(),
        };
        let form = FactorForm {
            ticket: "t</script><script>alert(1)</script>",
            client_id: "ichor-cli",
            redirect_uri: "http://127.0.0.1:53124/callback",
            factors: &[FACTOR_TOTP],
            passkey_options: None,
            error: Some(&refusal),
        };
        let data = card_data(&form);
        assert!(!data.contains('<') && !data.contains('>'), "{data}");
        let value: serde_json::Value = serde_json::from_str(&data).expect("JSON");
        assert_eq!(
            value,
            serde_json::json!({"factor_ticket": form.ticket, "factors": ["totp"], "client": "ichor-cli",
                "port": 53124, "origin": "http://127.0.0.1:53124",
                "error": {"key": "tooManyAttempts", "values": {"seconds": 9}}})
        );
        let web = card_data(&FactorForm {
            client_id: "ichor-ui",
            redirect_uri: "https://ichor.example/auth/callback",
            passkey_options: None,
            error: None,
            ..form
        });
        let value: serde_json::Value = serde_json::from_str(&web).expect("JSON");
        assert_eq!(
            value["port"],
            serde_json::Value::Null,
            "a port is said for the CLI only"
        );
        assert_eq!(value["origin"], "https://ichor.example");
        assert!(value.get("error").is_none(), "{web}");
    }

    #[tokio::test]
    async fn the_page_is_the_uis_card_when_built_and_the_plain_form_otherwise() {
        use axum::http::header;
        use http_body_util::BodyExt as _;
        const TEMPLATE_HTML: &str = "<!doctype html>\n<html lang=\"en\">\n<head>\n\
            <script type=\"module\" crossorigin src=\"/assets/login-abc.js\"></script>\n</head>\n\
            <body>\n<div id=\"app\"></div>\n</body>\n</html>\n";
        let refusal = Refusal {
            key: "wrongCode",
            seconds: None,
            text: "The code is incorrect or was used already.".to_owned(),
        };
        let form = FactorForm {
            ticket: "f.t.s",
            client_id: "ichor-cli",
            redirect_uri: "http://127.0.0.1:53124/callback",
            factors: &[FACTOR_TOTP, FACTOR_RECOVERY],
            passkey_options: None,
            error: Some(&refusal),
        };
        let body = |r: Response| async move {
            String::from_utf8(r.into_body().collect().await.expect("body").to_bytes().to_vec())
                .expect("utf-8")
        };
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join(page::TEMPLATE), TEMPLATE_HTML).expect("template");
        let response = respond(
            &UiFiles::Dir(dir.path().to_owned()),
            StatusCode::UNAUTHORIZED,
            &form,
        )
        .await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            response.headers()[header::CONTENT_SECURITY_POLICY],
            page::form_csp(form.redirect_uri)
        );
        assert_eq!(response.headers()[header::CACHE_CONTROL], "no-store");
        let card = body(response).await;
        assert!(card.contains("src=\"/assets/login-abc.js\""), "{card}");
        let data = data_of(&card);
        assert_eq!(data["factor_ticket"], "f.t.s");
        assert_eq!(data["factors"], serde_json::json!(["totp", "recovery"]));
        assert_eq!(data["error"]["key"], "wrongCode");
        // The no-script form beside the card, with the ticket and the refusal.
        let noscript = &card[card.find("<noscript>").expect("noscript")..];
        assert!(noscript.contains("action=\"/oidc/login/factor\""), "{card}");
        assert!(
            noscript.contains("name=\"factor_ticket\" value=\"f.t.s\""),
            "{card}"
        );
        assert!(noscript.contains("The code is incorrect"), "{card}");

        let plain = body(respond(&UiFiles::Embedded(&[]), StatusCode::OK, &form).await).await;
        assert!(!plain.contains("<script"), "{plain}");
        assert!(plain.contains("autocomplete=\"one-time-code\""), "{plain}");
    }
}
