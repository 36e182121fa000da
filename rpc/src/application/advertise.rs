//! The host consumers dial: `protocol.advertise_host` when set, else an address of this
//! host that other hosts can reach.
//!
//! A provider bound to a wildcard (`0.0.0.0`, `::`) listens on every interface but must
//! register one address. Advertising loopback there (as before issue 15) makes every
//! consumer on another host, e.g. in another Kubernetes pod, dial itself. The choice, in
//! order:
//!
//! 1. the address of the interface that routes to the first network registry: a UDP
//!    socket `connect`ed to the registry's host (nothing is sent; the kernel only picks
//!    the route and the source address) — the address the registry, and most likely its
//!    other clients, see this host by (the approach of Dubbo's `NetUtils` and
//!    `local-ip-address`);
//! 2. the first non-loopback address of an interface that is up, of the bound family;
//! 3. loopback, with a warning: this host has no other address.
//!
//! Loopback is chosen without a warning only when the listener is bound to loopback. The
//! choice and its reason are logged at start-up (info).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use rpc_registry::RegistryUrl;

/// The host to register and why it was chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Advertised {
    /// What consumers dial.
    pub(super) host: String,
    /// Why, for the start-up log.
    pub(super) reason: String,
}

/// The host to advertise for a listener bound to `bind`: `configured` if set, the bound
/// address if it is not a wildcard, else what the route to `registries` or this host's
/// interfaces give (see the module doc).
pub(super) async fn advertised_host(
    bind: IpAddr,
    configured: Option<&str>,
    registries: &[String],
) -> Advertised {
    if let Some(host) = configured {
        return Advertised {
            host: host.to_owned(),
            reason: "protocol.advertise_host".to_owned(),
        };
    }
    if !bind.is_unspecified() {
        return Advertised {
            host: bind.to_string(),
            reason: "the bound address".to_owned(),
        };
    }
    let route = route_to_registry(bind, registries).await;
    choose(bind, route, &interfaces())
}

/// The decision of steps 1–3 once the route (registry and local address) and the
/// interfaces (name and address) are known.
fn choose(
    bind: IpAddr,
    route: Option<(String, IpAddr)>,
    interfaces: &[(String, IpAddr)],
) -> Advertised {
    if let Some((registry, local)) = route.filter(|(_, local)| usable(*local, bind)) {
        return Advertised {
            host: local.to_string(),
            reason: format!(
                "bound to {bind}: the address of the interface that routes to the registry at {registry}"
            ),
        };
    }
    if let Some((name, address)) = interfaces.iter().find(|(_, ip)| usable(*ip, bind)) {
        return Advertised {
            host: address.to_string(),
            reason: format!("bound to {bind}: the first non-loopback interface, {name}"),
        };
    }
    let loopback: IpAddr = if bind.is_ipv4() {
        Ipv4Addr::LOCALHOST.into()
    } else {
        Ipv6Addr::LOCALHOST.into()
    };
    tracing::warn!(
        %bind,
        "no non-loopback address found: advertising {loopback}, which consumers on other \
         hosts cannot reach; set protocol.advertise_host"
    );
    Advertised {
        host: loopback.to_string(),
        reason: format!("bound to {bind}, and this host has no non-loopback address"),
    }
}

/// Whether `ip` can be advertised for a listener bound to the wildcard `bind`: same
/// family, not loopback, not unspecified, and (IPv6) not link-local, which would need a
/// zone to dial.
fn usable(ip: IpAddr, bind: IpAddr) -> bool {
    let link_local_v6 = matches!(ip, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80);
    ip.is_ipv4() == bind.is_ipv4() && !ip.is_loopback() && !ip.is_unspecified() && !link_local_v6
}

/// The first network registry's host and the local address the kernel would send to it
/// from; `None` for in-process or static registries, or when no route exists.
async fn route_to_registry(bind: IpAddr, registries: &[String]) -> Option<(String, IpAddr)> {
    for url in registries {
        let Ok(url) = RegistryUrl::parse(url) else {
            continue;
        };
        if !rpc_registry::backend(url.scheme()).is_some_and(|backend| backend.network) {
            continue;
        }
        for host in url.hosts() {
            // The port matters to no route; 9 (discard) stands in when none was given.
            let authority = host.authority(9);
            if let Some(local) = local_address_towards(bind, &authority).await {
                return Some((authority, local));
            }
        }
    }
    None
}

