//! Safe from the browser: no web page can drive the admin endpoint.
//!
//! The endpoint listens on loopback and, there, needs no token — so any page open in a
//! browser on the same host could reach it: `fetch("http://127.0.0.1:22222/shutdown",
//! {method: "POST", mode: "no-cors"})` needs no permission (the page cannot read the
//! answer, but the POST is sent), and a page on a domain made to resolve to 127.0.0.1
//! (DNS rebinding) is, to the browser, reading its own origin. Three rules, checked by
//! one middleware ([`guard`]) before any handler runs, close both doors:
//!
//! 1. **Origin** ([`origin`]): a request whose `Origin` is not the endpoint itself
//!    (`http://` and its own `Host`) is refused with 403.
//! 2. **Host** ([`host`]): a `Host` that is not an IP address, `localhost`, or a name in
//!    `admin.allowed_hosts` is refused with 403 (DNS rebinding); HTTP/1.1 without one
//!    gets 400.
//! 3. **POST** ([`post`]): a POST that changes state must carry a header no page can
//!    add without a CORS preflight (`X-Rpc-Admin`, any value, or `Authorization:
//!    Bearer ...`), or none of the headers every browser adds to a POST (`Origin`,
//!    `Sec-Fetch-Site`, `Sec-Fetch-Mode`) — so `curl -X POST` works as it always did;
//!    a body of a CORS "simple" content type is refused with 415 (the changing
//!    endpoints take none).
//!
//! The endpoint never grants a preflight (no `Access-Control-Allow-*` header is ever
//! sent; `OPTIONS` is a 405), so nothing a page may send passes rule 3. The probes
//! (`/live`, `/ready`, `/startup`) are left alone: kubelets and load balancers call
//! them with any headers, and they only read. The token rule (`auth.rs`) applies on
//! top, unchanged. Each refusal is a one-line 4xx, counted in `GET /status`
//! (`browser_refusals`) and logged once per rule at info, then at debug
//! ([`refusal`]).
//!
//! The same defences as Django's `ALLOWED_HOSTS` and Jupyter's `local_hostnames` (the
//! `Host` rule) and Go's `http.CrossOriginProtection` (a request with neither `Origin`
//! nor `Sec-Fetch-Site` comes from no browser), over what the Fetch standard lets a page
//! send unasked (its CORS-safelisted methods, headers and content types).

mod guard;
mod host;
mod origin;
mod post;
mod refusal;

pub(crate) use guard::{BrowserGuard, refuse_forgeries};
pub(crate) use host::AllowedHosts;
pub(crate) use refusal::{RefusalCounts, Refusals};
