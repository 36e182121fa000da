//! How many requests a registry server says its clients sent it: the figure an idle
//! fleet's registry load is measured in (issue 39), read from each server's own
//! counters, so nothing between the client and the server has to be trusted.

use std::time::Duration;

use super::checks::{Endpoint, four_letter_reply, http_reply};
use super::{Backend, RegistryServer};

/// Longest wait for a server's count.
const COUNT_WAIT: Duration = Duration::from_secs(5);

impl RegistryServer {
    /// The requests this server has counted from clients since its process started (rnacos
    /// counts a request once answered, so the request in progress may be missing; the
    /// difference between two reads is what arrived between them): etcd's gRPC messages received (`grpc_server_msg_received_total`, every
    /// method, a stream's messages each), ZooKeeper's packets received (`srvr`'s
    /// `Received`), rnacos's gRPC and HTTP requests (`grpc_request_total_count` and
    /// `http_request_total_count` in `/nacos/metrics`, less the reads of it this method
    /// made, each of which rnacos counts). `None` when the server did not answer within
    /// 5 s (a busy machine's JVM can be slow to answer `srvr`).
    pub async fn requests_received(&self) -> Option<u64> {
        let at = self.endpoint();
        match self.backend {
            Backend::Etcd => self.ask_within(COUNT_WAIT, etcd_messages(at)).await,
            Backend::ZooKeeper => self.ask_within(COUNT_WAIT, zookeeper_packets(at)).await,
            Backend::Nacos => {
                let counted = self.ask_within(COUNT_WAIT, nacos_requests(at)).await?;
                let reads = self
                    .metrics_reads
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
                    + 1;
                Some(counted.saturating_sub(reads))
            }
        }
    }
}

async fn etcd_messages(at: Endpoint) -> Option<u64> {
    let reply = http_reply(at, "GET", "/metrics", "").await?;
    Some(sum_of(&reply, |line| {
        line.starts_with("grpc_server_msg_received_total{")
    }))
}

async fn zookeeper_packets(at: Endpoint) -> Option<u64> {
    let reply = four_letter_reply(at, b"srvr").await?;
    reply
        .lines()
        .find_map(|line| line.strip_prefix("Received: "))
        .and_then(|count| count.trim().parse().ok())
}

async fn nacos_requests(at: Endpoint) -> Option<u64> {
    let reply = http_reply(at, "GET", "/nacos/metrics", "").await?;
    Some(sum_of(&reply, |line| {
        line.starts_with("grpc_request_total_count ")
            || line.starts_with("http_request_total_count ")
    }))
}

/// The sum of the values of the Prometheus text lines `picked` chooses.
fn sum_of(text: &str, picked: impl Fn(&str) -> bool) -> u64 {
    text.lines()
        .filter(|line| picked(line))
        .filter_map(|line| line.rsplit(' ').next()?.trim().parse::<f64>().ok())
        .sum::<f64>() as u64
}
