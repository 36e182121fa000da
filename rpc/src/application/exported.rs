//! What a provider registers for each of its services: the settings of
//! `provider.services.<name>` (weight, delay, metadata), the application's name, and the
//! method names its descriptor sets give (Dubbo consumers read `methods`).

use rpc_lifecycle::ExportedService;

use super::ApplicationBuilder;

impl ApplicationBuilder {
    /// The registration of every service this application provides.
    pub(super) fn exported_services(&self) -> Vec<ExportedService> {
        // A set that does not decode is reflection's error to report, not this one's.
        let methods =
            super::descriptors::described_services(&self.descriptor_sets).unwrap_or_default();
        self.services
            .iter()
            .map(|key| {
                let settings = self
                    .config
                    .provider
                    .services
                    .get(&*key.interface)
                    .cloned()
                    .unwrap_or_default();
                let mut exported = ExportedService::new(key.clone());
                exported.weight = settings.weight;
                exported.delay = settings.delay;
                exported.metadata = settings.metadata;
                exported.metadata.insert(
                    "application".to_owned(),
                    self.config.application.name.clone(),
                );
                if let Some(names) = methods.get(&*key.interface) {
                    exported
                        .metadata
                        .entry("methods".to_owned())
                        .or_insert_with(|| names.join(","));
                }
                exported
            })
            .collect()
    }
}
