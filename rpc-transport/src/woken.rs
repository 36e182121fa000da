//! A future polled only when it woke its task itself, not at every wake of the task
//! that holds it.
//!
//! A connection's task waits on its connection future and on its shutdown signals at
//! once (`tokio::select!`), and `select!` polls every branch at each wake. The
//! connection future wakes the task for every frame; the signals (four cancellation
//! tokens) almost never. Polling the tokens at each of those wakes — a lock of each
//! token's waiter list — cost about 500 instructions per unary call (callgrind,
//! `benches/instructions.sh`). futures' `FuturesUnordered` gives each future it holds a
//! waker of its own and polls a future only once that waker fired: a signal costs a
//! check of its ready queue until one fires.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

/// `F`, polled only after it woke its task (and once at the start).
pub(crate) struct PolledWhenWoken<F> {
    queue: FuturesUnordered<F>,
}

impl<F: Future> PolledWhenWoken<F> {
    /// Wraps `future`.
    pub(crate) fn new(future: F) -> Self {
        let queue = FuturesUnordered::new();
        queue.push(future);
        Self { queue }
    }
}

impl<F: Future> Future for PolledWhenWoken<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        match self.queue.poll_next_unpin(cx) {
            Poll::Ready(Some(output)) => Poll::Ready(output),
            // Polled again after its output, as a fused future would be: it never ends
            // twice.
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Waker;

    use tokio_util::sync::CancellationToken;

    use super::*;

    /// A future that counts its polls and is ready once `token` is cancelled.
    fn counted(token: CancellationToken, polls: Arc<AtomicUsize>) -> impl Future<Output = u8> {
        let mut wait = Box::pin(token.cancelled_owned());
        std::future::poll_fn(move |cx| {
            polls.fetch_add(1, Ordering::Relaxed);
            wait.as_mut().poll(cx).map(|()| 7)
        })
    }

    #[test]
    fn the_future_is_polled_only_when_it_woke_the_task() {
        let token = CancellationToken::new();
        let polls = Arc::new(AtomicUsize::new(0));
        let mut future = Box::pin(PolledWhenWoken::new(counted(token.clone(), polls.clone())));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(future.as_mut().poll(&mut cx).is_pending());
        assert_eq!(polls.load(Ordering::Relaxed), 1);
        // Wakes of the task by anything else: the future is not polled.
        for _ in 0..10 {
            assert!(future.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(polls.load(Ordering::Relaxed), 1);
        token.cancel();
        assert_eq!(future.as_mut().poll(&mut cx), Poll::Ready(7));
        assert_eq!(polls.load(Ordering::Relaxed), 2);
        assert!(future.as_mut().poll(&mut cx).is_pending());
    }
}
