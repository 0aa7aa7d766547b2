//! The issuer's pages: the sign-in page of the redirect flow (`/oidc/login?ticket=`, the page
//! `ichor auth login` opens) and the pages that only say what went wrong.
//!
//! The sign-in page is the web UI's sign-in card, in the UI's languages: `login.html`, a second
//! page of the UI build (embedded with the SPA, or read from `ICHOR_UI_DIR` like it; see
//! [`crate::ui::UiFiles`]), with the page's data written into it as a JSON block
//! (`<script type="application/json">`, which no browser runs; every `<`, `>` and `&` in it
//! written as a `\u` escape, so no value can end the element). Its script and stylesheet come
//! from `/assets/`, so no inline script or style exists and the CSP keeps `script-src 'self'`.
//! The card posts the same form (`ticket`, `username`, `password`) to `/oidc/login` as before.
//! Beside it, a `<noscript>` form (English, every value HTML-escaped) lets a browser without
//! scripts sign in; without a built UI that form is the page, styled by [`STYLESHEET`].
//!
//! Every page forbids framing, caching and leaking the ticket through `Referer`; a page with the
//! form allows it to post to this origin and, for the answer's redirect, to the client's
//! redirect URI's origin only ([`form_csp`]).

use std::borrow::Cow;

use axum::{
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;

use super::request::CLIENT_CLI;
use crate::ui::UiFiles;

/// The stylesheet of the pages without the UI (messages, and the form when no UI is built).
pub const STYLESHEET: &str = include_str!("../../assets/login.css");

/// The sign-in page in the built UI.
pub const TEMPLATE: &str = "login.html";

/// The element of [`TEMPLATE`] the card is rendered into; the data block follows it.
const MOUNT: &str = "<div id=\"app\"></div>";

/// The id of the JSON block the card reads (`ui/src/lib/signInPage.ts`).
pub const DATA_ID: &str = "ichor-sign-in";

macro_rules! base_csp {
    () => {
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
    };
}

/// The Content-Security-Policy of every page before `form-action`: scripts, styles and
/// everything else from this origin only (no inline script or style), no plugins, no `<base>`,
/// never framed.
pub const CSP: &str = base_csp!();

/// The Content-Security-Policy of a page without a form.
pub const MESSAGE_CSP: &str = concat!(base_csp!(), "; form-action 'none'");

/// Escapes text for HTML element content and double-quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `value` as JSON for the content of a `<script type="application/json">` element: `<`, `>`
/// and `&` (which JSON has only inside strings) written as `\u003c`, `\u003e` and `\u0026`, so
/// the text can hold no `</script`, `<!--` or character reference, and parses to the same value.
pub fn script_json<T: Serialize>(value: &T) -> String {
    let json = serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned());
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            c => out.push(c),
        }
    }
    out
}

/// The refusal of the last attempt, shown above the form again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Its key in the UI's catalogs (`ui/src/i18n/en.ts`), which the card shows in the user's
    /// language.
    pub key: &'static str,
    /// The seconds to wait, for the refusals that say so.
    pub seconds: Option<u64>,
    /// The English sentence (the no-script form).
    pub text: String,
}

/// The sign-in form: the ticket it posts, whom the sign-in is for (from the checked ticket),
/// the user name typed before and the refusal of the last attempt.
#[derive(Debug, Clone, Copy)]
pub struct Form<'a> {
    /// The signed ticket, posted back as `ticket`.
    pub ticket: &'a str,
    /// The ticket's `client_id`.
    pub client_id: &'a str,
    /// The ticket's (checked) `redirect_uri`.
    pub redirect_uri: &'a str,
    /// The user name typed before, or empty.
    pub username: &'a str,
    /// The refusal of the last attempt.
    pub error: Option<&'a Refusal>,
}

/// The port of a redirect URI (the scheme's default when it names none).
pub(super) fn port_of(redirect_uri: &str) -> Option<u16> {
    url::Url::parse(redirect_uri)
        .ok()
        .and_then(|u| u.port_or_known_default())
}

/// The origin of a redirect URI (`scheme://host[:port]`), or the URI when it does not parse.
pub(super) fn origin_of(redirect_uri: &str) -> String {
    url::Url::parse(redirect_uri)
        .map_or_else(|_| redirect_uri.to_owned(), |u| u.origin().ascii_serialization())
}

