//! How a balancer spread its calls: each provider's share of the calls it answered, by
//! the address its echo reply names (the testkit's echo answers with its own address).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

/// Calls answered per provider, counted as they complete.
#[derive(Debug)]
pub struct ProviderShares {
    addresses: Vec<String>,
    /// One count per address, then one for replies that named none of them.
    counts: Vec<AtomicU64>,
}

impl ProviderShares {
    /// Counts for the providers at `addresses`.
    pub fn new(addresses: &[SocketAddr]) -> Self {
        Self {
            addresses: addresses.iter().map(SocketAddr::to_string).collect(),
            counts: (0..=addresses.len()).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// One call answered by `provider` (as its reply names it).
    pub fn note(&self, provider: &str) {
        let index = self
            .addresses
            .iter()
            .position(|address| address == provider)
            .unwrap_or(self.addresses.len());
        self.counts[index].fetch_add(1, Ordering::Relaxed);
    }

    /// Each provider's share of the calls counted since the last call, in percent, in
    /// the order of the addresses (an unnamed one last, if any); the counts restart.
    pub fn take_percentages(&self) -> String {
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|count| count.swap(0, Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum::<u64>().max(1);
        let unnamed = counts[self.addresses.len()];
        let mut shares: Vec<String> = counts[..self.addresses.len()]
            .iter()
            .map(|count| format!("{:.1}", *count as f64 * 100.0 / total as f64))
            .collect();
        if unnamed > 0 {
            shares.push(format!("unnamed {unnamed}"));
        }
        shares.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_percentages_of_what_was_counted_and_restart() {
        let addresses: Vec<SocketAddr> = ["127.0.0.1:1", "127.0.0.1:2"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        let shares = ProviderShares::new(&addresses);
        for provider in ["127.0.0.1:1", "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:1"] {
            shares.note(provider);
        }
        assert_eq!(shares.take_percentages(), "75.0 25.0");
        shares.note("elsewhere");
        assert_eq!(shares.take_percentages(), "0.0 0.0 unnamed 1");
    }
}
