//! The rules for a POST that changes state. A web page can send a POST anywhere without
//! asking (`fetch(url, {method: "POST", mode: "no-cors"})`, a form) as long as it keeps
//! to a "simple" request: no header of its own, and a body of one of the three simple
//! content types. Anything more needs a CORS preflight, which this endpoint never grants.
//! So a changing POST must either carry a header no page can add unasked
//! (`Authorization: Bearer ...`, or [`PROOF_HEADER`]), or show none of the headers
//! every current browser adds to a POST (`Origin`, `Sec-Fetch-Site`, `Sec-Fetch-Mode`):
//! `curl -X POST` sends none of them and works unchanged. And since the changing
//! endpoints take no body, a body of a simple content type is refused outright.

use axum::http::{HeaderMap, header};

/// The header that proves a request does not come from a web page: any value will do,
/// since a page cannot send it to another origin without a preflight.
pub(crate) const PROOF_HEADER: &str = "x-rpc-admin";

/// The headers every current browser adds to a POST; a client without any of them is
/// not a browser.
const BROWSER_HEADERS: [&str; 3] = ["origin", "sec-fetch-site", "sec-fetch-mode"];

/// The content types a page may POST across origins without a preflight (the Fetch
/// standard's CORS-safelisted `Content-Type` values).
const SIMPLE_CONTENT_TYPES: [&str; 3] = [
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data",
];

/// The simple content type `headers` declare, if they declare one (its parameters,
/// `;charset=UTF-8` or a form's boundary, are ignored).
pub(crate) fn simple_content_type(headers: &HeaderMap) -> Option<&'static str> {
    headers
        .get_all(header::CONTENT_TYPE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(|value| {
            let essence = value.split(';').next().unwrap_or_default().trim();
            SIMPLE_CONTENT_TYPES
                .into_iter()
                .find(|simple| essence.eq_ignore_ascii_case(simple))
        })
}

/// Whether a POST with `headers` shows it does not come from a web page: it carries
/// a bearer token or [`PROOF_HEADER`], or none of the headers browsers add.
pub(crate) fn is_not_from_a_page(headers: &HeaderMap) -> bool {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value
                .get(..7)
                .is_some_and(|scheme| scheme.eq_ignore_ascii_case("bearer "))
        });
    bearer
        || headers.contains_key(PROOF_HEADER)
        || !BROWSER_HEADERS
            .iter()
            .any(|name| headers.contains_key(*name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| {
                (
                    header::HeaderName::from_static(name),
                    header::HeaderValue::from_static(value),
                )
            })
            .collect()
    }

    #[test]
    fn a_plain_client_or_a_proven_one_is_not_a_page() {
        assert!(is_not_from_a_page(&headers(&[])), "what curl -X POST sends");
        assert!(is_not_from_a_page(&headers(&[(
            "user-agent",
            "curl/8.5.0"
        )])));
        assert!(is_not_from_a_page(&headers(&[
            ("origin", "http://127.0.0.1:22222"),
            ("sec-fetch-site", "same-origin"),
            ("x-rpc-admin", "1"),
        ])));
        assert!(is_not_from_a_page(&headers(&[
            ("sec-fetch-mode", "cors"),
            ("authorization", "Bearer s3cret"),
        ])));
    }

    #[test]
    fn a_browser_post_without_a_custom_header_is_a_page() {
        assert!(!is_not_from_a_page(&headers(&[(
            "sec-fetch-mode",
            "no-cors"
        )])));
        assert!(!is_not_from_a_page(&headers(&[(
            "sec-fetch-site",
            "cross-site"
        )])));
        assert!(!is_not_from_a_page(&headers(&[(
            "origin",
            "http://127.0.0.1:22222"
        )])));
        // Basic credentials a browser may attach from a URL are no proof.
        assert!(!is_not_from_a_page(&headers(&[
            ("origin", "http://evil.example"),
            ("authorization", "Basic dTpw"),
        ])));
    }

    #[test]
    fn the_three_simple_content_types_are_found_whatever_their_parameters() {
        for value in [
            "text/plain",
            "text/plain;charset=UTF-8",
            "Application/X-WWW-Form-Urlencoded",
            "multipart/form-data; boundary=----x",
        ] {
            let mut map = HeaderMap::new();
            map.insert(header::CONTENT_TYPE, value.parse().unwrap());
            assert!(simple_content_type(&map).is_some(), "{value}");
        }
        for value in ["application/json", "text/plainx", "text/html"] {
            let mut map = HeaderMap::new();
            map.insert(header::CONTENT_TYPE, value.parse().unwrap());
            assert_eq!(simple_content_type(&map), None, "{value}");
        }
        assert_eq!(simple_content_type(&HeaderMap::new()), None);
    }
}
