//! The consumer-side collector against real cluster channels (calls refused by a
//! closed port).

use std::sync::Arc;

use rpc_cluster::{BlacklistConfig, Directory, DirectoryConfig, ReferenceConfig};
use rpc_core::{Instance, ServiceKey, Snapshot};
use rpc_transport::ChannelOptions;
use tonic::body::Body as TonicBody;
use tower::ServiceExt;

use super::*;
use crate::observe::scrape::encode_one;

/// A port on loopback where nothing listens (bound, then released).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn refused_calls_show_as_picks_retries_and_an_ejection() {
    let key = ServiceKey::new("t.S");
    let directory = Arc::new(Directory::new(
        key.clone(),
        DirectoryConfig::default(),
        ChannelOptions::default(),
    ));
    let ports = [closed_port(), closed_port()];
    let instances = ports
        .iter()
        .map(|&port| Instance::new(key.clone(), "127.0.0.1", port))
        .collect();
    directory.apply(Snapshot::new(key, 1, instances));
    let channel = ClusterChannel::new(
        directory,
        ReferenceConfig::default(),
        BlacklistConfig::default(),
    );
    let collector = ReferencesCollector::new(InflightCounter::new());
    collector.add(channel.clone());

    // Each call is refused five times: its attempt, the three transparent re-sends
    // of a request that never left (either instance may take them), then a retry
    // (not_sent) on an instance the call has not tried.
    for _ in 0..6 {
        let request = http::Request::builder()
            .uri("/t.S/M")
            .body(TonicBody::empty())
            .unwrap();
        let _ = channel.clone().oneshot(request).await;
    }
    let counts = channel.stats();
    let text = encode_one(collector);
    let picks: u64 = ports
        .iter()
        .map(|port| {
            let line = format!(
                "rpc_client_picks_total{{rpc_service=\"t.S\",server_address=\"127.0.0.1:{port}\"}} "
            );
            let value = text
                .lines()
                .find_map(|l| l.strip_prefix(&line))
                .unwrap_or_else(|| panic!("{text}"));
            value.parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(picks, 30, "five picks per call: {text}");
    assert!(
        text.contains(&format!(
            "rpc_client_retries_total{{rpc_service=\"t.S\",reason=\"not_sent\"}} {}\n",
            counts.retries
        )),
        "{text}"
    );
    assert!(counts.retries > 0, "{counts:?}");
    assert!(
        text.contains(&format!(
            "rpc_client_ejections_total{{rpc_service=\"t.S\"}} {}\n",
            counts.blacklist.ejections
        )),
        "{text}"
    );
    assert!(counts.blacklist.ejections >= 1, "{counts:?}");
    assert!(
        text.contains("rpc_client_instances{rpc_service=\"t.S\",state=\"ejected\"} 1\n"),
        "at most half are ejected: {text}"
    );
    assert!(
        text.contains("rpc_client_instances{rpc_service=\"t.S\",state=\"healthy\"} 1\n"),
        "{text}"
    );
    assert!(text.contains("rpc_client_requests_in_flight 0\n"), "{text}");
    assert!(
        text.contains("rpc_client_failovers_total{rpc_service=\"t.S\"} 0\n"),
        "{text}"
    );
}

#[tokio::test]
async fn two_references_to_one_service_give_one_series_each() {
    let key = ServiceKey::new("t.S");
    let port = closed_port();
    let collector = ReferencesCollector::new(InflightCounter::new());
    let mut channels = Vec::new();
    for _ in 0..2 {
        let directory = Arc::new(Directory::new(
            key.clone(),
            DirectoryConfig::default(),
            ChannelOptions::default(),
        ));
        let instance = Instance::new(key.clone(), "127.0.0.1", port);
        directory.apply(Snapshot::new(key.clone(), 1, vec![instance]));
        let channel = ClusterChannel::new(
            directory,
            ReferenceConfig::default(),
            BlacklistConfig::default(),
        );
        collector.add(channel.clone());
        channels.push(channel);
    }
    for channel in &channels {
        let request = http::Request::builder()
            .uri("/t.S/M")
            .body(TonicBody::empty())
            .unwrap();
        let _ = channel.clone().oneshot(request).await;
    }
    let text = encode_one(collector);
    let samples: Vec<&str> = text
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.rsplit_once(' ').map(|(series, _)| series))
        .collect();
    let mut unique = samples.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), samples.len(), "a duplicate series: {text}");
    let picks: u64 = channels
        .iter()
        .flat_map(|channel| channel.directory().list().invokers().to_vec())
        .map(|invoker| invoker.stats().dispatched)
        .sum();
    assert!(picks >= 2, "both references sent");
    assert!(
        text.contains(&format!(
            "rpc_client_picks_total{{rpc_service=\"t.S\",server_address=\"127.0.0.1:{port}\"}} {picks}\n"
        )),
        "the picks of both: {text}"
    );
}
