//! Which form instances take in Nacos, chosen per client: our layout (`codec.rs`) or
//! Dubbo's (`dubbo_codec.rs`).

use nacos_sdk::api::naming::ServiceInstance;
use rpc_core::{Instance, ServiceKey};

use super::{codec, dubbo_codec};
use crate::RegistryFormat;
use crate::dubbo::Entry;

/// How instances are stored in Nacos: our layout (`codec.rs`) or Dubbo's
/// (`dubbo_codec.rs`).
#[derive(Clone, Copy, Debug)]
pub(super) struct NacosLayout {
    format: RegistryFormat,
}

impl NacosLayout {
    /// The layout of `format`.
    pub(super) fn new(format: RegistryFormat) -> Self {
        Self { format }
    }

    /// Whether this is Dubbo's layout.
    pub(super) fn is_dubbo(self) -> bool {
        self.format == RegistryFormat::Dubbo
    }

    /// The Nacos service name of `service`.
    pub(super) fn service_name(self, service: &ServiceKey) -> String {
        match self.format {
            RegistryFormat::Rpc => codec::service_name(service),
            RegistryFormat::Dubbo => dubbo_codec::service_name(service),
        }
    }

    /// The Nacos instance of `instance` in service `name` and `cluster`.
    ///
    /// # Errors
    /// When the instance does not serialize (our layout holds its JSON).
    pub(super) fn to_nacos(
        self,
        instance: &Instance,
        name: &str,
        cluster: &str,
    ) -> Result<ServiceInstance, serde_json::Error> {
        match self.format {
            RegistryFormat::Rpc => codec::to_nacos(instance, name, cluster),
            RegistryFormat::Dubbo => Ok(dubbo_codec::to_nacos(instance, name, cluster)),
        }
    }

    /// What the Nacos instance `nacos` of `service`'s Nacos service is (read from it).
    pub(super) fn read(self, service: &ServiceKey, nacos: ServiceInstance) -> Entry {
        match self.format {
            RegistryFormat::Rpc => {
                codec::from_nacos(service, nacos).map_or(Entry::Other, Entry::Provider)
            }
            RegistryFormat::Dubbo => dubbo_codec::from_nacos(service, nacos),
        }
    }
}
