//! The response body of a watched call: lossless-rpc-core's [`GuardedBody`] holding a
//! [`CallEnd`], which turns how the body ended into the call's gRPC status code.

use rpc_core::{BodyEnd, BodyGuard, CallContext, GuardedBody};
use tokio::time::Instant;
use tonic::Code;

use super::{OnCallEnd, code_in_headers, code_when_dropped};

/// The body of a watched call: it tells its [`OnCallEnd`] when the call ends — at the
/// trailers (with their status), at an error or an end without trailers (`UNKNOWN`),
/// or when dropped before its end: `DEADLINE_EXCEEDED` once the served call's deadline
/// has passed (the provider's transport cuts a stream there), else `CANCELLED`.
pub type CallEndBody<B, E> = GuardedBody<B, CallEnd<E>>;

/// `body`, whose end `end` is told of (`None`: the call has ended already, or nobody
/// needs to know). Made inside a served call, it reads the call's deadline.
pub fn watch<B, E: OnCallEnd>(body: B, end: Option<E>) -> CallEndBody<B, E> {
    let end = end.map(|end| CallEnd {
        end,
        deadline: CallContext::current_deadline(),
    });
    GuardedBody::with(body, end)
}

/// The guard of a [`CallEndBody`]: an [`OnCallEnd`], told the status code the body
/// ended with.
#[derive(Debug)]
pub struct CallEnd<E> {
    end: E,
    /// The served call's deadline: a body dropped after it was cut there.
    deadline: Option<Instant>,
}

impl<E: OnCallEnd> BodyGuard for CallEnd<E> {
    fn body_ended(self, end: BodyEnd<'_>) -> Option<Self> {
        let code = match end {
            BodyEnd::Trailers(trailers) => code_in_headers(trailers).unwrap_or(Code::Unknown),
            BodyEnd::NoTrailers | BodyEnd::Error => Code::Unknown,
            BodyEnd::Dropped => code_when_dropped(self.deadline),
        };
        self.end.call_ended(code);
        None
    }

    fn in_scope<R>(&self, poll: impl FnOnce() -> R) -> R {
        self.end.in_scope(poll)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http_body::{Body, Frame};
    use http_body_util::BodyExt;
    use record::Ended;

    use super::*;

    /// Notes the code it was told, in a slot the test reads.
    mod record {
        use std::sync::{Arc, Mutex};

        use super::super::OnCallEnd;

        #[derive(Clone, Default)]
        pub(super) struct Ended(pub(super) Arc<Mutex<Vec<tonic::Code>>>);

        impl OnCallEnd for Ended {
            fn call_ended(self, code: tonic::Code) {
                self.0.lock().unwrap().push(code);
            }
        }
    }

    fn frames(
        frames: Vec<Frame<Bytes>>,
    ) -> impl Body<Data = Bytes, Error = std::convert::Infallible> {
        http_body_util::StreamBody::new(futures_util::stream::iter(
            frames.into_iter().map(Ok::<_, std::convert::Infallible>),
        ))
    }

    fn trailers(code: &'static str) -> Frame<Bytes> {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", code.parse().unwrap());
        Frame::trailers(trailers)
    }

    #[tokio::test]
    async fn the_call_ends_once_at_its_trailers_with_their_code() {
        let ended = Ended::default();
        let body = watch(
            frames(vec![Frame::data(Bytes::from_static(b"m")), trailers("5")]),
            Some(ended.clone()),
        );
        let mut body = Box::pin(body);
        body.frame().await.unwrap().unwrap();
        assert!(
            ended.0.lock().unwrap().is_empty(),
            "a message is not the end"
        );
        body.frame().await.unwrap().unwrap();
        assert_eq!(*ended.0.lock().unwrap(), [Code::NotFound]);
        assert!(body.frame().await.is_none());
        drop(body);
        assert_eq!(ended.0.lock().unwrap().len(), 1, "told once");
    }

    #[tokio::test]
    async fn a_body_dropped_early_is_cancelled_and_one_without_trailers_unknown() {
        let ended = Ended::default();
        let body = watch(
            frames(vec![Frame::data(Bytes::from_static(b"m"))]),
            Some(ended.clone()),
        );
        drop(body);
        let body = watch(
            frames(vec![Frame::data(Bytes::from_static(b"m"))]),
            Some(ended.clone()),
        );
        body.collect().await.unwrap();
        assert_eq!(*ended.0.lock().unwrap(), [Code::Cancelled, Code::Unknown]);
    }

    /// A served stream the provider's transport cut at its caller's deadline (it drops
    /// the body there) ended as DEADLINE_EXCEEDED, as the caller was told; one dropped
    /// before its deadline, as CANCELLED (the caller went away).
    #[tokio::test(start_paused = true)]
    async fn a_body_dropped_at_its_served_calls_deadline_ends_as_deadline_exceeded() {
        use std::time::Duration;

        let ended = Ended::default();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(5);
        let served = CallContext::new().with_deadline(deadline);
        let (early, late) = served
            .scope(async {
                let body = || {
                    watch(
                        frames(vec![Frame::data(Bytes::from_static(b"m"))]),
                        Some(ended.clone()),
                    )
                };
                (body(), body())
            })
            .await;
        drop(early);
        tokio::time::sleep(Duration::from_millis(5)).await;
        drop(late);
        assert_eq!(
            *ended.0.lock().unwrap(),
            [Code::Cancelled, Code::DeadlineExceeded]
        );
    }
}
