//! Which provided services are manually offline, as the request path reads it.
//!
//! Manual offline (`POST /offline` on the admin endpoint, `Lifecycle::offline` in
//! lossless-rpc-lifecycle) takes services out of traffic without stopping them: their
//! registrations are withdrawn and their responses carry the closing mark, so consumers
//! move away at once. The provider filter reads this set on every request, so the
//! common case — nothing offline — costs one atomic load, and the whole-instance
//! offline (every service) costs the same.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use parking_lot::RwLock;

/// Nothing is offline.
const NONE: u8 = 0;
/// Some services are offline: the names decide.
const SOME: u8 = 1;
/// Every provided service is offline.
const ALL: u8 = 2;

/// The set of provided services (by gRPC service name, `helloworld.Greeter`) that are
/// manually offline. Written by the lifecycle, read by the provider filter.
///
/// Cheap to clone (one `Arc`); all clones see the same set.
#[derive(Clone, Debug, Default)]
pub struct OfflineServices {
    state: Arc<OfflineState>,
}

#[derive(Debug, Default)]
struct OfflineState {
    /// [`NONE`], [`SOME`] or [`ALL`]: the fast path.
    scope: AtomicU8,
    /// The offline services' names; read only when `scope` is [`SOME`].
    names: RwLock<Vec<Arc<str>>>,
}

impl OfflineServices {
    /// An empty set: every service online.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a request for the gRPC `path` (`/helloworld.Greeter/SayHello`) is for a
    /// service that is offline now. One atomic load unless some, but not all, services
    /// are offline; then the path's service is looked up.
    pub fn covers(&self, path: &str) -> bool {
        match self.state.scope.load(Ordering::Acquire) {
            NONE => false,
            ALL => true,
            _ => {
                let service = service_of(path);
                self.state
                    .names
                    .read()
                    .iter()
                    .any(|name| **name == *service)
            }
        }
    }

    /// Whether the service `name` (`helloworld.Greeter`) is offline now: as
    /// [`OfflineServices::covers`], by name.
    pub fn covers_service(&self, name: &str) -> bool {
        match self.state.scope.load(Ordering::Acquire) {
            NONE => false,
            ALL => true,
            _ => self
                .state
                .names
                .read()
                .iter()
                .any(|offline| **offline == *name),
        }
    }

    /// Whether every provided service is offline (one atomic load).
    pub fn all(&self) -> bool {
        self.state.scope.load(Ordering::Acquire) == ALL
    }

    /// Whether any service is offline (one atomic load).
    pub fn any(&self) -> bool {
        self.state.scope.load(Ordering::Acquire) != NONE
    }

    /// The offline services' names, sorted.
    pub fn names(&self) -> Vec<Arc<str>> {
        let mut names = self.state.names.read().clone();
        names.sort();
        names
    }

    /// Replaces the set with `names`; `provided` is how many services the application
    /// provides, so that "all of them" takes the fast path. Written by the lifecycle
    /// (a manual offline or online) only.
    pub fn set(&self, mut names: Vec<Arc<str>>, provided: usize) {
        names.sort();
        names.dedup();
        let scope = match names.len() {
            0 => NONE,
            n if n >= provided => ALL,
            _ => SOME,
        };
        let mut current = self.state.names.write();
        *current = names;
        // Under the lock, so that a reader that sees SOME finds the names written.
        self.state.scope.store(scope, Ordering::Release);
    }
}

/// The service part of a gRPC path: `helloworld.Greeter` in
/// `/helloworld.Greeter/SayHello`.
pub(crate) fn service_of(path: &str) -> &str {
    let path = path.strip_prefix('/').unwrap_or(path);
    path.split('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<Arc<str>> {
        list.iter().map(|name| Arc::from(*name)).collect()
    }

    #[test]
    fn nothing_is_offline_at_first() {
        let offline = OfflineServices::new();
        assert!(!offline.any());
        assert!(!offline.all());
        assert!(!offline.covers("/helloworld.Greeter/SayHello"));
    }

    #[test]
    fn a_subset_covers_only_its_services_paths() {
        let offline = OfflineServices::new();
        offline.set(names(&["helloworld.Greeter"]), 2);
        assert!(offline.any());
        assert!(!offline.all());
        assert!(offline.covers("/helloworld.Greeter/SayHello"));
        assert!(!offline.covers("/echo.Echo/Echo"));
        assert!(!offline.covers("/helloworld.GreeterAdmin/SayHello"));
        assert!(!offline.covers("garbage"));
    }

    #[test]
    fn every_service_takes_the_fast_path_and_clones_share_the_set() {
        let offline = OfflineServices::new();
        let reader = offline.clone();
        offline.set(names(&["echo.Echo", "helloworld.Greeter"]), 2);
        assert!(reader.all());
        assert!(reader.covers("/anything/At"));
        offline.set(Vec::new(), 2);
        assert!(!reader.any());
        assert_eq!(reader.names(), Vec::<Arc<str>>::new());
    }

    #[test]
    fn the_service_of_a_path() {
        assert_eq!(service_of("/a.B/C"), "a.B");
        assert_eq!(service_of("a.B/C"), "a.B");
        assert_eq!(service_of("/"), "");
    }
}
