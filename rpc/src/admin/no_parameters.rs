//! The query string of an endpoint that takes no parameter. A parameter there is a
//! mistake (a misspelt option, a `dry_run` that does not exist), and the endpoint must
//! not act as if it had not been given: it answers 400 and does nothing.

use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;

use super::answer;

/// No field: any parameter is an unknown field.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoParameters {}

/// The 400 to answer when the query string held a parameter; `None` when it held none.
pub(crate) fn refusal(query: Result<Query<NoParameters>, QueryRejection>) -> Option<Response> {
    query
        .err()
        .map(|rejection| answer::line(StatusCode::BAD_REQUEST, rejection.body_text()))
}
