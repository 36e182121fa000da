//! What the watches on one etcd member know of it together: how often and when one of
//! them last heard from it, and whether one of them is asking it for a progress
//! notification.
//!
//! A member cut off without a reset answers nothing, and a quiet watch cannot tell that
//! from a service nobody changes: it asks for a progress notification (`watch.rs`). The
//! answer proves the member's connection alive for every watch on it, so one check per
//! member is enough: a consumer following 50 services asked once a second per member,
//! not 50 times (issue 39).

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;
use tokio::time::Instant;

/// The watches' shared record of one member.
#[derive(Debug)]
pub(super) struct MemberHeard {
    last: watch::Sender<Heard>,
    /// A watch has asked the member for a progress notification and waits for it.
    checking: AtomicBool,
}

/// How many messages the watches on a member received from it, and when the last one.
#[derive(Clone, Copy, Debug)]
pub(super) struct Heard {
    /// Messages received, all watches together.
    pub(super) messages: u64,
    /// When the last one came (the member's creation before any).
    pub(super) at: Instant,
}

impl Default for MemberHeard {
    fn default() -> Self {
        Self {
            last: watch::Sender::new(Heard {
                messages: 0,
                at: Instant::now(),
            }),
            checking: AtomicBool::new(false),
        }
    }
}

impl MemberHeard {
    /// A watch on the member received a message now.
    pub(super) fn heard(&self) {
        self.last.send_modify(|heard| {
            heard.messages = heard.messages.wrapping_add(1);
            heard.at = Instant::now();
        });
    }

    /// What the watches heard of the member so far.
    pub(super) fn last(&self) -> Heard {
        *self.last.borrow()
    }

    /// Whether the caller is the one to ask the member now: true unless another watch's
    /// check is under way, until [`MemberHeard::end_check`].
    pub(super) fn begin_check(&self) -> bool {
        !self.checking.swap(true, Ordering::AcqRel)
    }

    /// The check begun by [`MemberHeard::begin_check`] is over (answered, or its watch
    /// gone).
    pub(super) fn end_check(&self) {
        self.checking.store(false, Ordering::Release);
    }

    /// Resolves once the watches on the member have received more than `messages`.
    pub(super) async fn heard_beyond(&self, messages: u64) {
        let mut last = self.last.subscribe();
        // The sender lives as long as `self`: the wait ends only by the condition.
        let _ = last.wait_for(|heard| heard.messages > messages).await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_watch_asks_at_a_time_and_any_message_answers_all() {
        let member = MemberHeard::default();
        assert!(member.begin_check(), "the first quiet watch asks");
        assert!(!member.begin_check(), "the others wait for its answer");
        let seen = member.last().messages;
        let waiting = member.heard_beyond(seen);
        tokio::pin!(waiting);
        assert!(
            tokio::time::timeout(Duration::from_secs(1), &mut waiting)
                .await
                .is_err()
        );
        member.heard();
        waiting.await;
        member.end_check();
        assert!(member.begin_check(), "the next quiet spell asks again");
    }

    #[tokio::test(start_paused = true)]
    async fn heard_tells_when_the_member_last_spoke() {
        let member = MemberHeard::default();
        tokio::time::advance(Duration::from_secs(3)).await;
        member.heard();
        let heard = member.last();
        assert_eq!(heard.messages, 1);
        assert_eq!(heard.at.elapsed(), Duration::ZERO);
    }
}
