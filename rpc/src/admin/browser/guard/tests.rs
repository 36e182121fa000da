use axum::http::{Request, StatusCode};

use super::*;

const PROBES: &[&str] = &["/live", "/ready", "/startup"];
const CHANGING: &[&str] = &["/offline", "/online", "/shutdown", "/upgrade"];

fn guard(allowed: &[&str]) -> BrowserGuard {
    let allowed: Vec<String> = allowed.iter().map(|name| (*name).to_owned()).collect();
    BrowserGuard::new(
        AllowedHosts::parse(&allowed).unwrap(),
        PROBES,
        CHANGING,
        Refusals::default(),
    )
}

/// `method path` with `headers`, as HTTP/1.1, through `guard`: the rule that
/// refused it, if one did.
fn check(guard: &BrowserGuard, method: &str, path: &str, headers: &[(&str, &str)]) -> Option<Rule> {
    let mut request = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(()).unwrap();
    guard
        .check(
            request.method(),
            request.uri(),
            request.version(),
            request.headers(),
        )
        .err()
        .map(|refused| {
            assert!(
                !refused.reason.contains('\n'),
                "one line: {}",
                refused.reason
            );
            refused.rule
        })
}

const HOST: (&str, &str) = ("host", "127.0.0.1:22222");

#[test]
fn an_origin_of_another_port_or_name_is_foreign() {
    let guard = guard(&[]);
    for origin in [
        "http://127.0.0.1:8080",
        "http://evil.example",
        "null",
        "https://127.0.0.1:22222",
    ] {
        assert_eq!(
            check(&guard, "GET", "/status", &[HOST, ("origin", origin)]),
            Some(Rule::ForeignOrigin),
            "{origin}"
        );
    }
    assert_eq!(
        check(
            &guard,
            "GET",
            "/status",
            &[HOST, ("origin", "http://127.0.0.1:22222")]
        ),
        None
    );
    assert_eq!(
        check(&guard, "GET", "/status", &[HOST]),
        None,
        "no Origin: not a cross-origin page"
    );
    // Two Origins: not one that is this endpoint.
    assert_eq!(
        check(
            &guard,
            "GET",
            "/",
            &[
                HOST,
                ("origin", "http://127.0.0.1:22222"),
                ("origin", "http://evil.example")
            ]
        ),
        Some(Rule::ForeignOrigin)
    );
}

#[test]
fn a_host_must_be_an_ip_literal_localhost_or_allowed() {
    let plain = guard(&[]);
    for host in [
        "127.0.0.1:22222",
        "[::1]:22222",
        "localhost:22222",
        "LOCALHOST",
    ] {
        assert_eq!(
            check(&plain, "GET", "/status", &[("host", host)]),
            None,
            "{host}"
        );
    }
    for host in [
        "evil.example",
        "rebind.example:22222",
        "greeter.internal:22222",
    ] {
        assert_eq!(
            check(&plain, "GET", "/status", &[("host", host)]),
            Some(Rule::ForeignHost),
            "{host}"
        );
    }
    let configured = guard(&["greeter.internal"]);
    assert_eq!(
        check(
            &configured,
            "GET",
            "/status",
            &[("host", "greeter.internal:22222")]
        ),
        None
    );
    assert_eq!(
        check(&configured, "GET", "/metrics", &[("host", "evil.example")]),
        Some(Rule::ForeignHost)
    );
    // The same origin under an allowed name.
    assert_eq!(
        check(
            &configured,
            "POST",
            "/offline",
            &[
                ("host", "Greeter.Internal:22222"),
                ("origin", "http://greeter.internal:22222"),
                ("x-rpc-admin", "1")
            ]
        ),
        None
    );
}