/// Whom a sign-in is for, from its checked `client_id` and `redirect_uri`, in English (the
/// no-script form; the card says it from the UI's catalogs): so that a person who did not start
/// `ichor auth login` (or who started it on another port) can tell that a link is signing them in
/// for a program they do not know.
pub fn purpose(client_id: &str, redirect_uri: &str) -> String {
    if client_id == CLIENT_CLI {
        let port = port_of(redirect_uri).map_or_else(|| "?".to_owned(), |p| p.to_string());
        format!(
            "Signing in the ichor CLI (kubectl, client {client_id}) on this computer, port {port}. Go on \
             only if you just ran ichor auth login or kubectl and it printed this port."
        )
    } else {
        let origin = origin_of(redirect_uri);
        format!("Signing in to Ichor's web app at {origin} (client {client_id}).")
    }
}

/// The Content-Security-Policy of a page with the form: [`CSP`], and `form-action` allowing
/// this origin (the post to `/oidc/login`) and the origin of the redirect URI the answer sends
/// the browser to (browsers check a form's redirects against `form-action` too). An origin that
/// cannot be written as a CSP source (an IPv6 literal) is left out: the policy is then stricter.
pub fn form_csp(redirect_uri: &str) -> HeaderValue {
    let origin = url::Url::parse(redirect_uri)
        .ok()
        .map(|u| u.origin().ascii_serialization())
        .filter(|o| {
            o != "null"
                && o.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b':' | b'/' | b'.' | b'-'))
        });
    let policy = match origin {
        Some(origin) => format!("{CSP}; form-action 'self' {origin}"),
        None => format!("{CSP}; form-action 'self'"),
    };
    HeaderValue::from_str(&policy).unwrap_or_else(|_| HeaderValue::from_static(MESSAGE_CSP))
}

/// The form in plain HTML: whom it is for, the refusal, the fields. Every value escaped.
fn form_markup(form: &Form<'_>) -> String {
    let purpose = escape(&purpose(form.client_id, form.redirect_uri));
    let error = form
        .error
        .map(|e| format!("<p class=\"error\" role=\"alert\">{}</p>\n", escape(&e.text)))
        .unwrap_or_default();
    let (autofocus_user, autofocus_password) = if form.username.is_empty() {
        (" autofocus", "")
    } else {
        ("", " autofocus")
    };
    format!(
        "<p class=\"note\">{purpose}</p>\n{error}<form method=\"post\" action=\"/oidc/login\">\n\
         <input type=\"hidden\" name=\"ticket\" value=\"{ticket}\">\n\
         <label for=\"username\">User name</label>\n\
         <input id=\"username\" name=\"username\" type=\"text\" autocomplete=\"username\" \
         autocapitalize=\"none\" spellcheck=\"false\" maxlength=\"63\" required value=\"{username}\"{autofocus_user}>\n\
         <label for=\"password\">Password</label>\n\
         <input id=\"password\" name=\"password\" type=\"password\" autocomplete=\"current-password\" \
         maxlength=\"128\" required{autofocus_password}>\n\
         <button type=\"submit\">Sign in</button>\n</form>\n",
        ticket = escape(form.ticket),
        username = escape(form.username),
    )
}

/// A whole page of the issuer's own (no UI): the card with `body`.
pub(super) fn document(body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"referrer\" content=\"no-referrer\">\n<title>Sign in to Ichor</title>\n\
         <link rel=\"stylesheet\" href=\"/oidc/assets/login.css\">\n</head>\n<body>\n\
         <main class=\"card\">\n<h1>Sign in to Ichor</h1>\n{body}</main>\n</body>\n</html>\n"
    )
}

#[derive(Serialize)]
struct Seconds {
    seconds: u64,
}

/// A refusal as the card reads it: its key in the UI's catalogs and the seconds to wait.
#[derive(Serialize)]
pub(super) struct CardError {
    key: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    values: Option<Seconds>,
}

impl CardError {
    /// The card's form of `refusal`.
    pub(super) fn of(refusal: &Refusal) -> Self {
        CardError {
            key: refusal.key,
            values: refusal.seconds.map(|seconds| Seconds { seconds }),
        }
    }
}

