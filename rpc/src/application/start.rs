//! Start-up wiring: registries connected, references bound to their registry, the
//! provider routes behind the provider filter, all handed to the lifecycle as one plan.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use rpc_cluster::ClusterReference;
use rpc_core::Registry;
use rpc_core::lifecycle::{Export, ExportedService, ManagedReference, StartPlan};
use rpc_filter::graceful::ProviderGracefulLayer;
use tower_layer::Layer;

use super::{Application, ApplicationBuilder, ApplicationError};
use crate::observe;

impl ApplicationBuilder {
    /// Connects the registries and starts everything in order (see
    /// [`Lifecycle::start`]).
    ///
    /// # Errors
    /// [`ApplicationError`] naming the registry, address, reference or step that failed;
    /// what had started is undone.
    pub async fn start(self) -> Result<Application, ApplicationError> {
        // The admin endpoint first: its probes answer during the rest of start-up.
        let admin_addr = self.start_admin()?;
        let lifecycle = self.lifecycle.clone();
        let started = self.start_parts(admin_addr).await;
        if started.is_err() {
            // Closes the admin endpoint, and anything else still open (a failed
            // `Lifecycle::start` has already undone its own part).
            lifecycle.abort().await;
        }
        started
    }

    async fn start_parts(
        mut self,
        admin_addr: Option<SocketAddr>,
    ) -> Result<Application, ApplicationError> {
        let registries = self.connect_registries().await?;
        let reference_registry = self.reference_registry(&registries)?;
        let references: Vec<(Arc<dyn ManagedReference>, bool)> = self
            .references
            .iter()
            .map(|(channel, check)| {
                let reference = ClusterReference::new(channel.clone(), reference_registry.clone());
                (Arc::new(reference) as Arc<dyn ManagedReference>, *check)
            })
            .collect();
        let exports = self.export()?;
        let plan = StartPlan {
            references,
            check_timeout: self.config.consumer.check_timeout,
            exports,
            gates: std::mem::take(&mut self.gates),
            registries: registries.values().cloned().collect(),
        };
        // Under systemd (Type=notify) every phase from here on is told to it.
        let systemd = crate::systemd::notify_phases(&self.lifecycle);
        self.lifecycle.start(plan).await?;
        Ok(Application {
            admin_addr,
            metrics: self.metrics,
            local_addr: self
                .lifecycle
                .servers()
                .first()
                .map(|server| server.local_addr()),
            lifecycle: self.lifecycle,
            systemd,
            references: self
                .references
                .into_iter()
                .map(|(channel, _)| channel)
                .collect(),
        })
    }

    async fn connect_registries(
        &mut self,
    ) -> Result<BTreeMap<String, Arc<dyn Registry>>, ApplicationError> {
        let mut registries = std::mem::take(&mut self.registries);
        for (name, entry) in &self.config.registries {
            if registries.contains_key(name) {
                continue;
            }
            let registry = rpc_registry::connect(&entry.url).await.map_err(|source| {
                ApplicationError::Registry {
                    name: name.clone(),
                    source,
                }
            })?;
            registries.insert(name.clone(), registry);
        }
        // Counted from here on, whether built from the URL or given in code.
        Ok(registries
            .into_iter()
            .map(|(name, registry)| {
                let metered = self.metrics.observe_registry(&name, registry);
                (name, metered)
            })
            .collect())
    }

    fn reference_registry(
        &self,
        registries: &BTreeMap<String, Arc<dyn Registry>>,
    ) -> Result<Arc<dyn Registry>, ApplicationError> {
        match &self.config.consumer.registry {
            Some(name) => registries
                .get(name)
                .cloned()
                .ok_or_else(|| ApplicationError::UnknownRegistry(name.clone())),
            None => {
                registries.values().next().cloned().ok_or_else(|| {
                    ApplicationError::UnknownRegistry("(none configured)".to_owned())
                })
            }
        }
    }

    fn export(&mut self) -> Result<Vec<Export>, ApplicationError> {
        if self.services.is_empty() {
            return Ok(Vec::new());
        }
        let protocol = &self.config.protocol;
        let ip: IpAddr = protocol
            .host
            .parse()
            .map_err(|_| ApplicationError::InvalidHost(protocol.host.clone()))?;
        let mut routes = std::mem::take(&mut self.routes);
        routes.add_service(self.lifecycle.health_service());
        let graceful =
            ProviderGracefulLayer::new(self.lifecycle.provider_handles()).layer(routes.routes());
        let service = observe::provider_service(graceful, &self.metrics, &self.config.tracing);
        let services = self
            .services
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
                exported
            })
            .collect();
        Ok(vec![Export {
            bind: SocketAddr::new(ip, protocol.port),
            advertise_host: protocol.advertise_host.clone(),
            options: self.server_options.clone(),
            service,
            services,
        }])
    }
}
