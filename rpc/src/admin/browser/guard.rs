//! The guard in front of every admin endpoint: the three rules, in the order a request
//! meets them, before any handler runs — so a refused request changes nothing.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, Uri, Version, header};
use axum::middleware::Next;
use axum::response::Response;

use super::host::{AllowedHosts, Authority};
use super::refusal::{Refusals, Refused, Rule};
use super::{origin, post};

/// What the guard knows: the names `Host` may give besides IP addresses and
/// `localhost`, which paths it leaves alone, which change state, and where it counts
/// refusals. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct BrowserGuard {
    allowed_hosts: AllowedHosts,
    /// The probes: Kubernetes and load balancers call them with whatever headers they
    /// like, and they only read.
    exempt: &'static [&'static str],
    /// The endpoints a POST changes state at.
    changing: &'static [&'static str],
    refusals: Refusals,
}

impl BrowserGuard {
    pub(crate) fn new(
        allowed_hosts: AllowedHosts,
        exempt: &'static [&'static str],
        changing: &'static [&'static str],
        refusals: Refusals,
    ) -> Self {
        Self {
            allowed_hosts,
            exempt,
            changing,
            refusals,
        }
    }

    /// Whether the request (`method`, `uri`, `version`, `headers`) may reach its
    /// handler; why not, in one line.
    pub(crate) fn check(
        &self,
        method: &Method,
        uri: &Uri,
        version: Version,
        headers: &HeaderMap,
    ) -> Result<(), Refused> {
        let path = uri.path();
        if self.exempt.contains(&path) {
            return Ok(());
        }
        // 1. DNS rebinding: the Host (and an absolute target) must name this endpoint.
        let target = target_host(uri)?;
        let host = own_host(target.clone(), version, headers)?;
        self.check_host(host.as_ref())?;
        self.check_host(target.as_ref())?;
        // 2. Cross-origin: a page's Origin must be this endpoint.
        check_origin(headers, host.as_ref())?;
        // 3. A changing POST: no body a page may send unasked, and proof it is no page.
        if method == Method::POST && self.changing.contains(&path) {
            check_post(method, path, headers)?;
        }
        Ok(())
    }

    fn check_host(&self, host: Option<&Authority<'_>>) -> Result<(), Refused> {
        match host {
            Some(host) if !self.allowed_hosts.allow(host) => Err(Refused::new(
                Rule::ForeignHost,
                format!(
                    "Host `{host}` does not name this endpoint (refused against DNS rebinding): \
                     use an IP address or localhost, or list the name in admin.allowed_hosts"
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// The middleware: the request goes on to its handler if [`BrowserGuard::check`]
/// passes it, else it is answered with the refusal (counted, logged once per rule).
pub(crate) async fn refuse_forgeries(
    State(guard): State<BrowserGuard>,
    request: Request,
    next: Next,
) -> Response {
    let checked = guard.check(
        request.method(),
        request.uri(),
        request.version(),
        request.headers(),
    );
    match checked {
        Ok(()) => next.run(request).await,
        Err(refused) => guard
            .refusals
            .answer(refused, request.method(), request.uri().path()),
    }
}

/// The host an absolute request target (`http://host:port/path`) names, without its
/// user part; `None` for the usual `/path`.
fn target_host(uri: &Uri) -> Result<Option<Authority<'_>>, Refused> {
    let Some(authority) = uri.authority() else {
        return Ok(None);
    };
    let text = authority.as_str();
    let host = text.rsplit_once('@').map_or(text, |(_, host)| host);
    Authority::parse(host).map(Some).ok_or_else(|| {
        Refused::new(
            Rule::BadHost,
            format!("the request target's `{host}` is not a name with an optional port"),
        )
    })
}

/// The endpoint as the request names it: its one `Host` header, else the `target`'s
/// host. HTTP/1.1 requires one (400 without it); HTTP/1.0 may name none, and then no
/// `Origin` can be this endpoint's.
fn own_host<'a>(
    target: Option<Authority<'a>>,
    version: Version,
    headers: &'a HeaderMap,
) -> Result<Option<Authority<'a>>, Refused> {
    let bad = |reason: String| Refused::new(Rule::BadHost, reason);
    let mut hosts = headers.get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => Err(bad("more than one Host header".to_owned())),
        (Some(value), None) => {
            let text = value.to_str().unwrap_or_default();
            Authority::parse(text)
                .map(Some)
                .ok_or_else(|| bad(format!("Host `{text}` is not a name with an optional port")))
        }
        (None, _) if target.is_some() || version <= Version::HTTP_10 => Ok(target),
        (None, _) => Err(bad("no Host header: HTTP/1.1 requires one".to_owned())),
    }
}

/// Refuses an `Origin` that is not `http://` and the request's own `host`.
fn check_origin(headers: &HeaderMap, host: Option<&Authority<'_>>) -> Result<(), Refused> {
    let mut origins = headers.get_all(header::ORIGIN).iter();
    let Some(first) = origins.next() else {
        return Ok(());
    };
    let origin = first.to_str().unwrap_or_default();
    if origins.next().is_none() && origin::is_same(origin, host) {
        return Ok(());
    }
    let own = host.map_or_else(String::new, |host| format!(" (http://{host})"));
    Err(Refused::new(
        Rule::ForeignOrigin,
        format!(
            "Origin `{origin}` is not this endpoint{own}: the admin endpoint answers no other \
             web page"
        ),
    ))
}

/// Refuses a changing POST with a body of a simple content type (415), or one from a
/// browser without `X-Rpc-Admin` or a bearer token (403).
fn check_post(method: &Method, path: &str, headers: &HeaderMap) -> Result<(), Refused> {
    if let Some(simple) = post::simple_content_type(headers) {
        return Err(Refused::new(
            Rule::SimpleContentType,
            format!(
                "{method} {path} takes no body: Content-Type {simple} is refused (a web page \
                 may send it unasked); send no body"
            ),
        ));
    }
    if !post::is_not_from_a_page(headers) {
        return Err(Refused::new(
            Rule::BrowserPost,
            format!(
                "{method} {path} from a browser must carry `X-Rpc-Admin: 1` (or \
                 `Authorization: Bearer <admin.token>`), which a web page cannot add unasked"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
    fn check(
        guard: &BrowserGuard,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Option<Rule> {
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
}