/// What the card reads from the page (`parseSignInPage` in `ui/src/lib/signInPage.ts`).
#[derive(Serialize)]
struct CardData<'a> {
    ticket: &'a str,
    client: &'a str,
    /// The loopback port, for the CLI.
    port: Option<u16>,
    origin: String,
    username: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<CardError>,
}

/// The JSON the card reads for `form`, escaped for the data block.
pub fn card_data(form: &Form<'_>) -> String {
    script_json(&CardData {
        ticket: form.ticket,
        client: form.client_id,
        port: if form.client_id == CLIENT_CLI {
            port_of(form.redirect_uri)
        } else {
            None
        },
        origin: origin_of(form.redirect_uri),
        username: form.username,
        error: form.error.map(CardError::of),
    })
}

/// `template` with the data block `data` (already [`script_json`]) and the no-script card around
/// `plain` after the mount element; `None` when the template has no mount element.
pub(super) fn mount(template: &str, data: &str, plain: &str) -> Option<String> {
    let at = template.find(MOUNT)? + MOUNT.len();
    let (head, tail) = template.split_at(at);
    Some(format!(
        "{head}\n    <script type=\"application/json\" id=\"{DATA_ID}\">{data}</script>\n    \
         <noscript><main class=\"center\"><div class=\"card\">\n<h1>Sign in to Ichor</h1>\n{plain}</div></main></noscript>{tail}"
    ))
}

/// The built UI's sign-in page, if it has one.
async fn template(files: &UiFiles) -> Option<Cow<'static, str>> {
    match files {
        UiFiles::Embedded(table) => table
            .binary_search_by(|(path, _)| (*path).cmp(TEMPLATE))
            .ok()
            .and_then(|i| std::str::from_utf8(table[i].1).ok())
            .map(Cow::Borrowed),
        UiFiles::Dir(dir) => tokio::fs::read_to_string(dir.join(TEMPLATE))
            .await
            .ok()
            .map(Cow::Owned),
    }
}

/// The sign-in page for `form`, answered with `status`: the UI's card when `files` has the
/// sign-in page, else the plain form.
pub(crate) async fn sign_in(files: &UiFiles, status: StatusCode, form: &Form<'_>) -> Response {
    card(
        files,
        status,
        &card_data(form),
        &form_markup(form),
        form_csp(form.redirect_uri),
    )
    .await
}

/// A page of the card (`data`, its JSON block) answered with `status` and `csp`: the UI's
/// sign-in page when `files` has it, with `plain` as its no-script form; else `plain` alone.
pub(super) async fn card(
    files: &UiFiles,
    status: StatusCode,
    data: &str,
    plain: &str,
    csp: HeaderValue,
) -> Response {
    let page = match template(files).await {
        Some(page) => mount(&page, data, plain),
        None => None,
    };
    let body = page.unwrap_or_else(|| document(plain));
    with_headers(status, body, csp)
}

/// A page that only says what went wrong (no form): an expired ticket, a refused request.
pub fn message(text: &str) -> String {
    document(&format!(
        "<p class=\"error\" role=\"alert\">{}</p>\n<p class=\"note\">Start the sign-in again from the \
         application.</p>\n",
        escape(text)
    ))
}

/// An HTML response of a page without a form ([`message`]), with the pages' security headers.
pub fn html(status: StatusCode, body: String) -> Response {
    with_headers(status, body, HeaderValue::from_static(MESSAGE_CSP))
}

pub(super) fn with_headers(status: StatusCode, body: String, csp: HeaderValue) -> Response {
    let mut response = (status, body).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CONTENT_SECURITY_POLICY, csp);
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

