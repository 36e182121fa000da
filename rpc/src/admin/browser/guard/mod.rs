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
mod tests;
