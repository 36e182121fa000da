//! The delays between attempts to register again a registration that failed: doubling
//! from [`FIRST_DELAY`] up to [`LONGEST_DELAY`], each drawn at random between half its
//! value and its value ("equal jitter"), so that the providers of a fleet that all lost
//! their registry at once do not all come back at the same instant.
//!
//! Longer than the registry clients' own retries (100 ms doubling to 1 s, which ask one
//! server again for their sessions): these register whole instances again through
//! every client of a process, after a failed upgrade, for as long as it takes.

use std::time::Duration;

/// The delay before the first retry.
pub(crate) const FIRST_DELAY: Duration = Duration::from_millis(100);
/// The longest delay between two retries: once the registry is back, a pending
/// registration holds within this long.
pub(crate) const LONGEST_DELAY: Duration = Duration::from_secs(5);

/// Jittered, doubling delays, from [`FIRST_DELAY`] to [`LONGEST_DELAY`].
#[derive(Debug)]
pub(crate) struct RetryDelays {
    next: Duration,
}

impl RetryDelays {
    pub(crate) fn new() -> Self {
        Self { next: FIRST_DELAY }
    }

    /// The next delay: between half the current bound and the bound, which then doubles
    /// (up to [`LONGEST_DELAY`]).
    pub(crate) fn next_delay(&mut self) -> Duration {
        let bound = self.next;
        self.next = (self.next * 2).min(LONGEST_DELAY);
        let half = bound / 2;
        half + half.mul_f64(fastrand::f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_longest_each_jittered_within_its_upper_half() {
        let mut delays = RetryDelays::new();
        let bounds = [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000];
        for bound in bounds.map(Duration::from_millis) {
            let delay = delays.next_delay();
            assert!(
                delay >= bound / 2 && delay <= bound,
                "{delay:?} outside {:?}..={bound:?}",
                bound / 2
            );
        }
    }
}
