//! Every backend this crate knows, in one table: its scheme, whether it talks to a
//! server over the network, the cargo feature that compiles it in, and how to build it
//! from a URL, and which layouts of entries it speaks. Adding a backend is its folder and one line in [`BACKENDS`]; everything
//! that asks "which schemes are there", "is this one compiled in" or "is it a network
//! registry" (URL checks, [`crate::connect`], the advertised-host choice in `rpc`) reads
//! this table.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use rpc_core::{Registry, RegistryError};

use crate::format::RegistryFormat;
use crate::url::RegistryUrl;

/// Builds a registry client from its parsed URL (and, for a network backend, connects).
pub type Connect = fn(RegistryUrl) -> BoxFuture<'static, Result<Arc<dyn Registry>, RegistryError>>;

/// One registry backend.
#[derive(Clone, Copy, Debug)]
pub struct Backend {
    /// Its URL scheme (`etcd` in `etcd://…`).
    pub scheme: &'static str,
    /// Whether it talks to a registry server over the network (an advertised address
    /// must then be reachable from there).
    pub network: bool,
    /// The cargo feature of `lossless-rpc-registry` (and of `lossless-rpc`) that
    /// compiles it in; `None` when it is always there.
    pub feature: Option<&'static str>,
    /// How to build it; `None` when its feature is off.
    pub connect: Option<Connect>,
    /// The layouts of entries it speaks ([`RegistryFormat::Rpc`] always first).
    pub formats: &'static [RegistryFormat],
}

/// Our layout only.
const RPC_ONLY: &[RegistryFormat] = &[RegistryFormat::Rpc];
/// Our layout and Dubbo's.
const RPC_AND_DUBBO: &[RegistryFormat] = &[RegistryFormat::Rpc, RegistryFormat::Dubbo];

/// A backend entry: an in-process one built by a plain function, or a network one
/// connected by an async function and compiled only with its feature.
macro_rules! backend {
    ($scheme:literal, in_process, $build:path) => {
        Backend {
            scheme: $scheme,
            network: false,
            feature: None,
            connect: Some(|url| Box::pin(async move { Ok(Arc::new($build(&url)?) as _) })),
            formats: RPC_ONLY,
        }
    };
    ($scheme:literal, network, feature: $feature:literal, $connect:path, $formats:expr) => {
        Backend {
            scheme: $scheme,
            network: true,
            feature: Some($feature),
            connect: {
                #[cfg(feature = $feature)]
                let connect: Option<Connect> =
                    Some(|url| Box::pin(async move { Ok(Arc::new($connect(&url).await?) as _) }));
                #[cfg(not(feature = $feature))]
                let connect: Option<Connect> = None;
                connect
            },
            formats: $formats,
        }
    };
}

/// Every backend, whether or not its feature is compiled in.
pub const BACKENDS: [Backend; 5] = [
    backend!("memory", in_process, crate::MemoryRegistry::from_url),
    backend!("static", in_process, crate::StaticRegistry::from_url),
    backend!("etcd", network, feature: "etcd", crate::etcd::EtcdRegistry::connect, RPC_ONLY),
    backend!("zookeeper", network, feature: "zookeeper", crate::zookeeper::ZooKeeperRegistry::connect, RPC_AND_DUBBO),
    backend!("nacos", network, feature: "nacos", crate::nacos::NacosRegistry::connect, RPC_AND_DUBBO),
];

/// The schemes of [`BACKENDS`], in order.
pub const SCHEMES: [&str; BACKENDS.len()] = {
    let mut schemes = [""; BACKENDS.len()];
    let mut index = 0;
    while index < BACKENDS.len() {
        schemes[index] = BACKENDS[index].scheme;
        index += 1;
    }
    schemes
};

/// The backend of `scheme`, if there is one.
pub fn backend(scheme: &str) -> Option<&'static Backend> {
    BACKENDS.iter().find(|backend| backend.scheme == scheme)
}
