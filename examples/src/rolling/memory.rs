//! The run's peak memory: this process's own resident-set high-water mark.
//!
//! Read from `VmHWM` in `/proc/self/status` (Linux), which counts this process's pages
//! only. `getrusage(RUSAGE_SELF).ru_maxrss`, used before, is wrong under `cargo run`:
//! Linux keeps `ru_maxrss` across `execve`, so the figure was cargo's own peak (some
//! 90 MiB while it resolved the workspace) whenever that was larger than the tool's
//! (about 20 MiB), and the README's first command printed it.

/// The largest resident set size this process has had, in bytes; `None` where
/// `/proc/self/status` cannot be read or has no `VmHWM` line (not Linux).
pub(crate) fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    vm_hwm(&status)
}

/// The `VmHWM:    23456 kB` line of a `/proc/<pid>/status` text, in bytes.
fn vm_hwm(status: &str) -> Option<u64> {
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))?;
    let kib = line.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_high_water_mark_line_in_bytes() {
        let status = "Name:\tx\nVmPeak:\t  900000 kB\nVmHWM:\t   23456 kB\nVmRSS:\t 20000 kB\n";
        assert_eq!(vm_hwm(status), Some(23_456 * 1024));
        assert_eq!(vm_hwm("Name:\tx\n"), None);
        assert_eq!(vm_hwm("VmHWM:\tmany kB\n"), None);
    }

    /// This test process's own peak: more than nothing, and far below what an inherited
    /// figure from a parent (cargo, at 90 MiB and more) would show. A test binary of this
    /// crate holds a few MiB; 1 GiB is a bound no honest reading of it reaches.
    #[test]
    fn this_process_has_a_plausible_peak() {
        let peak = peak_rss().expect("Linux has /proc/self/status");
        assert!(peak > 0);
        assert!(peak < 1024 * 1024 * 1024, "{peak} bytes");
        // In one reading, the high-water mark is at least the current resident size.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let now = status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap();
        let peak = vm_hwm(&status).unwrap();
        assert!(peak >= now * 1024, "peak {peak} < current {}", now * 1024);
    }
}
