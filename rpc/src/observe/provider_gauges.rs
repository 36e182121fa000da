//! Metrics of the provider side that the lifecycle already counts, read at scrape time.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use rpc_lifecycle::Lifecycle;

use super::scrape::{counter, counters, gauge};

/// Writes, on each scrape:
/// - `rpc_server_requests_in_flight`: inbound requests whose response body has not
///   ended (what shutdown step 4 drains);
/// - `rpc_server_rejected_closing_total`: requests refused as "closing, not executed"
///   (shutdown step 3 on; our consumers re-send them elsewhere);
/// - `rpc_server_connections_open`: HTTP/2 connections open on the provider listeners;
/// - `rpc_server_goaway_sent_total`: connections sent a GOAWAY to close gracefully
///   (shutdown step 6; idle connections at any time);
/// - `rpc_server_connections_preface_timeout_total`: connections closed because their
///   peer had not sent the HTTP/2 preface within `protocol.preface_timeout`;
/// - `rpc_server_connections_idle_timeout_total`: connections sent GOAWAY after
///   `protocol.idle_timeout` without a call;
/// - `rpc_server_connections_shed_total{reason}`: connections closed to make room for a
///   new one (at `protocol.max_connections`) or for a descriptor `accept` lacked —
///   `never_spoken` (no preface yet) or `idle` (no call in flight; GOAWAY);
/// - `rpc_server_connections_refused_total`: new connections closed at once, the limit
///   reached and every connection carrying a call;
/// - `rpc_server_accept_descriptor_shortages_total`: `accept` failures for lack of a
///   descriptor (`EMFILE`, `ENFILE`).
#[derive(Debug)]
pub(super) struct ServerCollector {
    lifecycle: Lifecycle,
}

impl ServerCollector {
    pub(super) fn new(lifecycle: Lifecycle) -> Self {
        Self { lifecycle }
    }
}

impl Collector for ServerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let connections = self.lifecycle.connection_counts();
        gauge(
            &mut encoder,
            "rpc_server_requests_in_flight",
            "Inbound requests whose response has not ended.",
            self.lifecycle.inbound().current(),
        )?;
        counter(
            &mut encoder,
            "rpc_server_rejected_closing",
            "Inbound requests refused as closing, not executed (consumers re-send them).",
            self.lifecycle.rejected(),
        )?;
        gauge(
            &mut encoder,
            "rpc_server_connections_open",
            "HTTP/2 connections open on the provider listeners.",
            connections.open,
        )?;
        counter(
            &mut encoder,
            "rpc_server_goaway_sent",
            "Connections sent a GOAWAY to close gracefully.",
            connections.goaway_sent,
        )?;
        counter(
            &mut encoder,
            "rpc_server_connections_preface_timeout",
            "Connections closed: no HTTP/2 preface within the preface timeout.",
            connections.preface_timeouts,
        )?;
        counter(
            &mut encoder,
            "rpc_server_connections_idle_timeout",
            "Connections sent a GOAWAY after the idle timeout without a call.",
            connections.idle_timeouts,
        )?;
        counters(
            &mut encoder,
            "rpc_server_connections_shed",
            "Connections closed to make room (connection limit, or descriptors lacking).",
            [
                ([("reason", "never_spoken")], connections.shed_never_spoken),
                ([("reason", "idle")], connections.shed_idle),
            ],
        )?;
        counter(
            &mut encoder,
            "rpc_server_connections_refused",
            "New connections closed at the connection limit, every connection carrying a call.",
            connections.refused_at_limit,
        )?;
        counter(
            &mut encoder,
            "rpc_server_accept_descriptor_shortages",
            "Accept failures for lack of a file descriptor (EMFILE, ENFILE).",
            connections.descriptor_shortages,
        )
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rpc_lifecycle::ShutdownConfig;
    use rpc_lifecycle::{Export, StartPlan};
    use tokio::io::AsyncWriteExt;
    use tower::util::BoxCloneSyncService;

    use super::*;
    use crate::observe::scrape::encode_one;

    /// A provider on 127.0.0.1:0 whose routes answer nothing (the test only connects).
    fn export() -> Export {
        let routes = tower::ServiceExt::map_request(
            rpc_transport::ServiceRoutes::default(),
            |request: http::Request<hyper::body::Incoming>| request.map(tonic::body::Body::new),
        );
        Export {
            listener: None,
            bind: "127.0.0.1:0".parse().unwrap(),
            advertise_host: None,
            options: Default::default(),
            service: BoxCloneSyncService::new(routes),
            services: Vec::new(),
        }
    }

    #[tokio::test]
    async fn connections_and_goaways_are_counted_and_stay_counted_after_shutdown() {
        let mut config = ShutdownConfig::default();
        config.internal_signal = false;
        config.offline_request_window_timeout = Duration::from_millis(1);
        config.step_timeout = Duration::from_secs(2);
        let lifecycle = Lifecycle::new("test", config);
        let plan = StartPlan {
            exports: vec![export()],
            ..StartPlan::default()
        };
        lifecycle.start(plan).await.unwrap();
        let addr = lifecycle.servers()[0].local_addr();
        // A peer that has begun the HTTP/2 handshake gets a GOAWAY at shutdown.
        let mut peer = tokio::net::TcpStream::connect(addr).await.unwrap();
        peer.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .await
            .unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while lifecycle.connection_counts().open == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "connection not seen"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let text = encode_one(ServerCollector::new(lifecycle.clone()));
        assert!(text.contains("rpc_server_connections_open 1\n"), "{text}");
        assert!(text.contains("rpc_server_goaway_sent_total 0\n"), "{text}");
        assert!(text.contains("rpc_server_requests_in_flight 0\n"), "{text}");
        for zero in [
            "rpc_server_connections_preface_timeout_total 0\n",
            "rpc_server_connections_idle_timeout_total 0\n",
            "rpc_server_connections_shed_total{reason=\"never_spoken\"} 0\n",
            "rpc_server_connections_shed_total{reason=\"idle\"} 0\n",
            "rpc_server_connections_refused_total 0\n",
            "rpc_server_accept_descriptor_shortages_total 0\n",
        ] {
            assert!(text.contains(zero), "{zero} in {text}");
        }
        assert!(
            text.contains("rpc_server_rejected_closing_total 0\n"),
            "{text}"
        );

        let shutdown = tokio::spawn(lifecycle.before_shutdown());
        while lifecycle.connection_counts().goaway_sent == 0 {
            assert!(tokio::time::Instant::now() < deadline, "no GOAWAY sent");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // The peer leaves: the graceful close ends without waiting for the bound.
        drop(peer);
        shutdown.await.unwrap();
        let text = encode_one(ServerCollector::new(lifecycle));
        assert!(text.contains("rpc_server_connections_open 0\n"), "{text}");
        assert!(text.contains("rpc_server_goaway_sent_total 1\n"), "{text}");
    }
}
