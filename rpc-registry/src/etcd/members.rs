//! Which member of the etcd cluster a request goes to: the members of the URL in turn
//! (round robin), those that just failed a request last, and on to the next member at
//! once when one cannot be reached.
//!
//! Why not tonic's balanced channel (`Channel::balance_list`, what etcd-client used):
//! its endpoints connect lazily and a member that is down stays in the balancer, which
//! goes on giving it requests that fail with its connect error. With one of two members
//! down, a quarter of the connects and a third of the registrations through it failed.
//! etcd's own client sends only over connections that are up; here a request that could
//! not reach a member is sent to the next one, and that member is tried last for a
//! while, [`SET_ASIDE`] after its first failure, twice as long after each further one up
//! to [`MAX_SET_ASIDE`], so a member that stays down costs an attempt now and then, not
//! one per request. That matters most for a member that does not answer at all (a host
//! gone, packets dropped): an attempt at it lasts until the caller's bound, so it fails
//! that request. A member that refuses connections costs nothing but a quick retry.
//!
//! Every request of this backend may be sent twice: reads, puts of the same value under
//! the same lease, deletes and revocations give the same result again, and a lease
//! granted by an answer that was lost expires by itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint};

use crate::etcd::member_heard::MemberHeard;

/// How long a member whose request failed (or was abandoned unanswered) is tried only
/// after the others, after its first failure in a row.
pub(super) const SET_ASIDE: Duration = Duration::from_secs(2);
/// The longest a member is set aside, however often it failed.
pub(super) const MAX_SET_ASIDE: Duration = Duration::from_secs(30);

/// The members of one etcd cluster, one lazily connected channel each.
pub(super) struct Members {
    members: Vec<Member>,
    /// Where the next request's round starts.
    next: AtomicUsize,
}

struct Member {
    /// Connected on its first request, and again after a lost connection.
    channel: Channel,
    /// Whether, and until when, it is tried after the others.
    set_aside: Mutex<SetAside>,
    /// What the watches on it heard of it (one progress check per member).
    heard: Arc<MemberHeard>,
}

/// A member's recent failures.
#[derive(Default)]
struct SetAside {
    /// Until when it is tried after the others.
    until: Option<Instant>,
    /// Attempts that failed since the last one that reached etcd.
    failures: u32,
}

impl Members {
    /// The members behind `endpoints`, none connected yet.
    pub(super) fn new(endpoints: Vec<Endpoint>) -> Self {
        Self {
            members: endpoints
                .into_iter()
                .map(|endpoint| Member {
                    channel: endpoint.connect_lazy(),
                    set_aside: Mutex::new(SetAside::default()),
                    heard: Arc::default(),
                })
                .collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// The order in which one request tries the members: each in turn from where the
    /// last request started plus one, those set aside last.
    pub(super) fn order(&self) -> Vec<usize> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let set_aside: Vec<bool> = self
            .members
            .iter()
            .map(|member| {
                member
                    .set_aside
                    .lock()
                    .until
                    .is_some_and(|until| until > now)
            })
            .collect();
        round(start, &set_aside)
    }

    /// An attempt at the member `index` (from [`Members::order`]): unless it is marked
    /// [`reached`](Attempt::reached), the member is set aside when the attempt ends,
    /// also when it is dropped unanswered (the caller's bound ran out).
    pub(super) fn attempt(&self, index: usize) -> Option<Attempt<'_>> {
        self.members.get(index).map(|member| Attempt {
            member,
            reached: false,
        })
    }
}

/// One request's attempt at one member.
pub(super) struct Attempt<'a> {
    member: &'a Member,
    reached: bool,
}

impl Attempt<'_> {
    /// The member's channel.
    pub(super) fn channel(&self) -> Channel {
        self.member.channel.clone()
    }

    /// What the watches on the member heard of it.
    pub(super) fn heard(&self) -> Arc<MemberHeard> {
        self.member.heard.clone()
    }

    /// etcd answered through this member (whatever it said): it is no longer set aside.
    pub(super) fn reached(mut self) {
        self.reached = true;
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        let mut set_aside = self.member.set_aside.lock();
        if self.reached {
            *set_aside = SetAside::default();
        } else {
            set_aside.failures = set_aside.failures.saturating_add(1);
            set_aside.until = Some(Instant::now() + set_aside_for(set_aside.failures));
        }
    }
}

/// How long a member is set aside after `failures` failures in a row (at least one).
fn set_aside_for(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    SET_ASIDE.saturating_mul(1 << doublings).min(MAX_SET_ASIDE)
}

/// The indexes `0..set_aside.len()` rotated to begin at `start` (modulo the length),
/// those whose `set_aside` is true moved to the end in the same rotation.
fn round(start: usize, set_aside: &[bool]) -> Vec<usize> {
    let count = set_aside.len();
    if count == 0 {
        return Vec::new();
    }
    let (mut first, last): (Vec<usize>, Vec<usize>) = (0..count)
        .map(|k| (start % count + k) % count)
        .partition(|&index| !set_aside[index]);
    first.extend(last);
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_take_turns_and_members_set_aside_come_last() {
        assert_eq!(round(0, &[false, false, false]), [0, 1, 2]);
        assert_eq!(round(1, &[false, false, false]), [1, 2, 0]);
        assert_eq!(round(5, &[false, false, false]), [2, 0, 1]);
        assert_eq!(round(usize::MAX, &[false, false]), [1, 0]);
        assert_eq!(round(0, &[true, false, false]), [1, 2, 0]);
        assert_eq!(round(2, &[false, true, false]), [2, 0, 1]);
        // All set aside: all are still tried, in turn.
        assert_eq!(round(1, &[true, true]), [1, 0]);
        assert!(round(3, &[]).is_empty());
    }

    #[test]
    fn a_member_failing_again_is_set_aside_longer_up_to_a_bound() {
        let durations: Vec<u64> = (1..=6).map(|n| set_aside_for(n).as_secs()).collect();
        assert_eq!(durations, [2, 4, 8, 16, 30, 30]);
        assert_eq!(set_aside_for(u32::MAX), MAX_SET_ASIDE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_member_is_set_aside_after_a_failed_or_abandoned_attempt_until_it_answers() {
        let endpoint = |port| Endpoint::from_shared(format!("http://127.0.0.1:{port}")).unwrap();
        let members = Members::new(vec![endpoint(1), endpoint(2)]);
        assert_eq!(members.order(), [0, 1]);
        assert_eq!(members.order(), [1, 0]);

        drop(members.attempt(0)); // failed, or dropped by the caller's bound
        assert_eq!(members.order(), [1, 0]);
        assert_eq!(members.order(), [1, 0]);
        tokio::time::advance(SET_ASIDE).await;
        assert_eq!(members.order(), [0, 1]);

        drop(members.attempt(1));
        assert_eq!(members.order(), [0, 1]);
        drop(members.attempt(1)); // a second failure in a row: set aside twice as long
        tokio::time::advance(SET_ASIDE).await;
        assert_eq!(members.order(), [0, 1]);
        assert_eq!(members.order(), [0, 1]); // its turn first, but still set aside
        if let Some(attempt) = members.attempt(1) {
            attempt.reached();
        }
        assert_eq!(members.order(), [0, 1]);
        assert_eq!(members.order(), [1, 0]); // its turn first, and no longer set aside
        assert!(members.attempt(2).is_none());
    }
}
