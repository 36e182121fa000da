//! Apache Dubbo's registry layout ([`RegistryFormat::Dubbo`](crate::RegistryFormat)),
//! spoken by the ZooKeeper and Nacos backends beside our own, so that Dubbo consumers
//! find our providers and our consumers find Dubbo providers.
//!
//! # What is supported
//! **Interface-level registration and discovery**, the layout every Dubbo since 2.7
//! reads and Dubbo 3 still writes by default (`register-mode: all`):
//! - ZooKeeper: one ephemeral znode per provider and interface,
//!   `/dubbo/<interface>/providers/<the provider URL, URL-encoded>` (the root is the URL's
//!   `root`, default `/dubbo` in this format);
//! - Nacos: the service `providers:<interface>:<version>:<group>` in the URL's group, one
//!   ephemeral instance per provider with the URL's parameters as metadata.
//!
//! A provider registers `tri://host:port/<interface>?…` with the parameters Dubbo
//! consumers read (see [`provider_url`]). A subscription lists the same place and keeps
//! the entries that are providers of its interface, version and group, over `tri` or
//! `grpc` (see [`entry`]); an entry it cannot use (another protocol, no port, a
//! malformed URL) is skipped with one log line and counted, and never hides the good ones.
//!
//! **Not supported**: application-level discovery (Dubbo 3's `/services/<application>`
//! and its metadata service); Dubbo 3 consumers fall back to the interface level when an
//! interface has no application-level providers, which is what they find for ours.
//! Our consumers do not register themselves under `consumers/` (Dubbo's consumers do, for
//! its admin console only).
//!
//! # Files
//! `url.rs` (a Dubbo URL: reading, writing, its node-name form), `instance.rs` (an
//! instance as a provider URL, and which entries a subscription takes).

mod instance;
mod url;

pub use instance::{Entry, INSTANCE_PARAMETER, PROTOCOLS, entry, provider_url};
pub use url::DubboUrl;

/// The root of Dubbo's ZooKeeper layout when the URL gives no `root`.
pub const DEFAULT_ZOOKEEPER_ROOT: &str = "/dubbo";
