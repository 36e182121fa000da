//! The health checks a registry server is waited on with, and the end of its log for an
//! error message.

use std::net::Ipv4Addr;
use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Backend;

/// Where a server answers: its address, its client (or HTTP) port, and its second port
/// (Nacos's gRPC port).
#[derive(Clone, Copy, Debug)]
pub(super) struct Endpoint {
    pub(super) address: Ipv4Addr,
    pub(super) port: u16,
    pub(super) second_port: u16,
}

/// Whether `backend`'s server at `at` passes its own health check now.
pub(super) async fn answers(backend: Backend, at: Endpoint) -> bool {
    match backend {
        // A linearizable read through etcd's gRPC gateway: answered only once the
        // member has a leader.
        Backend::Etcd => http_ok(at, "POST", "/v3/kv/range", r#"{"key":"AA=="}"#).await,
        // `isro` answers `rw` only once the server serves sessions (`ruok`'s `imok`
        // comes earlier, while it still loads its data).
        Backend::ZooKeeper => four_letter_word(at, b"isro", b"rw").await,
        Backend::Nacos => {
            http_ok(
                at,
                "GET",
                "/nacos/v1/ns/service/list?pageNo=1&pageSize=1",
                "",
            )
            .await
                && TcpStream::connect((at.address, at.second_port))
                    .await
                    .is_ok()
        }
    }
}

/// Whether `backend`'s server at `at` says it leads its cluster: etcd's status names
/// itself as the leader, ZooKeeper's `srvr` says `Mode: leader`, rnacos's raft metrics
/// name itself as the current leader.
pub(super) async fn is_leader(backend: Backend, at: Endpoint) -> bool {
    match backend {
        Backend::Etcd => {
            let Some(reply) = http_reply(at, "POST", "/v3/maintenance/status", "{}").await else {
                return false;
            };
            let Some(body) = reply.split("\r\n\r\n").nth(1) else {
                return false;
            };
            let Ok(status) = serde_json::from_str::<serde_json::Value>(body) else {
                return false;
            };
            let member = &status["header"]["member_id"];
            !member.is_null() && *member == status["leader"]
        }
        Backend::ZooKeeper => four_letter_reply(at, b"srvr")
            .await
            .is_some_and(|reply| reply.contains("Mode: leader")),
        Backend::Nacos => raft_metrics(at).await.is_some_and(|metrics| {
            !metrics["id"].is_null() && metrics["id"] == metrics["current_leader"]
        }),
    }
}

/// Asks the rnacos raft leader at `leader` to take member `id`, whose raft answers at
/// `raft_address` (`POST /nacos/v1/raft/joinnode`): it adds the member as a non-voter,
/// brings it up to date, then makes it a voter. Whether rnacos answered `{"ok":1}`.
pub(super) async fn ask_to_join(leader: Endpoint, id: usize, raft_address: String) -> bool {
    let body = serde_json::json!([id, raft_address]).to_string();
    ok_reply(http_reply(leader, "POST", "/nacos/v1/raft/joinnode", &body).await)
}

/// Asks the rnacos raft leader at `leader` to make `ids` its voters
/// (`POST /nacos/v1/raft/change-membership`). Whether rnacos answered `{"ok":1}`.
pub(super) async fn change_voters(leader: Endpoint, ids: Vec<usize>) -> bool {
    let body = serde_json::json!(ids).to_string();
    ok_reply(http_reply(leader, "POST", "/nacos/v1/raft/change-membership", &body).await)
}

/// Whether an rnacos management reply says `{"ok":1}` (a refused change ends the
/// connection without a reply: rnacos's handlers unwrap their errors).
fn ok_reply(reply: Option<String>) -> bool {
    reply.is_some_and(|reply| reply.ends_with(r#"{"ok":1}"#))
}

/// Whether the rnacos member at `at` has heard from a raft leader: it knows one, or holds
/// log entries (a joining member the leader is bringing up to date).
pub(super) async fn heard_from_leader(at: Endpoint) -> bool {
    raft_metrics(at).await.is_some_and(|metrics| {
        !metrics["current_leader"].is_null() || metrics["last_log_index"].as_u64() > Some(0)
    })
}

/// How many voting members rnacos's raft lists now (as the member at `at` knows them).
pub(super) async fn raft_members(at: Endpoint) -> usize {
    raft_metrics(at).await.map_or(0, |metrics| {
        metrics["membership_config"]["members"]
            .as_array()
            .map_or(0, Vec::len)
    })
}

/// rnacos's raft metrics as one line (state, leader, log index, voters), for an error
/// message; "no answer" when the member does not answer.
pub(super) async fn raft_summary(at: Endpoint) -> String {
    raft_metrics(at).await.map_or_else(
        || "no answer".to_owned(),
        |metrics| {
            format!(
                "id {} state {} leader {} last log {} voters {} after {}",
                metrics["id"],
                metrics["state"],
                metrics["current_leader"],
                metrics["last_log_index"],
                metrics["membership_config"]["members"],
                metrics["membership_config"]["members_after_consensus"]
            )
        },
    )
}

/// rnacos's raft metrics (`GET /nacos/v1/raft/metrics`: `id`, `state`, `current_leader`,
/// `membership_config`).
async fn raft_metrics(at: Endpoint) -> Option<serde_json::Value> {
    let reply = http_reply(at, "GET", "/nacos/v1/raft/metrics", "").await?;
    serde_json::from_str(reply.split("\r\n\r\n").nth(1)?).ok()
}

/// The whole reply (head and body) to an HTTP/1.1 request to `at`.
pub(super) async fn http_reply(
    at: Endpoint,
    method: &str,
    path: &str,
    body: &str,
) -> Option<String> {
    let mut stream = TcpStream::connect((at.address, at.port)).await.ok()?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        at.address,
        body.len()
    );
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await.ok()?;
    String::from_utf8(reply).ok()
}

/// ZooKeeper's reply to the four-letter `word`.
pub(super) async fn four_letter_reply(at: Endpoint, word: &[u8]) -> Option<String> {
    let mut stream = TcpStream::connect((at.address, at.port)).await.ok()?;
    stream.write_all(word).await.ok()?;
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply).await;
    String::from_utf8(reply).ok()
}

/// Whether an HTTP/1.1 request to `at` is answered with a 200.
async fn http_ok(at: Endpoint, method: &str, path: &str, body: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect((at.address, at.port)).await else {
        return false;
    };
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        at.address,
        body.len()
    );
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await.is_ok() && head.ends_with(b" 200")
}

/// Whether ZooKeeper answers the four-letter `word` with `answer`.
async fn four_letter_word(at: Endpoint, word: &[u8], answer: &[u8]) -> bool {
    let Ok(mut stream) = TcpStream::connect((at.address, at.port)).await else {
        return false;
    };
    if stream.write_all(word).await.is_err() {
        return false;
    }
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply).await;
    reply == answer
}

/// The last 40 lines of the log at `path` that do not contain `noise` and are not a
/// backtrace's frames.
pub(super) fn log_tail_without(path: &Path, noise: &str) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let frame = |line: &str| {
        let line = line.trim_start();
        line.starts_with("at ")
            || line
                .split(':')
                .next()
                .is_some_and(|n| n.parse::<u32>().is_ok())
    };
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| !line.contains(noise) && !frame(line))
        .collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// The last lines of a server's log, for an error message.
pub(super) fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
