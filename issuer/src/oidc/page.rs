//! The server-rendered sign-in page: one card, "Sign in to Ichor", whom the sign-in is for
//! (the client, and for the CLI its loopback port), user name and password. No
//! script and no inline style (the stylesheet is [`STYLESHEET`], served from
//! `/oidc/assets/login.css`), every interpolated value HTML-escaped, and headers that forbid
//! framing, caching and leaking the ticket through `Referer`.

use axum::{
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};

/// The page's stylesheet.
pub const STYLESHEET: &str = include_str!("../../assets/login.css");

/// The Content-Security-Policy of the page.
pub const CSP: &str = "default-src 'self'; script-src 'self'; frame-ancestors 'none'";

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

fn document(body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"referrer\" content=\"no-referrer\">\n<title>Sign in to Ichor</title>\n\
         <link rel=\"stylesheet\" href=\"/oidc/assets/login.css\">\n</head>\n<body>\n\
         <main class=\"card\">\n<h1>Sign in to Ichor</h1>\n{body}</main>\n</body>\n</html>\n"
    )
}

/// Whom a sign-in is for, from its checked `client_id` and `redirect_uri`: shown above the form,
/// so that a person who did not start `ichor auth login` (or who started it on another port) can
/// tell that a link is signing them in for a program they do not know.
pub fn purpose(client_id: &str, redirect_uri: &str) -> String {
    let url = url::Url::parse(redirect_uri).ok();
    if client_id == super::request::CLIENT_CLI {
        let port = url
            .as_ref()
            .and_then(url::Url::port)
            .map_or_else(|| "?".to_owned(), |p| p.to_string());
        format!(
            "You are signing in the ichor command (client {client_id}) that answers on this computer at              127.0.0.1 port {port}. Go on only if you just ran ichor auth login and it printed this port."
        )
    } else {
        let origin = url.map_or_else(|| redirect_uri.to_owned(), |u| u.origin().ascii_serialization());
        format!("You are signing in to Ichor's web app at {origin} (client {client_id}).")
    }
}

/// The sign-in form for `ticket`, with an optional error and the user name typed before.
pub fn login_form(ticket: &str, error: Option<&str>, username: &str) -> String {
    login_form_for(ticket, error, username, None)
}

/// [`login_form`] with a line saying whom the sign-in is for ([`purpose`]).
pub fn login_form_for(ticket: &str, error: Option<&str>, username: &str, purpose: Option<&str>) -> String {
    let purpose = purpose
        .map(|p| format!("<p class=\"note\">{}</p>\n", escape(p)))
        .unwrap_or_default();
    let error = error
        .map(|e| format!("<p class=\"error\" role=\"alert\">{}</p>\n", escape(e)))
        .unwrap_or_default();
    let autofocus_user = if username.is_empty() { " autofocus" } else { "" };
    let autofocus_password = if username.is_empty() { "" } else { " autofocus" };
    document(&format!(
        "{purpose}{error}<form method=\"post\" action=\"/oidc/login\">\n\
         <input type=\"hidden\" name=\"ticket\" value=\"{ticket}\">\n\
         <label for=\"username\">User name</label>\n\
         <input id=\"username\" name=\"username\" type=\"text\" autocomplete=\"username\" \
         autocapitalize=\"none\" spellcheck=\"false\" maxlength=\"63\" required value=\"{username}\"{autofocus_user}>\n\
         <label for=\"password\">Password</label>\n\
         <input id=\"password\" name=\"password\" type=\"password\" autocomplete=\"current-password\" \
         maxlength=\"128\" required{autofocus_password}>\n\
         <button type=\"submit\">Sign in</button>\n</form>\n",
        ticket = escape(ticket),
        username = escape(username),
    ))
}

/// A page that only says what went wrong (no form): an expired ticket, a refused request.
pub fn message(text: &str) -> String {
    document(&format!(
        "<p class=\"error\" role=\"alert\">{}</p>\n<p class=\"note\">Start the sign-in again from the \
         application.</p>\n",
        escape(text)
    ))
}

/// An HTML response with the page's security headers.
pub fn html(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
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
    use super::*;

    #[test]
    fn the_form_escapes_what_it_echoes_and_has_no_script_or_inline_style() {
        let page = login_form("t\"><script>", Some("<b>bad</b>"), "al'ice");
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
        let cli = purpose("ichor-cli", "http://127.0.0.1:53124/callback");
        assert!(
            cli.contains("client ichor-cli") && cli.contains("port 53124"),
            "{cli}"
        );
        let page = login_form_for("t", None, "", Some(&cli));
        assert!(
            page.contains("<p class=\"note\">You are signing in the ichor command"),
            "{page}"
        );
        let ui = purpose("ichor-ui", "https://ichor.example.com/auth/callback");
        assert_eq!(
            ui,
            "You are signing in to Ichor's web app at https://ichor.example.com (client ichor-ui)."
        );
        assert!(!login_form("t", None, "").contains("class=\"note\""));
    }
}