#[test]
fn http_1_1_needs_exactly_one_host_that_is_a_host_name() {
    let guard = guard(&[]);
    assert_eq!(check(&guard, "GET", "/status", &[]), Some(Rule::BadHost));
    assert_eq!(
        check(&guard, "GET", "/status", &[HOST, ("host", "evil.example")]),
        Some(Rule::BadHost)
    );
    assert_eq!(
        check(&guard, "GET", "/status", &[("host", "a b")]),
        Some(Rule::BadHost)
    );
    // HTTP/1.0 may name no host; an absolute target names it instead.
    let old = Request::builder()
        .uri("/status")
        .version(Version::HTTP_10)
        .body(())
        .unwrap();
    assert!(
        guard
            .check(old.method(), old.uri(), old.version(), old.headers())
            .is_ok()
    );
    assert_eq!(
        check(&guard, "GET", "http://127.0.0.1:22222/status", &[]),
        None
    );
    assert_eq!(
        check(&guard, "GET", "http://rebind.example:22222/status", &[HOST]),
        Some(Rule::ForeignHost),
        "the target's authority is checked too"
    );
    assert_eq!(
        check(
            &guard,
            "GET",
            "http://127.0.0.1@rebind.example/status",
            &[HOST]
        ),
        Some(Rule::ForeignHost),
        "without its user part"
    );
}

#[test]
fn a_post_from_a_browser_needs_a_header_no_page_can_add() {
    let guard = guard(&[]);
    for path in CHANGING {
        assert_eq!(
            check(&guard, "POST", path, &[HOST]),
            None,
            "curl -X POST {path}"
        );
        assert_eq!(
            check(
                &guard,
                "POST",
                path,
                &[
                    HOST,
                    ("sec-fetch-mode", "no-cors"),
                    ("sec-fetch-site", "same-site")
                ]
            ),
            Some(Rule::BrowserPost),
            "{path}"
        );
        assert_eq!(
            check(
                &guard,
                "POST",
                path,
                &[HOST, ("origin", "http://127.0.0.1:22222")]
            ),
            Some(Rule::BrowserPost),
            "same origin, no custom header: {path}"
        );
        assert_eq!(
            check(
                &guard,
                "POST",
                path,
                &[
                    HOST,
                    ("origin", "http://127.0.0.1:22222"),
                    ("sec-fetch-mode", "cors"),
                    ("x-rpc-admin", "1")
                ]
            ),
            None,
            "{path}"
        );
        assert_eq!(
            check(
                &guard,
                "POST",
                path,
                &[
                    HOST,
                    ("sec-fetch-site", "same-origin"),
                    ("authorization", "Bearer t")
                ]
            ),
            None,
            "{path}"
        );
    }
}

#[test]
fn a_changing_post_with_a_simple_content_type_is_refused() {
    let guard = guard(&[]);
    for content_type in [
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        assert_eq!(
            check(
                &guard,
                "POST",
                "/shutdown",
                &[HOST, ("content-type", content_type), ("x-rpc-admin", "1")]
            ),
            Some(Rule::SimpleContentType),
            "{content_type}"
        );
    }
    assert_eq!(
        check(
            &guard,
            "POST",
            "/shutdown",
            &[HOST, ("content-type", "application/json")]
        ),
        None
    );
}

#[test]
fn the_probes_are_exempt() {
    let guard = guard(&[]);
    for probe in PROBES {
        let headers = [
            ("host", "rebind.example:22222"),
            ("origin", "http://evil.example"),
            ("sec-fetch-mode", "no-cors"),
        ];
        assert_eq!(check(&guard, "GET", probe, &headers), None, "{probe}");
        assert_eq!(
            check(&guard, "GET", probe, &[]),
            None,
            "{probe} without Host"
        );
    }
    assert_eq!(
        check(&guard, "GET", "/live/x", &[("host", "rebind.example")]),
        Some(Rule::ForeignHost),
        "only the probes themselves"
    );
}

#[test]
fn a_refusal_is_answered_with_its_status_and_counted() {
    let guard = guard(&[]);
    let refused = Refused::new(Rule::BrowserPost, "x");
    let answer = guard.refusals.answer(refused, &Method::POST, "/offline");
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);
    assert_eq!(guard.refusals.counts().browser_post, 1);
}
