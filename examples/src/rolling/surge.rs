//! The order of a restart, as Kubernetes' rolling update decides it: `--max-surge` (how
//! many instances may run above the desired count) and `--max-unavailable` (how many may
//! be missing below it), each a count or a percentage of the role's instances.
//!
//! Kubernetes' Deployment defaults and rounding: 25 % each, the surge rounded up and the
//! unavailable count rounded down, so one to three replicas get a surge of 1 and 0
//! unavailable: the new pod starts, and must be ready, before an old one stops. Both
//! given as 0 is refused, as Kubernetes' validation refuses it (nothing could ever be
//! replaced); when percentages only *round* to 0 both (`--max-surge 0` with 25 % of one
//! instance), one instance may be unavailable, as Kubernetes' `ResolveFenceposts` does.
//!
//! The tool restarts one instance at a time, which stays within both bounds whenever
//! either is at least 1: with a surge it starts the replacement (registered, ready, and
//! heard of by consumers) and only then stops the old instance; with `--max-surge 0` it
//! stops first and starts after, the order of a plain restart.

use std::fmt;
use std::str::FromStr;

/// A bound given as a count (`1`) or as a percentage of the instances (`25%`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// A number of instances.
    Count(u32),
    /// A percentage of the instances of a role, rounded as Kubernetes rounds it.
    Percent(u32),
}

impl Bound {
    /// Kubernetes' default for both bounds: 25 %.
    pub const DEFAULT: Bound = Bound::Percent(25);

    /// Whether the bound is given as zero (`0` or `0%`), whatever the instances.
    pub fn is_zero(self) -> bool {
        matches!(self, Bound::Count(0) | Bound::Percent(0))
    }

    /// The bound for a role of `instances` instances; percentages rounded up (`up`, the
    /// surge) or down (the unavailable count).
    pub fn resolve(self, instances: usize, up: bool) -> usize {
        match self {
            Bound::Count(count) => count as usize,
            Bound::Percent(percent) => {
                let scaled = instances * percent as usize;
                if up {
                    scaled.div_ceil(100)
                } else {
                    scaled / 100
                }
            }
        }
    }
}

impl FromStr for Bound {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || format!("`{text}` is not a count (2) or a percentage (25%)");
        match text.strip_suffix('%') {
            Some(percent) => {
                let percent: u32 = percent.trim().parse().map_err(|_| bad())?;
                if percent > 100 {
                    return Err(format!("`{text}`: a percentage is at most 100%"));
                }
                Ok(Bound::Percent(percent))
            }
            None => text.trim().parse().map(Bound::Count).map_err(|_| bad()),
        }
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::Count(count) => write!(f, "{count}"),
            Bound::Percent(percent) => write!(f, "{percent}%"),
        }
    }
}

/// In which order one instance is replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// Start the replacement, wait until consumers know it, then stop the old one
    /// (a surge of at least 1).
    StartThenStop,
    /// Stop the old one, then start the replacement (`--max-surge 0`).
    StopThenStart,
}

impl Order {
    /// `start-then-stop` or `stop-then-start`.
    pub fn name(self) -> &'static str {
        match self {
            Order::StartThenStop => "start-then-stop",
            Order::StopThenStart => "stop-then-start",
        }
    }
}

/// The order for a role of `instances` instances, or why the bounds cannot work.
///
/// # Errors
/// Both bounds given as 0 (Kubernetes: "may not be 0 when maxSurge is 0").
pub fn order(instances: usize, max_surge: Bound, max_unavailable: Bound) -> Result<Order, String> {
    if max_surge.is_zero() && max_unavailable.is_zero() {
        return Err(format!(
            "--max-surge {max_surge} and --max-unavailable {max_unavailable} are both 0: \
             nothing could be replaced (Kubernetes refuses this too)"
        ));
    }
    // Both only rounding to 0 leaves one instance unavailable, as in Kubernetes.
    if max_surge.resolve(instances, true) == 0 {
        Ok(Order::StopThenStart)
    } else {
        Ok(Order::StartThenStop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_counts_and_percentages() {
        assert_eq!("2".parse::<Bound>(), Ok(Bound::Count(2)));
        assert_eq!("25%".parse::<Bound>(), Ok(Bound::Percent(25)));
        assert!("x".parse::<Bound>().is_err());
        assert!("101%".parse::<Bound>().is_err());
        assert_eq!(Bound::Percent(25).to_string(), "25%");
    }

    /// Kubernetes' rounding: 25 % of 1..=3 replicas is a surge of 1 and 0 unavailable;
    /// of 4 it is 1 and 1; of 5, 2 and 1.
    #[test]
    fn percentages_round_as_kubernetes_rounds_them() {
        let rounded = |n| {
            (
                Bound::DEFAULT.resolve(n, true),
                Bound::DEFAULT.resolve(n, false),
            )
        };
        assert_eq!(rounded(1), (1, 0));
        assert_eq!(rounded(3), (1, 0));
        assert_eq!(rounded(4), (1, 1));
        assert_eq!(rounded(5), (2, 1));
        assert_eq!(Bound::Count(3).resolve(10, false), 3);
    }

    #[test]
    fn a_surge_starts_first_no_surge_stops_first_and_neither_is_refused() {
        let defaults = order(1, Bound::DEFAULT, Bound::DEFAULT);
        assert_eq!(defaults, Ok(Order::StartThenStop));
        assert_eq!(
            order(1, Bound::Count(0), Bound::Count(1)),
            Ok(Order::StopThenStart)
        );
        let error = order(3, Bound::Count(0), Bound::Percent(0)).unwrap_err();
        assert!(error.contains("both 0"), "{error}");
        // 25 % of 3 rounds down to 0: one may be unavailable, as Kubernetes resolves it.
        assert_eq!(
            order(3, Bound::Count(0), Bound::DEFAULT),
            Ok(Order::StopThenStart)
        );
    }
}
