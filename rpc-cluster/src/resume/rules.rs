//! Which methods are resumable, and what the resumed streams came to.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;

use super::ResumeRule;

/// The resumable methods of an application's references, by gRPC path
/// (`/feed.Feed/Subscribe`), each with its [`ResumeRule`]; and counts of what their
/// streams did. Shared (one `Arc`), and read on every call: with none declared, a call
/// pays one atomic load and a length check.
#[derive(Clone, Default)]
pub struct ResumableMethods {
    rules: Arc<ArcSwap<HashMap<String, Arc<dyn ResumeRule>>>>,
    counts: Arc<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    moved: AtomicU64,
    resumed: AtomicU64,
    not_resumed: AtomicU64,
}

/// What the resumable streams of one application did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResumeCounts {
    /// Streams a provider ended as moved.
    pub moved: u64,
    /// Moved streams re-opened on an instance that then answered: the caller's stream
    /// went on.
    pub resumed: u64,
    /// Moved streams whose caller got an end instead: the rule gave no request, the
    /// re-open failed, the deadline had passed, or the stream kept moving at once.
    pub not_resumed: u64,
}

impl ResumableMethods {
    /// Declares the method at `path` resumable with `rule` (replacing a rule it had).
    pub fn insert(&self, path: impl Into<String>, rule: Arc<dyn ResumeRule>) {
        let path = path.into();
        self.rules.rcu(|rules| {
            let mut rules = HashMap::clone(rules);
            rules.insert(path.clone(), rule.clone());
            rules
        });
    }

    /// Declares the method at `path` resumable with `rule` unless it has a rule already
    /// (configuration gives the default rule; a rule given in code wins).
    pub fn insert_if_absent(&self, path: impl Into<String>, rule: Arc<dyn ResumeRule>) {
        let path = path.into();
        self.rules.rcu(|rules| {
            let mut rules = HashMap::clone(rules);
            rules.entry(path.clone()).or_insert_with(|| rule.clone());
            rules
        });
    }

    /// The rule of the method at `path`, if it is resumable.
    pub fn get(&self, path: &str) -> Option<Arc<dyn ResumeRule>> {
        let rules = self.rules.load();
        if rules.is_empty() {
            return None;
        }
        rules.get(path).cloned()
    }

    /// The paths of the resumable methods, sorted.
    pub fn paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = self.rules.load().keys().cloned().collect();
        paths.sort();
        paths
    }

    /// What the resumable streams did so far.
    pub fn counts(&self) -> ResumeCounts {
        ResumeCounts {
            moved: self.counts.moved.load(Ordering::Relaxed),
            resumed: self.counts.resumed.load(Ordering::Relaxed),
            not_resumed: self.counts.not_resumed.load(Ordering::Relaxed),
        }
    }

    pub(super) fn note_moved(&self) {
        self.counts.moved.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn note_resumed(&self) {
        self.counts.resumed.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn note_not_resumed(&self) {
        self.counts.not_resumed.fetch_add(1, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for ResumableMethods {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResumableMethods")
            .field("paths", &self.paths())
            .field("counts", &self.counts())
            .finish()
    }
}
