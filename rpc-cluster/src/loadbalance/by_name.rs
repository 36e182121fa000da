//! Load balances by name: the door through which a reference's configured
//! `loadbalance` becomes a [`LoadBalance`] — for the built-in ones and for an
//! application's own alike.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::{ConsistentHash, LeastActive, LoadBalance, P2c, Random, RoundRobin};
use crate::config::LoadBalanceKind;

/// Builds a fresh load balance for one reference (a load balance may keep state per
/// reference, as round-robin and consistent hashing do).
pub type LoadBalanceFactory = Arc<dyn Fn() -> Arc<dyn LoadBalance> + Send + Sync>;

/// The load balances a reference can name, by name. [`LoadBalances::default`] holds the
/// built-in ones, registered through [`LoadBalances::register`] as an application's own
/// are; registering a name again replaces what it names.
#[derive(Clone)]
pub struct LoadBalances {
    factories: BTreeMap<String, LoadBalanceFactory>,
}

/// A reference names a load balance nobody registered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("names no load balance: `{name}` is not registered (known: {known})")]
pub struct UnknownLoadBalance {
    /// The name configured.
    pub name: String,
    /// The names registered, comma-separated.
    pub known: String,
}

impl LoadBalances {
    /// No load balance at all (not even the built-in ones).
    pub fn empty() -> Self {
        Self {
            factories: BTreeMap::new(),
        }
    }

    /// Registers `factory` under `name` (for `loadbalance: <name>` in a reference's
    /// configuration, or [`LoadBalanceKind::Custom`]).
    pub fn register(
        &mut self,
        name: impl Into<String>,
        factory: impl Fn() -> Arc<dyn LoadBalance> + Send + Sync + 'static,
    ) -> &mut Self {
        self.factories.insert(name.into(), Arc::new(factory));
        self
    }

    /// A new load balance of `kind`, for one reference.
    ///
    /// # Errors
    /// [`UnknownLoadBalance`] when no load balance is registered under its name.
    pub fn build(
        &self,
        kind: &LoadBalanceKind,
    ) -> Result<Arc<dyn LoadBalance>, UnknownLoadBalance> {
        match self.factories.get(kind.name()) {
            Some(factory) => Ok(factory()),
            None => Err(UnknownLoadBalance {
                name: kind.name().to_owned(),
                known: self.names().collect::<Vec<_>>().join(", "),
            }),
        }
    }

    /// The registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.factories.keys().map(String::as_str)
    }
}

impl Default for LoadBalances {
    /// The built-in load balances: `random`, `round_robin`, `p2c`, `least_active`,
    /// `consistent_hash`.
    fn default() -> Self {
        // Each by its own name: the test below checks these are `BUILT_IN`, all of them.
        let mut load_balances = Self::empty();
        load_balances
            .register(LoadBalanceKind::Random.name(), || Arc::new(Random))
            .register(LoadBalanceKind::RoundRobin.name(), || {
                Arc::new(RoundRobin::default())
            })
            .register(LoadBalanceKind::P2c.name(), || Arc::new(P2c))
            .register(LoadBalanceKind::LeastActive.name(), || {
                Arc::new(LeastActive)
            })
            .register(LoadBalanceKind::ConsistentHash.name(), || {
                Arc::new(ConsistentHash::default())
            });
        load_balances
    }
}

impl fmt::Debug for LoadBalances {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;

    use super::*;
    use crate::loadbalance::{Candidates, RequestInfo};

    /// Always the last selectable candidate.
    #[derive(Debug)]
    struct Last;

    impl LoadBalance for Last {
        fn select(
            &self,
            candidates: &Candidates<'_>,
            _request: &RequestInfo<'_>,
            _rng: &mut SmallRng,
        ) -> Option<usize> {
            candidates.selectable().last()
        }
    }

    #[test]
    fn built_in_and_registered_names_build_and_unknown_ones_are_named() {
        let mut load_balances = LoadBalances::default();
        for kind in LoadBalanceKind::BUILT_IN {
            assert!(load_balances.build(&kind).is_ok(), "{kind}");
        }
        let mut built_in: Vec<_> = LoadBalanceKind::BUILT_IN.iter().map(|k| k.name()).collect();
        built_in.sort_unstable();
        assert_eq!(
            load_balances.names().collect::<Vec<_>>(),
            built_in,
            "no other"
        );
        let custom = LoadBalanceKind::from_name("last").unwrap();
        let error = load_balances.build(&custom).unwrap_err();
        assert_eq!(error.name, "last");
        assert!(error.known.contains("p2c"), "{error}");
        load_balances.register("last", || Arc::new(Last));
        assert!(load_balances.build(&custom).is_ok());
    }
}
