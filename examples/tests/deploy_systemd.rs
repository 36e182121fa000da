//! `deploy/systemd/` fits the provider it runs: a `Type=notify-reload` unit that starts
//! greeter-provider with the configuration shipped beside it, stops it with SIGTERM and
//! a `TimeoutStopSec` derived from the shutdown timeout, and reloads it — the hot
//! upgrade — with SIGUSR2 within a `TimeoutStartSec` derived from `upgrade.ready_timeout`;
//! and the drop-in for systemd before 253 turns that into `Type=notify` with
//! `ExecReload=kill -USR2`. `systemd-analyze verify` needs a
//! running systemd; this reads the unit's keys instead, and refuses any key it does not
//! know, so a misspelt directive fails here rather than being ignored by systemd with a
//! warning.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use lossless_rpc::Config;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/systemd");
const UNIT: &str = "greeter-provider.service";
/// The drop-in for systemd older than 253 (no `Type=notify-reload`).
const BEFORE_253: &str = "reload-before-systemd-253.conf";
const CONFIG: &str = "greeter-provider.yaml";

/// The directives the unit may use, by section (systemd.unit(5), systemd.service(5),
/// systemd.exec(5), systemd.kill(5)).
const KNOWN: &[(&str, &[&str])] = &[
    (
        "Unit",
        &[
            "Description",
            "Documentation",
            "Wants",
            "Requires",
            "After",
            "Before",
        ],
    ),
    (
        "Service",
        &[
            "Type",
            "NotifyAccess",
            "ExecStart",
            "ExecReload",
            "ReloadSignal",
            "Environment",
            "EnvironmentFile",
            "KillSignal",
            "KillMode",
            "TimeoutStartSec",
            "TimeoutStopSec",
            "Restart",
            "RestartSec",
            "RestartPreventExitStatus",
            "DynamicUser",
            "StateDirectory",
            "User",
            "Group",
            "NoNewPrivileges",
            "ProtectSystem",
            "ProtectHome",
            "PrivateTmp",
        ],
    ),
    ("Install", &["WantedBy"]),
];

/// The unit's settings: `(section, key)` → values in order (a key may repeat).
type Unit = BTreeMap<(String, String), Vec<String>>;

/// Reads a unit file: `[Section]` headers, `Key=Value` lines, `#`/`;` comments.
fn parse_unit(text: &str) -> Unit {
    let mut unit = Unit::new();
    let mut section: Option<String> = None;
    for (number, line) in text.lines().enumerate().map(|(n, l)| (n + 1, l.trim())) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        assert!(
            !line.ends_with('\\'),
            "line {number}: continuations are not read here"
        );
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = Some(name.to_owned());
            continue;
        }
        let section = section
            .clone()
            .unwrap_or_else(|| panic!("line {number}: a setting outside any section"));
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("line {number}: not Key=Value: {line}"));
        unit.entry((section, key.trim().to_owned()))
            .or_default()
            .push(value.trim().to_owned());
    }
    unit
}

fn unit() -> Unit {
    read_unit(UNIT)
}

fn read_unit(name: &str) -> Unit {
    parse_unit(&std::fs::read_to_string(Path::new(DIR).join(name)).unwrap())
}

/// The single value of `[section] key`.
fn value<'a>(unit: &'a Unit, section: &str, key: &str) -> &'a str {
    let values = unit
        .get(&(section.to_owned(), key.to_owned()))
        .unwrap_or_else(|| panic!("[{section}] {key} is not set"));
    assert_eq!(values.len(), 1, "[{section}] {key} is set more than once");
    &values[0]
}

/// A systemd time span: a bare number is seconds, else `30s`, `1min 30s`, ...
fn time_span(text: &str) -> Duration {
    match text.parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        Err(_) => humantime::parse_duration(text)
            .unwrap_or_else(|error| panic!("time span {text:?}: {error}")),
    }
}

fn provider_config() -> Config {
    Config::from_file(Path::new(DIR).join(CONFIG)).unwrap()
}

#[test]
fn every_directive_is_a_known_one_in_its_section() {
    let known: BTreeMap<&str, &[&str]> = KNOWN.iter().copied().collect();
    for (section, key) in unit().keys().chain(read_unit(BEFORE_253).keys()) {
        let keys = known
            .get(section.as_str())
            .unwrap_or_else(|| panic!("unknown section [{section}]"));
        assert!(
            keys.contains(&key.as_str()),
            "[{section}] {key} is not a known directive"
        );
    }
}

