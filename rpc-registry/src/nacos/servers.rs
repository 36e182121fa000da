//! Which of a client's servers nacos-sdk is given.
//!
//! The SDK starts at a random server of its list and does not move on from a bad one
//! within any bound of ours: it dials with no connect timeout, so a silent server (its
//! host partitioned: packets dropped, no reset) holds the connection for the kernel's SYN
//! retries, about two minutes; and it retries a refusing one (a member that crashed)
//! until our bound passes. Either way an application could not start while one member
//! of a Nacos cluster was down or cut off (seen in `tests/lab_cluster.rs`: 3 of 4 runs
//! with a killed member). So when the URL names several servers, each one's gRPC port is
//! dialled first, all at once, for a third of the connect timeout, and only those that
//! accept are handed to the SDK. A server left out is logged (that SDK connection never
//! uses it; a later failover, `connection.rs`, tries every server again); when none accepts, the SDK gets every server, as before (and the
//! connect fails as it did, its cause told by `remote::probe`).

use crate::nacos::config::NacosConfig;
use crate::remote::probe::not_accepting;

/// The servers (`host:port`, HTTP ports) to hand the SDK, in the URL's order.
pub(super) async fn for_the_sdk(config: &NacosConfig) -> Vec<String> {
    let endpoints = &config.network.endpoints;
    if endpoints.len() < 2 {
        return endpoints.clone();
    }
    let grpc: Vec<String> = endpoints
        .iter()
        .map(|endpoint| grpc_endpoint(endpoint, config.grpc_port))
        .collect();
    let not_accepted = not_accepting(&grpc, config.network.connect_timeout / 3).await;
    if not_accepted.is_empty() || not_accepted.len() == endpoints.len() {
        return endpoints.clone();
    }
    let (mut chosen, mut left_out) = (Vec::new(), Vec::new());
    for (endpoint, grpc) in endpoints.iter().zip(&grpc) {
        if not_accepted.contains(grpc) {
            left_out.push(endpoint.clone());
        } else {
            chosen.push(endpoint.clone());
        }
    }
    tracing::warn!(
        servers = ?left_out,
        "Nacos servers left out of this client: their gRPC port did not accept a connection \
         within a third of connect_timeout (nacos-sdk would not move on from them in time)"
    );
    chosen
}

/// Where the SDK dials `endpoint` (an HTTP `host:port`): `grpc_port` when set, else the
/// HTTP port + 1000, Nacos's convention.
fn grpc_endpoint(endpoint: &str, grpc_port: Option<u16>) -> String {
    let Some((host, port)) = endpoint.rsplit_once(':') else {
        return endpoint.to_owned();
    };
    let grpc = grpc_port.or_else(|| port.parse::<u16>().ok()?.checked_add(1000));
    match grpc {
        Some(grpc) => format!("{host}:{grpc}"),
        None => endpoint.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::RegistryUrl;

    fn config(url: &str) -> NacosConfig {
        NacosConfig::from_url(&RegistryUrl::parse(url).expect("a URL")).expect("a config")
    }

    #[test]
    fn the_grpc_port_is_the_http_port_plus_1000_unless_set() {
        assert_eq!(grpc_endpoint("10.0.0.1:8848", None), "10.0.0.1:9848");
        assert_eq!(grpc_endpoint("[::1]:8848", None), "[::1]:9848");
        assert_eq!(grpc_endpoint("h:8848", Some(7000)), "h:7000");
    }

    /// A loopback port that neither accepts nor refuses: a listener with a backlog of 0
    /// (Linux queues one connection), its queue filled and never accepted, so the
    /// kernel drops further SYNs — as a partitioned host does.
    async fn silent_port() -> (tokio::net::TcpListener, Vec<tokio::net::TcpStream>, u16) {
        let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
        socket
            .bind("127.0.0.1:0".parse().expect("an address"))
            .expect("bind");
        let listener = socket.listen(0).expect("listen");
        let port = listener.local_addr().expect("addr").port();
        let mut queued = Vec::new();
        for _ in 0..2 {
            let attempt = tokio::time::timeout(
                Duration::from_millis(200),
                tokio::net::TcpStream::connect(("127.0.0.1", port)),
            );
            if let Ok(Ok(stream)) = attempt.await {
                queued.push(stream);
            }
        }
        (listener, queued, port)
    }

    #[tokio::test]
    async fn servers_that_do_not_accept_are_left_out() {
        let listening = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let accepts = listening.local_addr().expect("addr").port();
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let refuses = closed.local_addr().expect("addr").port();
        drop(closed);
        let (_listener, _queued, silent) = silent_port().await;
        // Each server's HTTP port is its gRPC port - 1000.
        let http = |grpc: u16| format!("127.0.0.1:{}", grpc - 1000);
        let url = format!(
            "nacos://{},{},{}?connect_timeout=600ms",
            http(accepts),
            http(silent),
            http(refuses)
        );
        assert_eq!(for_the_sdk(&config(&url)).await, [http(accepts)]);
        // With `grpc_port`, every server is dialled there.
        let url = format!(
            "nacos://{},{}?grpc_port={silent}&connect_timeout=600ms",
            http(accepts),
            http(refuses)
        );
        assert_eq!(
            for_the_sdk(&config(&url)).await.len(),
            2,
            "no server accepts: the SDK gets them all"
        );
    }
}