pub(crate) async fn stylesheet() -> Response {
    let mut response = STYLESHEET.into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/css; charset=utf-8"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use http_body_util::BodyExt as _;

    const CLI: &str = "http://127.0.0.1:53124/callback";
    const TEMPLATE_HTML: &str = "<!doctype html>\n<html lang=\"en\">\n<head>\n\
        <script type=\"module\" crossorigin src=\"/assets/login-abc.js\"></script>\n</head>\n\
        <body>\n<div id=\"app\"></div>\n</body>\n</html>\n";

    /// The sign-in page without the UI: the plain form only.
    fn plain_form(form: &Form<'_>) -> String {
        document(&form_markup(form))
    }

    /// The UI's sign-in page `template` for `form`, as [`sign_in`] serves it.
    fn card_page(template: &str, form: &Form<'_>) -> Option<String> {
        mount(template, &card_data(form), &form_markup(form))
    }

    fn form<'a>(ticket: &'a str, username: &'a str, error: Option<&'a Refusal>) -> Form<'a> {
        Form {
            ticket,
            client_id: "ichor-cli",
            redirect_uri: CLI,
            username,
            error,
        }
    }

    fn wrong() -> Refusal {
        Refusal {
            key: "wrongCredentials",
            seconds: None,
            text: "<b>bad</b>".into(),
        }
    }

    /// The text of the page's JSON block, parsed.
    fn data_of(page: &str) -> serde_json::Value {
        let start = format!("<script type=\"application/json\" id=\"{DATA_ID}\">");
        let rest = &page[page.find(&start).unwrap() + start.len()..];
        serde_json::from_str(&rest[..rest.find("</script>").unwrap()]).unwrap()
    }

    #[test]
    fn the_plain_form_escapes_what_it_echoes_and_has_no_script_or_inline_style() {
        let error = wrong();
        let page = plain_form(&form("t\"><script>", "al'ice", Some(&error)));
        assert!(page.contains("t&quot;&gt;&lt;script&gt;"));
        assert!(page.contains("&lt;b&gt;bad&lt;/b&gt;"));
        assert!(page.contains("al&#39;ice"));
        assert!(!page.contains("<script"));
        assert!(!page.contains("style="));
        assert!(!page.contains("<style"));
        assert!(page.contains("Sign in to Ichor"));
    }

    #[test]
    fn the_page_says_which_client_and_which_loopback_port_it_signs_in_for() {
        let cli = purpose("ichor-cli", CLI);
        assert!(
            cli.contains("client ichor-cli") && cli.contains("port 53124"),
            "{cli}"
        );
        let page = plain_form(&form("t", "", None));
        assert!(
            page.contains("<p class=\"note\">Signing in the ichor CLI (kubectl, client ichor-cli) on this computer, port 53124."),
            "{page}"
        );
        let ui = purpose("ichor-ui", "https://ichor.example.com/auth/callback");
        assert_eq!(
            ui,
            "Signing in to Ichor's web app at https://ichor.example.com (client ichor-ui)."
        );
        let data = data_of(&card_page(TEMPLATE_HTML, &form("t", "", None)).unwrap());
        assert_eq!(
            data,
            serde_json::json!({"ticket": "t", "client": "ichor-cli", "port": 53124,
                "origin": "http://127.0.0.1:53124", "username": ""})
        );
    }

    #[test]
    fn no_value_written_into_the_card_page_can_add_markup_or_script() {
        let client = "</script><script>alert(1)</script>";
        let redirect = "http://127.0.0.1:1/callback?x=</script><img src=x onerror=alert(2)>&amp;";
        let username = "</noscript><script>alert(3)</script><!--";
        let ticket = "t\"></script><script>alert(4)</script>";
        let error = Refusal {
            key: "tooManyAttempts",
            seconds: Some(7),
            text: "</noscript><img src=x>".into(),
        };
        let f = Form {
            ticket,
            client_id: client,
            redirect_uri: redirect,
            username,
            error: Some(&error),
        };
        let page = card_page(TEMPLATE_HTML, &f).unwrap();
        // The template's module script and the data block: no other element, no markup from a value.
        assert_eq!(page.matches("<script").count(), 2, "{page}");
        assert_eq!(page.matches("</script>").count(), 2, "{page}");
        assert_eq!(page.matches("</noscript>").count(), 1, "{page}");
        for raw in ["<img", "alert(1)</script>", "<!--", "onerror=alert(2)>"] {
            assert!(!page.contains(raw), "{raw} in {page}");
        }
        // The block parses back to exactly the values.
        let data = data_of(&page);
        assert_eq!(data["ticket"], ticket);
        assert_eq!(data["client"], client);
        assert_eq!(data["username"], username);
        assert_eq!(data["origin"], "http://127.0.0.1:1");
        assert_eq!(
            data["port"],
            serde_json::Value::Null,
            "a port is said for the CLI only"
        );
        assert_eq!(
            data["error"],
            serde_json::json!({"key": "tooManyAttempts", "values": {"seconds": 7}})
        );
        // The no-script copy holds them HTML-escaped.
        assert!(page.contains("value=\"&lt;/noscript&gt;&lt;script&gt;alert(3)&lt;/script&gt;&lt;!--\""));
        assert!(page.contains("&lt;/noscript&gt;&lt;img src=x&gt;"));
        assert_eq!(
            script_json(&"</script>&<!--"),
            "\"\\u003c/script\\u003e\\u0026\\u003c!--\""
        );
    }

    #[test]
    fn a_template_without_the_mount_element_is_not_the_sign_in_page() {
        assert!(card_page("<!doctype html><p>other</p>", &form("t", "", None)).is_none());
    }

    #[test]
    fn the_form_may_post_here_and_be_redirected_to_the_clients_origin_only() {
        let csp = |uri: &str| form_csp(uri).to_str().unwrap().to_owned();
        assert_eq!(
            csp(CLI),
            format!("{CSP}; form-action 'self' http://127.0.0.1:53124")
        );
        assert_eq!(
            csp("https://ichor.example.com/auth/callback"),
            format!("{CSP}; form-action 'self' https://ichor.example.com")
        );
        // Not a CSP source: left out, so only this origin is allowed.
        for uri in [
            "https://[::1]:8443/auth/callback",
            "https://a.example;script-src*/auth/callback",
            "not a url",
        ] {
            assert_eq!(csp(uri), format!("{CSP}; form-action 'self'"), "{uri}");
        }
        for policy in [csp(CLI), MESSAGE_CSP.to_owned()] {
            assert!(policy.contains("script-src 'self';"), "{policy}");
            assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
            assert!(!policy.contains("unsafe"), "{policy}");
        }
        assert!(MESSAGE_CSP.ends_with("form-action 'none'"));
    }

    async fn body_of(response: Response) -> String {
        String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
    }

    #[tokio::test]
    async fn the_page_is_the_uis_card_when_built_and_the_plain_form_otherwise() {
        let error = wrong();
        let f = form("t", "alice", Some(&error));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(TEMPLATE), TEMPLATE_HTML).unwrap();
        let response = sign_in(&UiFiles::Dir(dir.path().to_owned()), StatusCode::UNAUTHORIZED, &f).await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        let h = response.headers().clone();
        assert_eq!(h[header::CACHE_CONTROL], "no-store");
        assert_eq!(h[header::REFERRER_POLICY], "no-referrer");
        assert_eq!(h[header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(
            h[header::CONTENT_SECURITY_POLICY],
            format!("{CSP}; form-action 'self' http://127.0.0.1:53124").as_str()
        );
        let page = body_of(response).await;
        assert!(page.contains("src=\"/assets/login-abc.js\""), "{page}");
        assert_eq!(data_of(&page)["error"]["key"], "wrongCredentials");
        assert_eq!(data_of(&page)["username"], "alice");

        let response = sign_in(&UiFiles::Embedded(&[]), StatusCode::OK, &f).await;
        let page = body_of(response).await;
        assert!(!page.contains("<script"), "{page}");
        assert!(page.contains("/oidc/assets/login.css"), "{page}");
        assert!(page.contains("value=\"alice\""), "{page}");
    }

    #[test]
    fn the_committed_build_has_the_sign_in_page_and_every_asset_it_loads() {
        let embedded = crate::ui::EMBEDDED;
        let template = embedded
            .iter()
            .find(|(p, _)| *p == TEMPLATE)
            .map(|(_, b)| std::str::from_utf8(b).unwrap())
            .expect("ui/dist/login.html is committed (npm run build in ui/)");
        assert!(template.contains(MOUNT), "{template}");
        // Every script of the page is a file under /assets/: nothing inline.
        for script in template.split("<script").skip(1) {
            assert!(script.contains("src=\"/assets/"), "an inline script: {script}");
        }
        let assets: Vec<&str> = template
            .split("\"/assets/")
            .skip(1)
            .filter_map(|rest| rest.split_once('"').map(|(name, _)| name))
            .collect();
        assert!(assets.iter().any(|a| a.ends_with(".js")), "{template}");
        assert!(assets.iter().any(|a| a.ends_with(".css")), "{template}");
        for name in assets {
            assert!(crate::ui::is_safe_asset_name(name), "{name}");
            assert!(
                embedded.iter().any(|(p, _)| *p == format!("assets/{name}")),
                "{name} is not embedded"
            );
        }
    }
}
