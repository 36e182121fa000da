//! An instance in Dubbo's Nacos layout: the service `providers:<interface>:<version>:<group>`
//! (Dubbo's `NacosServiceName`), one ephemeral Nacos instance per provider at its address,
//! its provider URL's parameters as the instance's metadata with `protocol` and `path`
//! beside them, as Dubbo's Nacos registry writes and reads them.

use std::collections::HashMap;

use nacos_sdk::api::naming::ServiceInstance;
use rpc_core::{Instance, ServiceKey};

use crate::dubbo::{self, DubboUrl, Entry};

/// The metadata keys Dubbo's Nacos registry adds to the URL's parameters.
const PROTOCOL_KEY: &str = "protocol";
const PATH_KEY: &str = "path";

/// The Nacos service name of `service`'s providers in Dubbo's layout.
pub(super) fn service_name(service: &ServiceKey) -> String {
    format!(
        "providers:{}:{}:{}",
        service.interface, service.version, service.group
    )
}

/// The Nacos instance of `instance` in service `name` and `cluster`: its provider URL's
/// parameters as metadata.
pub(super) fn to_nacos(instance: &Instance, name: &str, cluster: &str) -> ServiceInstance {
    let url = dubbo::provider_url(instance);
    let mut metadata: HashMap<String, String> = url.parameters.into_iter().collect();
    metadata.insert(PROTOCOL_KEY.to_owned(), url.protocol);
    metadata.insert(PATH_KEY.to_owned(), url.path);
    super::codec::ephemeral_instance(instance, name, cluster, metadata)
}

/// What the Nacos instance `nacos` of `wanted`'s providers service is: its URL is
/// rebuilt from its address and metadata (protocol `dubbo` when none is given, as Dubbo
/// reads it), with the weight Nacos holds (an operator may have changed it).
pub(super) fn from_nacos(wanted: &ServiceKey, nacos: ServiceInstance) -> Entry {
    let Ok(port) = u16::try_from(nacos.port) else {
        return Entry::Unusable(format!("port {} is not a TCP port", nacos.port));
    };
    let mut parameters: std::collections::BTreeMap<String, String> =
        nacos.metadata.into_iter().collect();
    let protocol = parameters
        .remove(PROTOCOL_KEY)
        .unwrap_or_else(|| "dubbo".to_owned());
    let path = parameters.remove(PATH_KEY).unwrap_or_default();
    if nacos.weight.is_finite() && nacos.weight >= 0.0 {
        let weight = nacos.weight.round().min(f64::from(u32::MAX)) as u32;
        parameters.insert("weight".to_owned(), weight.to_string());
    }
    let url = DubboUrl {
        protocol,
        host: nacos.ip,
        port: Some(port).filter(|port| *port > 0),
        path,
        parameters,
    };
    dubbo::entry(&url, wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_round_trips_through_dubbos_nacos_fields() {
        let service = ServiceKey::new("a.B").with_version("1.0.0").with_group("g");
        assert_eq!(service_name(&service), "providers:a.B:1.0.0:g");
        assert_eq!(service_name(&ServiceKey::new("a.B")), "providers:a.B::");
        let instance = Instance::new(service.clone(), "10.0.0.1", 8080)
            .with_weight(7)
            .with_metadata("application", "shop");
        let nacos = to_nacos(&instance, &service_name(&service), "DEFAULT");
        for (key, value) in [
            ("protocol", "tri"),
            ("path", "a.B"),
            ("interface", "a.B"),
            ("version", "1.0.0"),
            ("group", "g"),
            ("side", "provider"),
            ("application", "shop"),
        ] {
            assert_eq!(
                nacos.metadata.get(key).map(String::as_str),
                Some(value),
                "{key}"
            );
        }
        assert_eq!(
            from_nacos(&service, nacos.clone()),
            Entry::Provider(instance.clone())
        );

        let mut reweighted = nacos.clone();
        reweighted.weight = 3.0;
        let Entry::Provider(read) = from_nacos(&service, reweighted) else {
            panic!("not a provider");
        };
        assert_eq!(read.weight, 3);

        let mut other = nacos;
        other.metadata.insert("protocol".into(), "dubbo".into());
        assert!(
            matches!(from_nacos(&service, other), Entry::Unusable(reason) if reason.contains("protocol `dubbo`"))
        );
    }
}
