//! Bounded waits and retry delays shared by the network backends.
//!
//! Every request a backend sends is bounded (the `Registry` contract: an unreachable server
//! gives an error, never a hang), and every background loop that lost its server retries
//! with a short capped backoff, so that a registry that comes back is used again within
//! about a second, without hammering one that stays down.

use std::future::Future;
use std::time::Duration;

use rpc_core::{BoxError, RegistryError, Unreachability};
use tokio_util::sync::CancellationToken;

/// First delay after a failure.
const INITIAL_DELAY: Duration = Duration::from_millis(100);
/// Longest delay between two attempts: bounds how long after the server's return a
/// background loop notices it.
const MAX_DELAY: Duration = Duration::from_secs(1);

/// Doubling delays from 100 ms up to 1 s; [`Backoff::reset`] after a success.
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
}

impl Backoff {
    pub(crate) fn new() -> Self {
        Self {
            next: INITIAL_DELAY,
        }
    }

    /// Starts again from the shortest delay.
    pub(crate) fn reset(&mut self) {
        self.next = INITIAL_DELAY;
    }

    /// Waits for the next delay; `false` when `cancel` fired first (stop retrying).
    pub(crate) async fn wait(&mut self, cancel: &CancellationToken) -> bool {
        let delay = self.next;
        self.next = (self.next * 2).min(MAX_DELAY);
        tokio::select! {
            () = cancel.cancelled() => false,
            () = tokio::time::sleep(delay) => true,
        }
    }
}

/// Why a bounded request failed: it did not answer in time, or it answered with an error.
#[derive(Debug)]
pub(crate) enum Failure<E> {
    /// No answer within the bound.
    TimedOut(Duration),
    /// The client library's error.
    Failed(E),
}

impl<E: Into<BoxError>> Failure<E> {
    /// The error as a [`RegistryError::Operation`] of `operation` on `url`.
    pub(crate) fn into_operation(self, url: &str, operation: &'static str) -> RegistryError {
        RegistryError::Operation {
            url: url.to_owned(),
            operation,
            source: self.into_source(),
        }
    }

    /// The error of a failed attempt to connect to `url`: a [`RegistryError::Operation`]
    /// of `connect` when the server answered and `refused` says the answer was a refusal
    /// (e.g. bad credentials), else [`RegistryError::Unreachable`] saying what happened:
    /// the connection was refused (nothing listens there), no answer came within
    /// `timeout`, or the attempt failed otherwise.
    pub(crate) fn into_connect_error(
        self,
        url: &str,
        timeout: Duration,
        refused: impl Fn(&E) -> bool,
    ) -> RegistryError {
        match self {
            Self::Failed(error) if refused(&error) => {
                Self::Failed(error).into_operation(url, "connect")
            }
            failure => {
                let timed_out = matches!(failure, Self::TimedOut(_));
                let source = failure.into_source();
                let cause = if timed_out {
                    Unreachability::TimedOut
                } else {
                    Unreachability::of(&*source)
                };
                RegistryError::Unreachable {
                    url: url.to_owned(),
                    timeout,
                    cause,
                    source,
                }
            }
        }
    }

    /// The error as a boxed source.
    pub(crate) fn into_source(self) -> BoxError {
        match self {
            Self::TimedOut(bound) => format!("no answer within {bound:?}").into(),
            Self::Failed(error) => error.into(),
        }
    }
}

/// Runs `request`, giving up after `bound`.
pub(crate) async fn bounded<T, E>(
    bound: Duration,
    request: impl Future<Output = Result<T, E>>,
) -> Result<T, Failure<E>> {
    match tokio::time::timeout(bound, request).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(Failure::Failed(error)),
        Err(_) => Err(Failure::TimedOut(bound)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn delays_double_up_to_the_cap_and_reset() {
        let cancel = CancellationToken::new();
        let mut backoff = Backoff::new();
        let mut delays = Vec::new();
        for _ in 0..6 {
            let start = tokio::time::Instant::now();
            assert!(backoff.wait(&cancel).await);
            delays.push(start.elapsed().as_millis());
        }
        assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
        backoff.reset();
        let start = tokio::time::Instant::now();
        assert!(backoff.wait(&cancel).await);
        assert_eq!(start.elapsed(), INITIAL_DELAY);
    }

    #[tokio::test]
    async fn a_cancelled_wait_says_stop() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert!(!Backoff::new().wait(&cancel).await);
    }

    #[test]
    fn a_refusal_is_an_operation_error_and_the_rest_unreachable() {
        let bound = Duration::from_secs(3);
        let refused = |error: &String| error == "no";
        let failure = Failure::Failed("no".to_owned());
        assert!(matches!(
            failure.into_connect_error("x://h", bound, refused),
            RegistryError::Operation {
                operation: "connect",
                ..
            }
        ));
        for failure in [Failure::Failed("down".to_owned()), Failure::TimedOut(bound)] {
            assert!(matches!(
                failure.into_connect_error("x://h", bound, refused),
                RegistryError::Unreachable { timeout, .. } if timeout == bound
            ));
        }
        // Issue 15: what happened, not only the bound.
        let causes = [
            Failure::Failed("tcp connect error: Connection refused".to_owned()),
            Failure::TimedOut(bound),
            Failure::Failed("down".to_owned()),
        ]
        .map(
            |failure| match failure.into_connect_error("x://h", bound, refused) {
                RegistryError::Unreachable { cause, .. } => cause,
                other => panic!("{other}"),
            },
        );
        assert_eq!(
            causes,
            [
                Unreachability::Refused,
                Unreachability::TimedOut,
                Unreachability::Failed
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn bounded_requests_time_out_and_name_the_bound() {
        let slow = bounded(
            Duration::from_secs(2),
            std::future::pending::<Result<(), BoxError>>(),
        )
        .await;
        let error = slow
            .unwrap_err()
            .into_operation("etcd://h", "register")
            .to_string();
        assert!(
            error.contains("register failed: no answer within 2s"),
            "{error}"
        );
    }
}