#[test]
fn the_unit_is_type_notify_reload_and_runs_the_provider_with_its_configuration() {
    let unit = unit();
    assert_eq!(value(&unit, "Service", "Type"), "notify-reload");
    assert_eq!(value(&unit, "Service", "NotifyAccess"), "main");
    assert_eq!(value(&unit, "Service", "KillSignal"), "SIGTERM");
    assert_eq!(value(&unit, "Service", "Restart"), "on-failure");
    // greeter-provider exits 2 on a bad configuration: restarting would not help.
    let no_restart = value(&unit, "Service", "RestartPreventExitStatus");
    assert!(no_restart.split_whitespace().any(|code| code == "2"));

    let exec: Vec<&str> = value(&unit, "Service", "ExecStart")
        .split_whitespace()
        .collect();
    assert!(
        exec[0].starts_with('/') && exec[0].ends_with("/greeter-provider"),
        "{exec:?}"
    );
    let at = exec
        .iter()
        .position(|a| *a == "--config")
        .expect("--config");
    let file = Path::new(exec[at + 1]);
    assert_eq!(file.file_name().and_then(|f| f.to_str()), Some(CONFIG));
    // The file shipped beside the unit is the one it names, and it loads.
    let config = provider_config();
    assert_eq!(config.application.name, "greeter-provider");
    assert!(
        config.graceful_shutdown.internal_signal,
        "SIGTERM starts the sequence"
    );
}

#[test]
fn a_reload_is_the_hot_upgrade_by_sigusr2_within_the_start_timeout() {
    let unit = unit();
    let config = provider_config();
    // systemd sends SIGUSR2 and waits for RELOADING=1 (with MONOTONIC_USEC), then
    // READY=1: the process's own notifications end the reload, once it is decided.
    assert_eq!(value(&unit, "Service", "ReloadSignal"), "SIGUSR2");
    assert!(
        !unit.contains_key(&("Service".to_owned(), "ExecReload".to_owned())),
        "with Type=notify-reload an ExecReload= would run besides the signal"
    );
    // SIGUSR2 is handled, not left to its default action (which ends the process).
    assert!(config.upgrade.enabled, "upgrade.enabled");
    assert!(config.graceful_shutdown.internal_signal);
    // A reload is bounded by TimeoutStartSec: the check, then the new process's start,
    // each bounded by upgrade.ready_timeout.
    let start = time_span(value(&unit, "Service", "TimeoutStartSec"));
    let ready = config.upgrade.ready_timeout;
    let margin = Duration::from_secs(5);
    assert!(
        start >= 2 * ready + margin,
        "TimeoutStartSec {start:?} < 2 x upgrade.ready_timeout {ready:?} + {margin:?}"
    );
    // The figures docs/operations.md and the unit's comments quote.
    assert_eq!((ready.as_secs(), start.as_secs()), (30, 65));
}

#[test]
fn before_systemd_253_the_drop_in_reloads_by_exec_reload() {
    let drop_in = read_unit(BEFORE_253);
    assert_eq!(drop_in.len(), 2, "{drop_in:?}");
    assert_eq!(value(&drop_in, "Service", "Type"), "notify");
    assert_eq!(
        value(&drop_in, "Service", "ExecReload"),
        "/bin/kill -USR2 $MAINPID"
    );
}

#[test]
fn the_stop_timeout_is_derived_from_the_shutdown_timeout() {
    let unit = unit();
    let config = provider_config();
    let stop = time_span(value(&unit, "Service", "TimeoutStopSec"));
    let timeout = config.graceful_shutdown.timeout;
    let margin = lossless_rpc::systemd::STOP_MARGIN;
    assert!(
        stop >= timeout + margin,
        "TimeoutStopSec {stop:?} < graceful_shutdown.timeout {timeout:?} + {margin:?}"
    );
    // The figures docs/operations.md and the unit's comments quote.
    assert_eq!(
        (timeout.as_secs(), margin.as_secs(), stop.as_secs()),
        (25, 5, 30)
    );
    // Start-up must have time for the consumer check (and the registry around it).
    let start = time_span(value(&unit, "Service", "TimeoutStartSec"));
    assert!(start > config.consumer.check_timeout * 2, "{start:?}");
}

#[test]
fn unit_files_are_read_as_systemd_reads_them() {
    let unit = parse_unit(
        "# comment\n[Service]\n; also a comment\nType = notify\nEnvironment=A=1\n\
         Environment=B=2\n",
    );
    assert_eq!(value(&unit, "Service", "Type"), "notify");
    assert_eq!(
        unit[&("Service".to_owned(), "Environment".to_owned())],
        ["A=1", "B=2"]
    );
    assert_eq!(time_span("30"), Duration::from_secs(30));
    assert_eq!(time_span("1min 30s"), Duration::from_secs(90));
}

#[test]
fn the_last_stop_file_is_in_the_units_state_directory() {
    let unit = unit();
    let state = value(&unit, "Service", "StateDirectory");
    let config = provider_config();
    let file = config
        .metrics
        .last_stop_file
        .expect("metrics.last_stop_file is set");
    assert_eq!(
        file.parent(),
        Some(Path::new("/var/lib").join(state).as_path()),
        "the file survives restarts in /var/lib/{state}"
    );
    // No RUST_LOG override: it would replace the default filter.
    let environment = unit
        .get(&("Service".to_owned(), "Environment".to_owned()))
        .cloned()
        .unwrap_or_default();
    assert!(
        environment.iter().all(|line| !line.contains("RUST_LOG")),
        "{environment:?}"
    );
}
