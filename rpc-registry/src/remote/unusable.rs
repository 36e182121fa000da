//! Entries a subscription found and could not use (written by a foreign peer: a URL that
//! does not parse, a protocol we do not speak, no port): each is logged once and counted
//! once, and skipped, so that a bad entry never hides the good ones beside it.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Bound on the places remembered as logged; past it the memory starts again (an entry
/// then may be logged and counted a second time), so a registry full of churning bad
/// entries cannot grow it without end.
const REMEMBERED: usize = 4096;

/// The unusable entries one client has seen (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct UnusableEntries {
    /// Entries skipped, each once.
    skipped: AtomicU64,
    /// Where each skipped entry is (its key, its node path), to log it once.
    logged: Mutex<HashSet<String>>,
}

impl UnusableEntries {
    /// Notes that the entry at `place` of the registry `url` cannot be used because of
    /// `reason`: logged and counted the first time.
    pub(crate) fn skip(&self, url: &str, place: &str, reason: &str) {
        let mut logged = self.logged.lock();
        if logged.contains(place) {
            return;
        }
        if logged.len() >= REMEMBERED {
            logged.clear();
        }
        logged.insert(place.to_owned());
        drop(logged);
        self.skipped.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%url, entry = %place, %reason, "skipping a registry entry that cannot be used");
    }

    /// How many entries were skipped.
    pub(crate) fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_entry_is_counted_once() {
        let unusable = UnusableEntries::default();
        unusable.skip("zookeeper://h", "/a/1", "no port");
        unusable.skip("zookeeper://h", "/a/1", "no port");
        unusable.skip("zookeeper://h", "/a/2", "no port");
        assert_eq!(unusable.skipped(), 2);
    }
}
