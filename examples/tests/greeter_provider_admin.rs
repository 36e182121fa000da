//! The greeter-provider binary's admin endpoint, configured from the environment as on
//! Kubernetes (`RPC_ADMIN__HOST=0.0.0.0`, `RPC_ADMIN__TOKEN`): without a token it
//! refuses to start naming `admin.token`; with one it prints `admin listening on ADDR`,
//! state changes need the token, and `POST /shutdown` runs the graceful sequence to a
//! clean exit.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rpc_testkit::http;

const BINARY: &str = env!("CARGO_BIN_EXE_greeter-provider");
const CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/provider.yaml");

fn spawn(env: &[(&str, &str)]) -> Child {
    Command::new(BINARY)
        .args(["--config", CONFIG])
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("greeter-provider starts")
}

/// Waits (bounded) for the process to exit and returns its code.
fn exit_code(child: &mut Child) -> i32 {
    for _ in 0..300 {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().expect("exited, not killed");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("greeter-provider did not exit within 30 s");
}

#[test]
fn beyond_loopback_without_a_token_it_refuses_to_start_naming_admin_token() {
    let mut child = spawn(&[("RPC_ADMIN__HOST", "0.0.0.0")]);
    assert_eq!(exit_code(&mut child), 2, "a configuration error");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(stderr.contains("admin.token"), "{stderr}");
    assert!(stderr.contains("RPC_ADMIN__TOKEN"), "{stderr}");
}

#[test]
fn with_a_token_state_changes_need_it_and_post_shutdown_exits_cleanly() {
    let mut child = spawn(&[
        ("RPC_ADMIN__HOST", "0.0.0.0"),
        ("RPC_ADMIN__TOKEN", "s3cret"),
    ]);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut lines = [String::new(), String::new()];
    for line in &mut lines {
        stdout.read_line(line).unwrap();
    }
    assert!(lines[0].starts_with("listening on "), "{lines:?}");
    let admin = lines[1]
        .trim()
        .strip_prefix("admin listening on 0.0.0.0:")
        .unwrap_or_else(|| panic!("unexpected second line {:?}", lines[1]));
    let admin: SocketAddr = format!("127.0.0.1:{admin}").parse().unwrap();

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let ready = http::get(admin, "/ready").await.unwrap();
        assert_eq!(ready.status, 200, "{ready:?}");
        let refused = http::post(admin, "/offline", None).await.unwrap();
        assert_eq!(refused.status, 401, "{refused:?}");
        let offline = http::post(admin, "/offline", Some("s3cret")).await.unwrap();
        assert_eq!(offline.status, 200, "{offline:?}");
        let ready = http::get(admin, "/ready").await.unwrap();
        assert_eq!(ready.status, 503, "{ready:?}");
        assert_eq!(
            ready.body,
            "not ready: manually offline: helloworld.Greeter\n"
        );
        assert_eq!(
            http::post(admin, "/shutdown", None).await.unwrap().status,
            401
        );
        let shutdown = http::post(admin, "/shutdown", Some("s3cret"))
            .await
            .unwrap();
        assert_eq!(shutdown.status, 202, "{shutdown:?}");
    });
    assert_eq!(
        exit_code(&mut child),
        0,
        "the graceful sequence ended clean"
    );
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert!(rest.starts_with("shutdown clean"), "{rest}");
}