/// The source address of a datagram from `bind`'s family to `authority`, found by
/// `connect` on a UDP socket (which sends nothing).
async fn local_address_towards(bind: IpAddr, authority: &str) -> Option<IpAddr> {
    let target = tokio::net::lookup_host(authority)
        .await
        .ok()?
        .find(|addr| addr.is_ipv4() == bind.is_ipv4())?;
    let socket = tokio::net::UdpSocket::bind(SocketAddr::new(bind, 0))
        .await
        .ok()?;
    socket.connect(target).await.ok()?;
    socket.local_addr().ok().map(|addr| addr.ip())
}

/// The addresses of this host's interfaces that are up, with their names, in the order
/// the system lists them.
fn interfaces() -> Vec<(String, IpAddr)> {
    let Ok(addresses) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    addresses
        .filter(|entry| entry.flags.contains(nix::net::if_::InterfaceFlags::IFF_UP))
        .filter_map(|entry| {
            let address = entry.address?;
            let ip = if let Some(v4) = address.as_sockaddr_in() {
                IpAddr::V4(v4.ip())
            } else {
                IpAddr::V6(address.as_sockaddr_in6()?.ip())
            };
            Some((entry.interface_name, ip))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn eth0() -> Vec<(String, IpAddr)> {
        vec![
            ("lo".to_owned(), ip("127.0.0.1")),
            ("lo".to_owned(), ip("::1")),
            ("eth0".to_owned(), ip("fe80::1")),
            ("eth0".to_owned(), ip("10.1.2.3")),
            ("eth0".to_owned(), ip("fd00::3")),
        ]
    }

    #[test]
    fn the_route_to_the_registry_wins_over_the_first_interface() {
        let route = Some(("10.9.0.1:2379".to_owned(), ip("10.1.2.4")));
        let chosen = choose(ip("0.0.0.0"), route, &eth0());
        assert_eq!(chosen.host, "10.1.2.4");
        assert!(
            chosen
                .reason
                .contains("routes to the registry at 10.9.0.1:2379")
        );
    }

    #[test]
    fn a_registry_on_loopback_falls_back_to_the_first_non_loopback_interface() {
        let route = Some(("127.0.0.1:2379".to_owned(), ip("127.0.0.1")));
        let chosen = choose(ip("0.0.0.0"), route, &eth0());
        assert_eq!(chosen.host, "10.1.2.3");
        assert!(chosen.reason.contains("eth0"), "{}", chosen.reason);
        // IPv6: the global address, not the link-local one.
        assert_eq!(choose(ip("::"), None, &eth0()).host, "fd00::3");
    }

    #[test]
    fn loopback_only_when_nothing_else_exists() {
        let only_lo = &eth0()[..2];
        assert_eq!(choose(ip("0.0.0.0"), None, only_lo).host, "127.0.0.1");
        assert_eq!(choose(ip("::"), None, only_lo).host, "::1");
    }

    #[tokio::test]
    async fn a_set_or_specific_address_is_kept() {
        let kept = advertised_host(ip("0.0.0.0"), Some("pod.example"), &[]).await;
        assert_eq!(kept.host, "pod.example");
        let bound = advertised_host(ip("127.0.0.1"), None, &[]).await;
        assert_eq!(bound.host, "127.0.0.1");
    }

    /// On this machine: a wildcard bind never advertises loopback when an interface
    /// that is up has another address, whatever the registry.
    #[tokio::test]
    async fn a_wildcard_bind_advertises_a_non_loopback_address_of_this_host() {
        let registries = ["etcd://127.0.0.1:2379".to_owned(), "memory://".to_owned()];
        let chosen = advertised_host(ip("0.0.0.0"), None, &registries).await;
        let host: IpAddr = chosen.host.parse().unwrap();
        let others: Vec<IpAddr> = interfaces()
            .into_iter()
            .map(|(_, ip)| ip)
            .filter(|ip| usable(*ip, IpAddr::V4(Ipv4Addr::UNSPECIFIED)))
            .collect();
        if others.is_empty() {
            assert!(host.is_loopback(), "{chosen:?}");
        } else {
            assert!(others.contains(&host), "{chosen:?} not among {others:?}");
        }
    }
}
