//! The `Origin` rule: a browser names, in `Origin`, the page a request comes from — on
//! every POST, and on every cross-origin request of a script. The admin endpoint serves
//! no page that calls another origin and grants no CORS, so the only origin it answers
//! is its own: `http://` and the request's own `Host`. Anything else (another port of
//! 127.0.0.1 is another origin; `null` is a sandboxed or local page) is a web page
//! trying to drive it.

use super::host::Authority;

/// Whether `origin` (an `Origin` header) is the endpoint itself, reached as `host`
/// (the request's own `Host`): scheme `http`, and the same name and port, compared
/// ignoring case with 80 for an absent port. Without a `host` nothing is the same.
pub(crate) fn is_same(origin: &str, host: Option<&Authority<'_>>) -> bool {
    let Some(host) = host else {
        return false;
    };
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    scheme.eq_ignore_ascii_case("http")
        && Authority::parse(authority).is_some_and(|origin| origin.same_as(host))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(origin: &str, host: &str) -> bool {
        is_same(origin, Authority::parse(host).as_ref())
    }

    #[test]
    fn the_endpoint_itself_is_its_own_origin() {
        assert!(same("http://127.0.0.1:22222", "127.0.0.1:22222"));
        assert!(same("HTTP://LocalHost:22222", "localhost:22222"));
        assert!(same("http://[::1]:22222", "[::1]:22222"));
        assert!(same("http://127.0.0.1", "127.0.0.1:80"));
    }

    #[test]
    fn another_port_scheme_or_name_is_foreign() {
        assert!(
            !same("http://127.0.0.1:8080", "127.0.0.1:22222"),
            "another port"
        );
        assert!(
            !same("https://127.0.0.1:22222", "127.0.0.1:22222"),
            "another scheme"
        );
        assert!(!same("http://evil.example", "127.0.0.1:22222"));
        assert!(
            !same("http://localhost:22222", "127.0.0.1:22222"),
            "another name"
        );
        assert!(
            !same("null", "127.0.0.1:22222"),
            "a sandboxed or local page"
        );
        assert!(
            !same("http://127.0.0.1:22222/", "127.0.0.1:22222"),
            "not an origin"
        );
        assert!(!same("", "127.0.0.1:22222"));
        assert!(
            !is_same("http://127.0.0.1:22222", None),
            "no Host to compare with"
        );
    }
}
