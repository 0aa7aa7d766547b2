//! The shape every configured https endpoint URL has (an issuer, the Ichor external URL, a
//! kube-apiserver): absolute, `https`, a host, and nothing but a path beside it.

use url::Url;

/// What is wrong with a URL given for an https endpoint. The caller's error names its flag and
/// says the [`problem`](Self::problem).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlShapeError {
    /// Not an absolute URL.
    NotAbsolute,
    /// Not `https`.
    NotHttps,
    /// No host, or an empty one.
    NoHost,
    /// A user name, password, query or fragment.
    ExtraParts,
}

impl UrlShapeError {
    /// The problem as a phrase after the value given: `not_absolute` and `not_https` are the
    /// caller's own (with an example, and why https), the others are shared.
    pub fn problem(self, not_absolute: &'static str, not_https: &'static str) -> &'static str {
        match self {
            UrlShapeError::NotAbsolute => not_absolute,
            UrlShapeError::NotHttps => not_https,
            UrlShapeError::NoHost => "has no host",
            UrlShapeError::ExtraParts => "must not carry a user name, a password, a query or a fragment",
        }
    }
}

/// `given` parsed as an absolute `https` URL with a host and no user name, password, query or
/// fragment.
///
/// # Errors
/// The first [`UrlShapeError`] found.
pub fn plain_https_url(given: &str) -> Result<Url, UrlShapeError> {
    let url = Url::parse(given).map_err(|_| UrlShapeError::NotAbsolute)?;
    if url.scheme() != "https" {
        return Err(UrlShapeError::NotHttps);
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(UrlShapeError::NoHost);
    }
    if !url.username().is_empty()
        || url.password().is_some()
        || url.query().is_some()
        || url.fragment().is_some()
    {
        return Err(UrlShapeError::ExtraParts);
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_https_url_with_a_host_and_a_path_passes_and_each_other_shape_is_named() {
        let ok = plain_https_url("https://idp.example.com:8443/realms/corp/").unwrap();
        assert_eq!(ok.path(), "/realms/corp/");
        for (given, refusal) in [
            ("idp.example.com", UrlShapeError::NotAbsolute),
            ("", UrlShapeError::NotAbsolute),
            ("http://idp.example.com", UrlShapeError::NotHttps),
            ("file:///etc/passwd", UrlShapeError::NotHttps),
            ("https://", UrlShapeError::NotAbsolute),
            ("https://user@idp.example.com", UrlShapeError::ExtraParts),
            ("https://u:p@idp.example.com", UrlShapeError::ExtraParts),
            ("https://idp.example.com/?a=b", UrlShapeError::ExtraParts),
            ("https://idp.example.com/#f", UrlShapeError::ExtraParts),
        ] {
            assert_eq!(plain_https_url(given), Err(refusal), "{given:?}");
        }
        assert_eq!(
            UrlShapeError::NotHttps.problem("is not a URL", "must use https (why)"),
            "must use https (why)"
        );
        assert_eq!(UrlShapeError::NoHost.problem("a", "b"), "has no host");
    }
}
