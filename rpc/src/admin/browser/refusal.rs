//! A refused request: why (a rule, and a one-line reason), the answer it gets, and the
//! count of each rule's refusals that `GET /status` shows. A page that keeps trying
//! must not flood the log: the first refusal of each rule is logged at info, the
//! rest at debug; the counts say how many there were.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde::Serialize;

use super::super::answer;

/// The rule a request broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// HTTP/1.1 without `Host`, with two, or with one that is no host name.
    BadHost,
    /// A `Host` that does not name this endpoint (DNS rebinding).
    ForeignHost,
    /// An `Origin` that is not this endpoint.
    ForeignOrigin,
    /// A changing POST with a body of a simple content type.
    SimpleContentType,
    /// A changing POST from a browser without a header that proves it is no page.
    BrowserPost,
}

impl Rule {
    fn status(self) -> StatusCode {
        match self {
            Rule::BadHost => StatusCode::BAD_REQUEST,
            Rule::ForeignHost | Rule::ForeignOrigin | Rule::BrowserPost => StatusCode::FORBIDDEN,
            Rule::SimpleContentType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        }
    }

    /// Its place in [`Refusals`]' counts.
    fn index(self) -> usize {
        self as usize
    }
}

/// Why a request was refused before any handler ran.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refused {
    pub(crate) rule: Rule,
    /// One line, for the answer and the log.
    pub(crate) reason: String,
}

impl Refused {
    pub(crate) fn new(rule: Rule, reason: impl Into<String>) -> Self {
        Self {
            rule,
            reason: reason.into(),
        }
    }
}

/// How many requests each rule refused, since the endpoint started. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub(crate) struct Refusals {
    /// One count per [`Rule`], by [`Rule::index`].
    counts: Arc<[AtomicU64; 5]>,
}

/// The counts as `GET /status` shows them (`browser_refusals`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct RefusalCounts {
    pub(crate) bad_host: u64,
    pub(crate) foreign_host: u64,
    pub(crate) foreign_origin: u64,
    pub(crate) simple_content_type: u64,
    pub(crate) browser_post: u64,
}

impl Refusals {
    /// Counts and logs `refused` (a `method` on `path`) and answers it: its status
    /// with its one-line reason.
    pub(crate) fn answer(&self, refused: Refused, method: &Method, path: &str) -> Response {
        let before = self.counts[refused.rule.index()].fetch_add(1, Ordering::Relaxed);
        let reason = &refused.reason;
        if before == 0 {
            tracing::info!(%method, path, reason, "admin endpoint: refused a request a web page could have sent (logged once per rule; later ones at debug, counted in /status)");
        } else {
            tracing::debug!(%method, path, reason, "admin endpoint: refused");
        }
        answer::line(refused.rule.status(), reason)
    }

    /// The counts, now.
    pub(crate) fn counts(&self) -> RefusalCounts {
        let count = |rule: Rule| self.counts[rule.index()].load(Ordering::Relaxed);
        RefusalCounts {
            bad_host: count(Rule::BadHost),
            foreign_host: count(Rule::ForeignHost),
            foreign_origin: count(Rule::ForeignOrigin),
            simple_content_type: count(Rule::SimpleContentType),
            browser_post: count(Rule::BrowserPost),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_is_counted_under_its_rule_and_answered_with_its_status() {
        let refusals = Refusals::default();
        let answer = refusals.answer(
            Refused::new(Rule::SimpleContentType, "no body"),
            &Method::POST,
            "/offline",
        );
        assert_eq!(answer.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        for _ in 0..2 {
            let answer = refusals.clone().answer(
                Refused::new(Rule::ForeignOrigin, "foreign"),
                &Method::POST,
                "/shutdown",
            );
            assert_eq!(answer.status(), StatusCode::FORBIDDEN);
        }
        let counts = refusals.counts();
        assert_eq!(counts.simple_content_type, 1);
        assert_eq!(counts.foreign_origin, 2, "clones share the counts");
        assert_eq!(
            counts.foreign_host + counts.bad_host + counts.browser_post,
            0
        );
        assert_eq!(Rule::BadHost.status(), StatusCode::BAD_REQUEST);
    }
}
