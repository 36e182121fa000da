//! An instance and its stored form in Nacos: an ephemeral Nacos instance at its host and
//! port, with its weight, its metadata, and its whole JSON under the metadata key
//! [`INSTANCE_METADATA_KEY`], in the Nacos service named [`service_name`] (see "Layout" in
//! the module documentation).

use std::collections::HashMap;

use nacos_sdk::api::naming::ServiceInstance;
use rpc_core::{Instance, InstanceId, ServiceKey};

/// The metadata key holding an instance's JSON.
pub const INSTANCE_METADATA_KEY: &str = "rpc.instance";

/// The Nacos service name of `service`: its path segment (`interface[:version][@group]`,
/// percent-encoded, so never containing Nacos' `@@` separator).
pub fn service_name(service: &ServiceKey) -> String {
    service.path_segment()
}

/// `ServiceInstance` of `instance` in `cluster`, carrying its JSON.
pub(super) fn to_nacos(
    instance: &Instance,
    name: &str,
    cluster: &str,
) -> Result<ServiceInstance, serde_json::Error> {
    let mut metadata: HashMap<String, String> = instance.metadata.clone().into_iter().collect();
    metadata.insert(
        INSTANCE_METADATA_KEY.to_owned(),
        serde_json::to_string(instance)?,
    );
    Ok(ephemeral_instance(instance, name, cluster, metadata))
}

/// The ephemeral, healthy Nacos instance of `instance` at its address and weight, in
/// service `name` and `cluster`, carrying `metadata` (both layouts write this shape).
pub(super) fn ephemeral_instance(
    instance: &Instance,
    name: &str,
    cluster: &str,
    metadata: HashMap<String, String>,
) -> ServiceInstance {
    ServiceInstance {
        instance_id: None,
        ip: instance.host.clone(),
        port: i32::from(instance.port),
        weight: f64::from(instance.weight),
        healthy: true,
        enabled: true,
        ephemeral: true,
        cluster_name: Some(cluster.to_owned()),
        service_name: Some(name.to_owned()),
        metadata,
    }
}

/// The instance a Nacos instance stands for: its JSON when it carries one (with the weight
/// Nacos holds, which an operator may have changed), else one built from Nacos' fields.
pub(super) fn from_nacos(service: &ServiceKey, nacos: ServiceInstance) -> Option<Instance> {
    let weight = if nacos.weight.is_finite() && nacos.weight > 0.0 {
        nacos.weight.round().min(f64::from(u32::MAX)) as u32
    } else {
        0
    };
    if let Some(json) = nacos.metadata.get(INSTANCE_METADATA_KEY) {
        match serde_json::from_str::<Instance>(json) {
            Ok(mut instance) if &instance.service == service => {
                instance.weight = weight;
                return Some(instance);
            }
            Ok(instance) => {
                tracing::warn!(instance = %instance.id, of = %instance.service, in_service = %service, "ignoring a Nacos instance of another service");
                return None;
            }
            Err(error) => {
                tracing::warn!(ip = %nacos.ip, port = nacos.port, %error, "a Nacos instance has unreadable rpc metadata; using Nacos' fields");
            }
        }
    }
    let port = u16::try_from(nacos.port).ok().filter(|port| *port > 0)?;
    let id = nacos
        .instance_id
        .clone()
        .unwrap_or_else(|| rpc_core::format_authority(&nacos.ip, port));
    let mut metadata = nacos.metadata;
    metadata.remove(INSTANCE_METADATA_KEY);
    Some(Instance {
        service: service.clone(),
        host: nacos.ip,
        port,
        id: InstanceId::new(id),
        weight,
        metadata: metadata.into_iter().collect(),
        start_time_ms: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_round_trip_through_nacos_fields() {
        let service = ServiceKey::new("a.B").with_version("1").with_group("g");
        let instance = Instance::new(service.clone(), "10.0.0.1", 8080)
            .with_weight(7)
            .with_metadata("zone", "z1");
        let nacos = to_nacos(&instance, &service_name(&service), "C").unwrap();
        assert_eq!(
            (nacos.ip.as_str(), nacos.port, nacos.weight),
            ("10.0.0.1", 8080, 7.0)
        );
        assert_eq!(nacos.metadata.get("zone").map(String::as_str), Some("z1"));
        assert_eq!(from_nacos(&service, nacos.clone()), Some(instance.clone()));

        // An operator changed the weight in Nacos.
        let mut reweighted = nacos.clone();
        reweighted.weight = 3.0;
        assert_eq!(from_nacos(&service, reweighted).unwrap().weight, 3);

        // Another service's instance never leaks in.
        assert_eq!(from_nacos(&ServiceKey::new("other"), nacos), None);

        // An instance registered by something else than rpc.
        let foreign = ServiceInstance {
            ip: "10.0.0.2".into(),
            port: 9000,
            weight: 1.0,
            metadata: HashMap::from([("k".to_owned(), "v".to_owned())]),
            ..ServiceInstance::default()
        };
        let read = from_nacos(&service, foreign).unwrap();
        assert_eq!(
            (read.host.as_str(), read.port, read.weight),
            ("10.0.0.2", 9000, 1)
        );
        assert_eq!(read.id.as_str(), "10.0.0.2:9000");
        assert_eq!(read.metadata.get("k").map(String::as_str), Some("v"));
    }

    #[test]
    fn service_names_keep_group_and_version_apart() {
        let plain = service_name(&ServiceKey::new("a.B"));
        let versioned = service_name(&ServiceKey::new("a.B").with_version("1"));
        let grouped = service_name(&ServiceKey::new("a.B").with_group("x@@y"));
        assert_ne!(plain, versioned);
        assert!(!grouped.contains("@@"), "{grouped}");
    }
}
