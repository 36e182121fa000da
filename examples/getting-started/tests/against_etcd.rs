//! The getting-started project as a user runs it: the provider and the consumer, as
//! processes, against a real etcd (`RPC_TEST_ETCD_URL`, set by scripts/test.sh); the
//! consumer prints the reply, the provider logs its start-up by default and stops
//! cleanly on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A command for one of the project's binaries, run from the project's directory (the
/// YAML paths are relative to it) against etcd at `url` on a free port.
fn command(binary: &str, url: &str) -> Command {
    let mut command = Command::new(binary);
    command
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("RPC_REGISTRIES__MAIN__URL", url)
        .env("RPC_PROTOCOL__PORT", "0")
        .env_remove("RUST_LOG");
    command
}

#[test]
fn the_provider_and_the_consumer_talk_through_etcd() {
    let Ok(url) = std::env::var("RPC_TEST_ETCD_URL") else {
        assert!(
            std::env::var_os("RPC_TEST_REQUIRE_REGISTRIES").is_none(),
            "RPC_TEST_ETCD_URL is not set but RPC_TEST_REQUIRE_REGISTRIES is"
        );
        println!("SKIPPED: RPC_TEST_ETCD_URL is not set (scripts/test.sh starts etcd)");
        return;
    };
    let mut provider = command(env!("CARGO_BIN_EXE_hello-provider"), &url)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The default subscriber logs the advertised address, then the registration.
    let mut stderr = BufReader::new(provider.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !seen.iter().any(|line: &String| line.contains("to=serving")) {
        assert!(Instant::now() < deadline, "no Serving phase: {seen:#?}");
        match stderr.next() {
            Some(Ok(line)) => seen.push(line),
            _ => panic!("the provider ended: {seen:#?}"),
        }
    }
    assert!(
        seen.iter().any(|l| l.contains("advertising providers at")),
        "{seen:#?}"
    );

    let consumer = command(env!("CARGO_BIN_EXE_hello-consumer"), &url)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&consumer.stdout);
    let err = String::from_utf8_lossy(&consumer.stderr);
    assert!(consumer.status.success(), "{out}\n{err}");
    assert_eq!(out.trim(), "Hello, world!");

    kill(provider.id(), "TERM");
    let rest: Vec<String> = stderr.map_while(Result::ok).collect();
    let status = provider.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{rest:#?}");
    assert!(
        rest.iter()
            .any(|l| l.contains("graceful shutdown finished")),
        "{rest:#?}"
    );
}

/// `kill -SIGNAL pid`, with the system's kill(1): this project has no signal crate.
fn kill(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}
