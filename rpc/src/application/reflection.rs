//! gRPC server reflection (`provider.reflection`), so that `grpcurl list`, `grpcurl
//! describe` and the reflection clients of every gRPC implementation find the
//! provider's services and their messages.
//!
//! The services are tonic-reflection's, both versions of the protocol
//! (`grpc.reflection.v1`, and `v1alpha`, which older clients and grpcio-reflection
//! still speak), over the encoded `FileDescriptorSet`s the application registered
//! (`ApplicationBuilder::file_descriptor_set`; tonic-prost-build writes one with
//! `file_descriptor_set_path`) plus the health service's, which rpc serves itself. They
//! list what this provider serves — its own services, health and reflection — rather
//! than everything the sets describe: a crate of stubs often describes more services
//! than one binary provides.

use std::collections::BTreeSet;

use rpc_core::ServiceKey;
use rpc_transport::ServiceRoutes;

use super::ApplicationError;
use super::descriptors::described_services;
use crate::config::{Config, ConfigError};

/// The key every reflection error names.
const KEY: &str = "provider.reflection";

/// The services rpc adds to every provider, listed besides the application's own.
const BUILT_IN: [&str; 3] = [
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

/// The start-up error of reflection turned on without descriptors to serve.
pub(super) fn no_descriptors(config: &Config) -> ApplicationError {
    error(
        config,
        "is true, but no descriptor set was registered: pass the services' encoded \
         FileDescriptorSet to ApplicationBuilder::file_descriptor_set (tonic-prost-build \
         writes one with file_descriptor_set_path; see docs/getting-started.md)"
            .to_owned(),
    )
}

/// Adds the reflection services (v1 and v1alpha) to `routes`: they describe what
/// `sets` hold and list the `served` services, health and reflection. A served service
/// no set describes is listed all the same, with a warning (a client that asks for its
/// descriptor is told it is not found).
///
/// # Errors
/// [`ApplicationError::Config`] naming `provider.reflection` when a set does not decode.
pub(super) fn add(
    routes: &mut ServiceRoutes,
    config: &Config,
    sets: &[&'static [u8]],
    served: &[ServiceKey],
) -> Result<(), ApplicationError> {
    let described = described_services(sets).map_err(|message| error(config, message))?;
    let served: BTreeSet<&str> = served.iter().map(|key| &*key.interface).collect();
    for service in served.iter().filter(|name| !described.contains_key(**name)) {
        tracing::warn!(
            service,
            "provider.reflection: no registered descriptor set describes this service; \
             reflection lists it, but cannot describe it (register its set with \
             ApplicationBuilder::file_descriptor_set)"
        );
    }
    let builder = || {
        let mut builder = tonic_reflection::server::Builder::configure();
        for set in sets {
            builder = builder.register_encoded_file_descriptor_set(set);
        }
        builder = builder
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(
                tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
            );
        for name in served.iter().copied().chain(BUILT_IN) {
            builder = builder.with_service_name(name);
        }
        builder
    };
    let invalid = |error: tonic_reflection::server::Error| {
        self::error(
            config,
            format!("a registered descriptor set is invalid: {error}"),
        )
    };
    routes.add_service(builder().build_v1().map_err(invalid)?);
    routes.add_service(builder().build_v1alpha().map_err(invalid)?);
    Ok(())
}

fn error(config: &Config, message: String) -> ApplicationError {
    ApplicationError::Config(ConfigError::Invalid {
        origin: config.origin().to_owned(),
        key: KEY.to_owned(),
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_that_are_not_a_set_name_the_key() {
        let mut routes = ServiceRoutes::default();
        let config = Config::default();
        let error = add(&mut routes, &config, &[b"\xff\xff not protobuf"], &[])
            .unwrap_err()
            .to_string();
        assert!(error.contains("provider.reflection"), "{error}");
        assert!(error.contains("file_descriptor_set"), "{error}");
    }
}
