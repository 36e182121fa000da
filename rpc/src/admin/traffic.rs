//! `POST /offline` and `POST /online` `[?service=REGEX]`: manual traffic control with
//! Dubbo QoS semantics, carried out by the lifecycle
//! ([`Lifecycle::offline`](rpc_lifecycle::Lifecycle::offline)); this file only reads the
//! selection and formats the answer.
//!
//! `REGEX` must match a provided service's whole gRPC name (`helloworld.Greeter`) or
//! its whole key (`group/helloworld.Greeter:1.0.0`), as Dubbo's QoS matches; without
//! it every provided service is selected. Answers: 200 with what changed (JSON), 400
//! for a bad regex or an unknown parameter, 404 when nothing provided matches (naming
//! the selection and what is provided), 409 during start-up or shutdown (saying why).

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use regex::Regex;
use rpc_core::ServiceKey;
use rpc_lifecycle::{TrafficChange, TrafficError};
use serde::{Deserialize, Serialize};

use super::answer;
use super::auth::Authorized;
use super::no_body::NoBody;
use super::state::AdminState;

/// Largest compiled selection regex, in bytes: a selection names a few services, and an
/// absurd pattern must cost a 400, not memory.
const REGEX_SIZE_LIMIT: usize = 1 << 16;

/// The query string of `/offline` and `/online`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Selection {
    /// A regex the whole service name or key must match; absent: every service.
    service: Option<String>,
}

/// What a change answers.
#[derive(Serialize)]
struct Changed {
    /// `offline` or `online`.
    action: &'static str,
    /// The services whose traffic changed, each with the registries concerned.
    changed: Vec<ChangedService>,
    /// The services offline after the change.
    offline_now: Vec<String>,
}

#[derive(Serialize)]
struct ChangedService {
    service: String,
    registries: Vec<String>,
    failed: Vec<FailedRegistry>,
}

#[derive(Serialize)]
struct FailedRegistry {
    registry: String,
    error: String,
}

/// Which change is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Offline,
    Online,
}

impl Action {
    fn name(self) -> &'static str {
        match self {
            Action::Offline => "offline",
            Action::Online => "online",
        }
    }
}

/// `POST /offline`.
pub(crate) async fn offline(
    _: Authorized,
    _: NoBody,
    State(state): State<AdminState>,
    query: Result<Query<Selection>, QueryRejection>,
) -> Response {
    change(Action::Offline, &state, query).await
}

/// `POST /online`.
pub(crate) async fn online(
    _: Authorized,
    _: NoBody,
    State(state): State<AdminState>,
    query: Result<Query<Selection>, QueryRejection>,
) -> Response {
    change(Action::Online, &state, query).await
}

/// Reads the selection, has the lifecycle carry out `action`, and formats its answer.
async fn change(
    action: Action,
    state: &AdminState,
    query: Result<Query<Selection>, QueryRejection>,
) -> Response {
    let selection = match query {
        Ok(Query(selection)) => selection,
        Err(rejection) => return answer::line(StatusCode::BAD_REQUEST, rejection.body_text()),
    };
    let pattern = selection.service;
    let select: Box<dyn Fn(&ServiceKey) -> bool + Send + Sync> = match &pattern {
        None => Box::new(|_| true),
        Some(pattern) => match whole_match(pattern) {
            Ok(regex) => Box::new(move |key| {
                regex.is_match(&key.interface) || regex.is_match(&key.to_string())
            }),
            Err(error) => {
                return answer::line(
                    StatusCode::BAD_REQUEST,
                    format!("service: `{pattern}` is not a valid regex: {}", why(&error)),
                );
            }
        },
    };
    let lifecycle = &state.lifecycle;
    let result = match action {
        Action::Offline => lifecycle.offline(select).await,
        Action::Online => lifecycle.online(select).await,
    };
    let action = action.name();
    match result {
        Ok(changes) => answer::json(
            StatusCode::OK,
            &Changed {
                action,
                changed: changes.into_iter().map(ChangedService::from).collect(),
                offline_now: state
                    .lifecycle
                    .offline_services()
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
            },
        ),
        Err(error @ TrafficError::NoMatch { .. }) => {
            let selection = pattern.map_or_else(
                || "any service".to_owned(),
                |pattern| format!("service `{pattern}`"),
            );
            answer::line(
                StatusCode::NOT_FOUND,
                format!("{action}: {selection}: {error}"),
            )
        }
        Err(error) => answer::line(StatusCode::CONFLICT, format!("{action} refused: {error}")),
    }
}

/// `pattern` anchored at both ends, with a bound on its compiled size. `pattern` is
/// checked on its own first: only a pattern whose groups balance is wrapped, so none
/// can close the anchoring group early (`a)|(b`).
fn whole_match(pattern: &str) -> Result<Regex, regex::Error> {
    let build = |pattern: &str| {
        regex::RegexBuilder::new(pattern)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
    };
    build(pattern)?;
    build(&format!("^(?:{pattern})$"))
}

/// The gist of a regex error in one line: a syntax error's last line (`unclosed
/// group`), without the drawing of the pattern above it.
fn why(error: &regex::Error) -> String {
    let text = error.to_string();
    let last = text.lines().last().unwrap_or_default().trim();
    last.strip_prefix("error: ").unwrap_or(last).to_owned()
}

impl From<TrafficChange> for ChangedService {
    fn from(change: TrafficChange) -> Self {
        Self {
            service: change.service.to_string(),
            registries: change.registries,
            failed: change
                .failed
                .into_iter()
                .map(|(registry, error)| FailedRegistry { registry, error })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selection_matches_whole_names_only() {
        let regex = whole_match("helloworld.Greeter").unwrap();
        assert!(regex.is_match("helloworld.Greeter"));
        assert!(!regex.is_match("helloworld.GreeterAdmin"));
        assert!(!regex.is_match("x.helloworld.Greeter"));
        assert!(
            whole_match(".*Greeter")
                .unwrap()
                .is_match("helloworld.Greeter")
        );
        // An alternation stays inside the anchors.
        let either = whole_match("a.B|c.D").unwrap();
        assert!(either.is_match("c.D") && !either.is_match("c.DD"));
    }

    #[test]
    fn a_regex_error_is_told_in_one_line() {
        let error = whole_match("helloworld.(Greeter").unwrap_err();
        assert_eq!(why(&error), "unclosed group");
        let huge = whole_match("[a-z]{1000}{1000}").unwrap_err();
        assert!(why(&huge).contains("size limit"), "{}", why(&huge));
    }

    #[test]
    fn a_bad_or_huge_regex_is_an_error_not_a_panic() {
        assert!(whole_match("helloworld.(Greeter").is_err());
        assert!(whole_match("[a-z]{1000}{1000}").is_err());
        // A `)` cannot close the anchoring group early.
        assert!(whole_match("a)|(b").is_err());
    }
}
