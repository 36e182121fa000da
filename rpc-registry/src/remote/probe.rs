//! Why a connect failed, when the client library does not say: ask the socket. And
//! which servers answer at all, for a library that would wait minutes on a silent one.
//!
//! The etcd client (tonic) keeps the socket error (`Connection refused`) in its error
//! chain, but zookeeper-client reports only `NoHosts` after trying every server, and nacos-sdk
//! retries a refused connection until the bound passes. Both would make a server that
//! is simply not running look like a network that drops packets ("no answer within 3s").
//! After such a failure one plain TCP connect per server tells the two apart: if every
//! server refuses, the cause was a refusal.

use std::time::Duration;

use rpc_core::{RegistryError, Unreachability};

/// Bound on each probe: a refusal comes back from the host in well under a millisecond
/// on a LAN; a server that does not answer in this time is not "refusing".
const PROBE_TIMEOUT: Duration = Duration::from_millis(300);

/// `error`, with its cause set to [`Unreachability::Refused`] when it is an
/// [`RegistryError::Unreachable`] of another cause and every one of `endpoints`
/// (`host:port`) refuses a TCP connection now.
pub(crate) async fn refine_unreachable(
    error: RegistryError,
    endpoints: &[String],
) -> RegistryError {
    match error {
        RegistryError::Unreachable {
            url,
            timeout,
            cause,
            source,
        } if cause != Unreachability::Refused => {
            let cause = if all_refuse(endpoints).await {
                Unreachability::Refused
            } else {
                cause
            };
            RegistryError::Unreachable {
                url,
                timeout,
                cause,
                source,
            }
        }
        other => other,
    }
}

/// Those of `endpoints` (`host:port`) that do not accept a TCP connection within
/// `bound` — refused, or silent (a host that drops packets) — in their order; every
/// endpoint is tried at once, so this takes at most `bound` (less when every one answers
/// sooner).
pub(crate) async fn not_accepting(endpoints: &[String], bound: Duration) -> Vec<String> {
    let attempts = endpoints.iter().map(|endpoint| async move {
        let attempt = tokio::time::timeout(bound, tokio::net::TcpStream::connect(endpoint)).await;
        (!matches!(attempt, Ok(Ok(_)))).then(|| endpoint.clone())
    });
    futures_util::future::join_all(attempts)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// Whether every endpoint refuses a TCP connection (false for none).
async fn all_refuse(endpoints: &[String]) -> bool {
    if endpoints.is_empty() {
        return false;
    }
    for endpoint in endpoints {
        let attempt =
            tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect(endpoint)).await;
        let refused = matches!(
            attempt,
            Ok(Err(ref error)) if error.kind() == std::io::ErrorKind::ConnectionRefused
        );
        if !refused {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unreachable(cause: Unreachability) -> RegistryError {
        RegistryError::Unreachable {
            url: "x://h".into(),
            timeout: Duration::from_secs(3),
            cause,
            source: "NoHosts".into(),
        }
    }

    fn cause(error: &RegistryError) -> Unreachability {
        match error {
            RegistryError::Unreachable { cause, .. } => *cause,
            other => panic!("{other}"),
        }
    }

    #[tokio::test]
    async fn a_closed_port_makes_the_cause_a_refusal_and_a_listener_does_not() {
        let closed = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().to_string()
        };
        let refined = refine_unreachable(unreachable(Unreachability::Failed), &[closed]).await;
        assert_eq!(cause(&refined), Unreachability::Refused);

        let open = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoints = [open.local_addr().unwrap().to_string()];
        let kept = refine_unreachable(unreachable(Unreachability::TimedOut), &endpoints).await;
        assert_eq!(cause(&kept), Unreachability::TimedOut);
        let none = refine_unreachable(unreachable(Unreachability::Failed), &[]).await;
        assert_eq!(cause(&none), Unreachability::Failed);
    }
}
