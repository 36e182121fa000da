//! The query string of an endpoint that takes no parameter. A parameter there is a
//! mistake (a misspelt option, a `dry_run` that does not exist), and the endpoint must
//! not act as if it had not been given: the extractor answers 400 before the handler
//! runs.

use axum::extract::{FromRequestParts, Query};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::Response;
use serde::Deserialize;

use super::answer;

/// Extracted when the query string holds no parameter; otherwise the request gets a
/// one-line 400 naming the unknown field.
pub(crate) struct NoParameters;

/// No field: any parameter is an unknown field.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

impl<S: Send + Sync> FromRequestParts<S> for NoParameters {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Query::<Empty>::from_request_parts(parts, state).await {
            Ok(_) => Ok(NoParameters),
            Err(rejection) => Err(answer::line(StatusCode::BAD_REQUEST, rejection.body_text())),
        }
    }
}
