//! The token rule: a request that changes state (offline, online, shutdown, upgrade) carries
//! `Authorization: Bearer <admin.token>` when a token is configured; one that reads
//! never needs it. Nothing that changes state is routed for GET, so the token is the
//! only thing standing between a reachable port and a stopped instance.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::Response;

use super::answer;
use super::state::AdminState;

/// Proof that the request may change state: the first argument of every handler that
/// does. Refused with 401 and a one-line reason otherwise.
pub(crate) struct Authorized;

impl FromRequestParts<AdminState> for Authorized {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AdminState,
    ) -> Result<Self, Self::Rejection> {
        let Some(expected) = state.token.as_deref() else {
            return Ok(Authorized);
        };
        let given = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        match given {
            Some(token) if same(token.trim().as_bytes(), expected.as_bytes()) => Ok(Authorized),
            Some(_) => Err(refuse("wrong admin token")),
            None => Err(refuse(
                "this request changes state: send `Authorization: Bearer <admin.token>`",
            )),
        }
    }
}

fn refuse(reason: &str) -> Response {
    let mut response = answer::line(StatusCode::UNAUTHORIZED, reason);
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        axum::http::HeaderValue::from_static("Bearer"),
    );
    response
}

/// Compares in time independent of where the first difference is, so the answer's
/// timing does not reveal how much of a guess was right.
fn same(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"s3cret", b"s3cret"));
        assert!(!same(b"s3cres", b"s3cret"));
        assert!(!same(b"s3cre", b"s3cret"));
        assert!(!same(b"", b"s3cret"));
    }
}
