//! What the application's encoded `FileDescriptorSet`s (`ApplicationBuilder::file_descriptor_set`)
//! describe: each service by full name, with its methods. Reflection lists the services;
//! a provider registers the methods (Dubbo's `methods` parameter).

use std::collections::BTreeMap;

use prost::Message as _;

/// The services `sets` describe, by full name (`package.Service`), each with its method
/// names in the order of the `.proto`.
///
/// # Errors
/// A message for a set that is not an encoded `FileDescriptorSet`.
pub(super) fn described_services(sets: &[&[u8]]) -> Result<BTreeMap<String, Vec<String>>, String> {
    let mut services = BTreeMap::new();
    for set in sets {
        let set = prost_types::FileDescriptorSet::decode(*set).map_err(|error| {
            format!(
                "a set passed to ApplicationBuilder::file_descriptor_set is not an encoded \
                 FileDescriptorSet: {error}"
            )
        })?;
        for file in set.file {
            let package = file.package.unwrap_or_default();
            for service in file.service {
                let name = service.name.unwrap_or_default();
                let full = if package.is_empty() {
                    name
                } else {
                    format!("{package}.{name}")
                };
                let methods = service.method.into_iter().filter_map(|method| method.name);
                services.insert(full, methods.collect());
            }
        }
    }
    Ok(services)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_come_with_their_methods() {
        let services = described_services(&[tonic_health::pb::FILE_DESCRIPTOR_SET]).unwrap();
        assert_eq!(services["grpc.health.v1.Health"], ["Check", "Watch"]);
        assert!(described_services(&[b"\xff\xff"]).is_err());
    }
}
