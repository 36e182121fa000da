//! A future polled only when it woke its task itself, not at every wake of the task
//! that holds it.
//!
//! A connection's task waits on its connection future and on its shutdown signals at
//! once (`tokio::select!`), and `select!` polls every branch at each wake. The
//! connection future wakes the task for every frame; the signals (four cancellation
//! tokens) almost never. Polling the tokens at each of those wakes — a lock of each
//! token's waiter list — cost about 500 instructions per unary call (callgrind,
//! `benches/instructions.sh`). The future is given a waker of its own, which notes that
//! it fired and wakes the task; at the task's other wakes a signal costs one atomic swap.
//!
//! The future stays inline in the task that holds it (futures' `FuturesUnordered`, used
//! here before, kept it in a task of its own beside a stub of the same size: two heap
//! blocks of ~900 bytes per connection, held as long as the connection is open).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;
use pin_project_lite::pin_project;

pin_project! {
    /// `F`, polled only after it woke its task (and once at the start).
    pub(crate) struct PolledWhenWoken<F> {
        #[pin]
        future: F,
        wake: Arc<WakeOfOne>,
        waker: Waker,
        done: bool,
    }
}

/// The waker given to the wrapped future: it notes that it fired and wakes the task
/// that polls the wrapper.
struct WakeOfOne {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for WakeOfOne {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl<F: Future> PolledWhenWoken<F> {
    /// Wraps `future`.
    pub(crate) fn new(future: F) -> Self {
        // Woken at the start: the first poll polls the future.
        let wake = Arc::new(WakeOfOne {
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        Self {
            future,
            waker: Waker::from(wake.clone()),
            wake,
            done: false,
        }
    }
}

impl<F: Future> Future for PolledWhenWoken<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        // Registered before the flag is read: a wake between the two is not lost.
        this.wake.task.register(cx.waker());
        // Polled again after its output, as a fused future would be: it never ends twice.
        if *this.done || !this.wake.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        let output = this.future.poll(&mut Context::from_waker(this.waker));
        if output.is_ready() {
            *this.done = true;
        }
        output
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

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
