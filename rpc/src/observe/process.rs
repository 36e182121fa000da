//! The process's own metrics, under the names every Prometheus client library uses
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`, ...), and what this
//! build is (`rpc_build_info`): read at scrape time from the kernel (`/proc/self`,
//! `getrusage`, `getrlimit`), so they cost nothing between scrapes.
//!
//! prometheus-client, unlike the Go and Java clients, ships no process collector, so
//! this one is written here; on a system without `/proc` the metrics it cannot read are
//! left out rather than reported as 0.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::sys::resource::{Resource, UsageWho, getrlimit, getrusage};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::scrape::{NO_LABELS, counters, gauge, gauges};

/// The version of rpc this binary was built with.
const RPC_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Reads the process's CPU time, memory, descriptors and start time at each scrape.
#[derive(Debug)]
pub(super) struct ProcessCollector {
    /// The application's name (`application.name`), a label of `rpc_build_info`.
    application: String,
    /// When this process started, in seconds since the epoch, read once.
    started: Option<f64>,
}

impl ProcessCollector {
    pub(super) fn new(application: &str) -> Self {
        Self {
            application: application.to_owned(),
            started: start_time(),
        }
    }
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let encoder = &mut encoder;
        gauges(
            encoder,
            "rpc_build_info",
            "Always 1: the version of rpc and the application this process runs.",
            None,
            [(
                [
                    ("version", RPC_VERSION),
                    ("application", self.application.as_str()),
                ],
                1u64,
            )],
        )?;
        if let Ok(usage) = getrusage(UsageWho::RUSAGE_SELF) {
            let seconds = |time: nix::sys::time::TimeVal| {
                Duration::new(
                    u64::try_from(time.tv_sec()).unwrap_or(0),
                    u32::try_from(time.tv_usec()).unwrap_or(0) * 1_000,
                )
            };
            let cpu = seconds(usage.user_time()) + seconds(usage.system_time());
            counters(
                encoder,
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                [(NO_LABELS, cpu.as_secs_f64())],
            )?;
        }
        if let Some(status) = read("/proc/self/status") {
            for (field, name, help) in [
                (
                    "VmRSS:",
                    "process_resident_memory_bytes",
                    "Resident memory size in bytes.",
                ),
                (
                    "VmSize:",
                    "process_virtual_memory_bytes",
                    "Virtual memory size in bytes.",
                ),
            ] {
                if let Some(bytes) = kilobytes(&status, field) {
                    gauge(encoder, name, help, bytes)?;
                }
            }
        }
        if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
            // The directory's own descriptor, open while it is read, is not counted.
            let open = entries.count().saturating_sub(1) as u64;
            gauge(
                encoder,
                "process_open_fds",
                "Number of open file descriptors.",
                open,
            )?;
        }
        if let Ok((soft, _hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
            gauge(
                encoder,
                "process_max_fds",
                "Maximum number of open file descriptors.",
                soft,
            )?;
        }
        if let Some(started) = self.started {
            gauge(
                encoder,
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                started,
            )?;
        }
        Ok(())
    }
}

/// The process's start time, from `/proc/self/stat` (clock ticks after boot) and the
/// boot time in `/proc/stat`.
fn start_time() -> Option<f64> {
    let stat = read("/proc/self/stat")?;
    // The command name (field 2) may hold spaces and parentheses: fields are counted
    // after its closing parenthesis, where field 3 begins. starttime is field 22.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let ticks: f64 = after_name.split_whitespace().nth(19)?.parse().ok()?;
    let boot: f64 = read("/proc/stat")?
        .lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    // USER_HZ, which /proc reports ticks in, is 100 on every Linux ABI.
    let started = boot + ticks / 100.0;
    // A clock that reads before the boot time would make no sense; leave it out.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()?
        .as_secs_f64();
    (started <= now + 1.0).then_some(started)
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The value of the `field` line of `/proc/self/status` (`VmRSS:   1234 kB`), in bytes.
fn kilobytes(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with(field))?;
    let kb: u64 = line[field.len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_figures_are_read() {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(ProcessCollector::new("demo")));
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(&format!(
                "rpc_build_info{{version=\"{RPC_VERSION}\",application=\"demo\"}} 1"
            )),
            "{text}"
        );
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_start_time_seconds",
        ] {
            let value: f64 = text
                .lines()
                .find_map(|line| line.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{name} missing: {text}"))
                .parse()
                .unwrap();
            assert!(
                value > 0.0 || name == "process_cpu_seconds_total",
                "{name} {value}"
            );
        }
        let started = start_time().unwrap();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(started <= now && started > now - 24.0 * 3600.0 * 365.0);
    }
}
