//! When the restarts of a run happen: the plan (every proxy, then every provider, once
//! per round), the quiet times around it, and whether a run is long enough for all of
//! them.

use std::time::Duration;

use super::options::{Options, RollingError};
use super::role::Role;

/// Time one restart needs at least: the provider's offline window (500 ms by default),
/// the registry's propagation to consumers, and a margin to start the replacement.
fn restart_time(propagation: Duration) -> Duration {
    Duration::from_millis(500) + propagation + Duration::from_millis(300)
}

/// Quiet time before the first restart and after the last: a tenth of the run, at most
/// 5 s, so steady-state latency has samples on both sides.
pub(crate) fn warmup(duration: Duration) -> Duration {
    (duration / 10).min(Duration::from_secs(5))
}

/// Refuses a `--duration` too short for the planned restarts: they must all happen while
/// the load runs, or the run proves nothing about them.
pub(crate) fn check_restarts_fit(
    options: &Options,
    propagation: Duration,
) -> Result<(), RollingError> {
    let restarts = restart_plan(options).len() as u32;
    if fits(options.duration, restarts, propagation) {
        return Ok(());
    }
    Err(RollingError::Usage(format!(
        "--duration {} is too short for {restarts} restarts: each needs about {} \
         (offline window, registry propagation, start-up); use at least {}",
        humantime::format_duration(options.duration),
        humantime::format_duration(restart_time(propagation)),
        humantime::format_duration(shortest_duration(restarts, propagation)),
    )))
}

/// Whether `restarts` restarts fit in a run of `duration` between its two quiet times.
fn fits(duration: Duration, restarts: u32, propagation: Duration) -> bool {
    let restarting = restart_time(propagation).saturating_mul(restarts);
    duration >= restarting.saturating_add(warmup(duration) * 2)
}

/// The shortest whole-second `--duration` that [`fits`]. The quiet times grow with the
/// duration (a tenth each, up to 5 s), so this solves for it rather than adding them to
/// the restart time of a too-short run.
fn shortest_duration(restarts: u32, propagation: Duration) -> Duration {
    let restarting = restart_time(propagation).saturating_mul(restarts);
    // Below 50 s each quiet time is a tenth: d ≥ restarting + d/5, so d ≥ 1.25 × restarting.
    let short = restarting.mul_f64(1.25);
    let exact = if short <= Duration::from_secs(50) {
        short
    } else {
        restarting
            .saturating_add(Duration::from_secs(10))
            .max(Duration::from_secs(50))
    };
    let mut whole = Duration::from_secs(exact.as_secs() + u64::from(exact.subsec_nanos() > 0));
    // Guard against rounding in the division by 10.
    while !fits(whole, restarts, propagation) {
        whole += Duration::from_secs(1);
    }
    whole
}

/// Every proxy, then every provider, once per round.
pub(crate) fn restart_plan(options: &Options) -> Vec<(Role, usize)> {
    let one_round = (0..options.proxies)
        .map(|n| (Role::Proxy, n))
        .chain((0..options.providers).map(|n| (Role::Provider, n)));
    (0..options.rounds)
        .flat_map(|_| one_round.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The advice in the "too short" error is itself accepted, and one second less is not.
    #[test]
    fn advised_duration_fits_and_is_the_shortest() {
        for restarts in [1, 4, 10, 40, 200] {
            for propagation_ms in [0, 300, 500, 1_000] {
                let propagation = Duration::from_millis(propagation_ms);
                let advised = shortest_duration(restarts, propagation);
                assert!(
                    fits(advised, restarts, propagation),
                    "{restarts} {propagation_ms}"
                );
                let shorter = advised - Duration::from_secs(1);
                assert!(
                    !fits(shorter, restarts, propagation),
                    "{restarts} restarts, {propagation_ms} ms: {advised:?} is not the shortest"
                );
            }
        }
    }

    #[test]
    fn the_default_run_fits() {
        let options = Options::default();
        assert!(check_restarts_fit(&options, options.registry_delay).is_ok());
    }

    /// `--rounds 0` is a steady run: accepted, no restart planned, any duration fits.
    #[test]
    fn zero_rounds_plan_no_restart() {
        let options = Options {
            rounds: 0,
            duration: Duration::from_secs(1),
            ..Options::default()
        };
        assert!(super::super::options::validate(&options).is_ok());
        assert!(restart_plan(&options).is_empty());
        assert!(check_restarts_fit(&options, Duration::from_millis(300)).is_ok());
    }
}
