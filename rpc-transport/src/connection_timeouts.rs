//! A connection's own reasons to close, apart from the server's signals: its peer has
//! not sent the HTTP/2 preface by the deadline, or the connection has carried no call
//! for the idle timeout.
//!
//! Both are timers of the connection's own task, armed once: no lock, and nothing per
//! request beyond the mark a call leaves on its connection (`peer.rs`).

use std::time::Duration;

use tokio::time::Instant;

use super::peer::Peer;
use super::socket::Progress;

/// The limits of one connection, fixed when it is accepted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// When the peer must have sent the whole preface (accept + `preface_timeout`).
    pub(crate) preface_deadline: Instant,
    /// How long the connection may carry no call; `None`: for ever.
    pub(crate) idle_timeout: Option<Duration>,
}

/// Resolves at `deadline` if the peer has not sent the whole preface by then; never
/// otherwise.
pub(crate) async fn preface_late(progress: &Progress, deadline: Instant) {
    tokio::time::sleep_until(deadline).await;
    if progress.sent_preface() {
        std::future::pending::<()>().await;
    }
}

/// Resolves once the connection has carried no call for `timeout`; never for `None`.
///
/// The timer does not restart at each call (that would cost every call a timer reset):
/// it waits until no call is in flight, then one period, and resolves if no call began
/// meanwhile — else it waits again. So a connection closes between one and two periods
/// after its last call ended, never sooner than one.
pub(crate) async fn idle_for(peer: &Peer, timeout: Option<Duration>) {
    let Some(timeout) = timeout else {
        return std::future::pending().await;
    };
    loop {
        peer.forget_calls();
        peer.idle().await;
        tokio::time::sleep(timeout).await;
        if !peer.called() && peer.calls_in_flight() == 0 {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::socket::PREFACE;

    const PERIOD: Duration = Duration::from_secs(300);

    #[tokio::test(start_paused = true)]
    async fn a_preface_short_by_one_byte_is_late_and_a_whole_one_never() {
        let deadline = Instant::now() + Duration::from_secs(10);
        let partial = Progress::default();
        partial.note(PREFACE.len() - 1);
        preface_late(&partial, deadline).await;
        assert_eq!(Instant::now(), deadline);

        let whole = Progress::default();
        whole.note(PREFACE.len());
        let never = tokio::time::timeout(Duration::from_secs(3600), preface_late(&whole, deadline));
        assert!(never.await.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_one_period_after_its_last_call() {
        let peer = Arc::new(Peer::default());
        let started = Instant::now();
        let call = peer.call_for_test();
        let idle = tokio::spawn({
            let peer = peer.clone();
            async move {
                idle_for(&peer, Some(PERIOD)).await;
                Instant::now()
            }
        });
        // A call in flight for three periods: never idle meanwhile.
        tokio::time::sleep(3 * PERIOD).await;
        assert!(!idle.is_finished());
        drop(call);
        let ended = Instant::now();
        let idle_at = idle.await.unwrap();
        assert_eq!(idle_at - ended, PERIOD);
        assert_eq!(idle_at - started, 4 * PERIOD);
    }

    #[tokio::test(start_paused = true)]
    async fn calls_that_come_and_go_keep_a_connection_from_being_idle() {
        let peer = Arc::new(Peer::default());
        let idle = tokio::spawn({
            let peer = peer.clone();
            async move { idle_for(&peer, Some(PERIOD)).await }
        });
        for _ in 0..10 {
            tokio::time::sleep(PERIOD / 2).await;
            drop(peer.call_for_test());
        }
        assert!(!idle.is_finished(), "a call every half period");
        let last_call = Instant::now();
        idle.await.unwrap();
        let waited = Instant::now() - last_call;
        assert!(
            waited >= PERIOD && waited <= 2 * PERIOD,
            "idle {waited:?} after the last call"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_timeout_a_connection_is_never_idle() {
        let peer = Peer::default();
        let never = tokio::time::timeout(100 * PERIOD, idle_for(&peer, None));
        assert!(never.await.is_err());
    }
}
