//! Start-up wiring: configuration checked against the code, registries connected,
//! references bound to their registry, the provider routes behind the provider's stack
//! (`provider_stack.rs`),
//! all handed to the lifecycle as one plan.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use rpc_cluster::ClusterReference;
use rpc_core::{Registry, RegistryError, ServiceKey};
use rpc_lifecycle::{Export, ManagedReference, StartError, StartPlan};
use rpc_transport::TransportError;

use super::admin::AdminStarted;
use super::advertise::advertised_host;
use super::agreement::{check_agreement, provided_instead};
use super::logging::install_default_subscriber;
use super::{Application, ApplicationBuilder, ApplicationError};
use crate::config::ConfigError;

impl ApplicationBuilder {
    /// Checks the configuration against the code, connects the registries and starts
    /// everything in order (see [`Lifecycle::start`](rpc_lifecycle::Lifecycle::start)).
    ///
    /// First, unless `application.logging` is false or the application installed a
    /// global `tracing` subscriber itself, installs the default one: stderr, filtered by
    /// `RUST_LOG`, else `info` for lossless-rpc's crates and `warn` for the rest.
    ///
    /// A reference to a service this same application provides (same interface, group
    /// and version) is not waited for by the `check`: its provider is this process,
    /// registered only in the last step.
    ///
    /// # Errors
    /// - [`ApplicationError::Config`] naming the key and the file when
    ///   `provider.services.<name>` or `consumer.references.<name>` names no service or
    ///   reference the code registered, with the closest real name;
    /// - [`ApplicationError::Config`] naming `consumer.references.<name>.loadbalance`
    ///   when it names no registered load balance;
    /// - [`ApplicationError::Config`] naming `provider.reflection` when it is true and no
    ///   descriptor set was registered ([`ApplicationBuilder::file_descriptor_set`]), or
    ///   one does not decode;
    /// - [`ApplicationError::NoMatchingProvider`] when a checked reference found no
    ///   provider and this application provides the interface under another group or
    ///   version;
    /// - [`ApplicationError::Admin`] naming `admin.port` (in use), `admin.host` or
    ///   `admin.token`;
    /// - otherwise the [`ApplicationError`] naming the registry, address, reference or
    ///   step that failed. What had started is undone.
    ///
    /// In a process a hot upgrade started to check its configuration
    /// (`RPC_UPGRADE=check`) nothing is started: the result is
    /// [`ApplicationError::Checked`] when the check passed, else the error, and either
    /// outcome has been reported to the old process before this returns (so the upgrade
    /// goes on, or fails with this message, whatever exit code `main` then chooses).
    pub async fn start(mut self) -> Result<Application, ApplicationError> {
        install_default_subscriber(self.config.application.logging);
        let checked = self.check_against_code();
        if self.upgrade.is_check() {
            // A hot upgrade's configuration check: what can be known without starting
            // anything (the file loaded and validated already; config and code agree).
            // The outcome goes to the old process before this returns, so that it does
            // not depend on the exit code `main` makes of the error.
            let checked = match checked {
                Ok(()) => self.export().await.map(drop),
                Err(error) => Err(error),
            };
            return Err(crate::upgrade::report_check(checked));
        }
        checked?;
        let predecessor = self
            .upgrade
            .predecessor()
            .map_err(ApplicationError::Upgrade)?;
        // The admin endpoint before anything else starts: its probes answer during the
        // rest of start-up.
        let admin = self.start_admin()?;
        let lifecycle = self.lifecycle.clone();
        let started = self.start_parts(admin, predecessor).await;
        if started.is_err() {
            // Closes the admin endpoint, and anything else still open (a failed
            // `Lifecycle::start` has already undone its own part).
            lifecycle.abort().await;
        }
        started
    }

    /// What start-up checks before it starts anything: configuration and code agree
    /// (services, references, load balances, reflection's descriptors), the channel
    /// options are in range, and the access log could be opened.
    fn check_against_code(&mut self) -> Result<(), ApplicationError> {
        let reference_keys: Vec<ServiceKey> = self
            .references
            .iter()
            .map(|(channel, _)| channel.directory().service().clone())
            .collect();
        check_agreement(&self.config, &self.services, &reference_keys)?;
        // Options given in code (`channel_options`) are checked here, before anything
        // starts; those from `consumer` were checked with the configuration.
        self.channel_options
            .check()
            .map_err(|error| ApplicationError::Start(StartError::Transport(error)))?;
        match std::mem::replace(&mut self.access_log, Ok(None)) {
            Err(error) => return Err(ApplicationError::Config(error)),
            Ok(sink) => self.access_log = Ok(sink),
        }
        if self.config.provider.reflection && self.descriptor_sets.is_empty() {
            return Err(super::reflection::no_descriptors(&self.config));
        }
        if let Some((interface, unknown)) = self.unknown_load_balances.first() {
            return Err(ApplicationError::Config(
                crate::config::ConfigError::Invalid {
                    origin: self.config.origin().to_owned(),
                    key: format!("consumer.references.{interface}.loadbalance"),
                    message: format!(
                        "{unknown}; register it with ApplicationBuilder::load_balance before builder.reference"
                    ),
                },
            ));
        }
        Ok(())
    }

    /// Start-up after the admin endpoint: registries, references, services (on the
    /// listener a hot upgrade's `predecessor` handed over, if any), the lifecycle's own
    /// steps.
    async fn start_parts(
        mut self,
        admin: Option<AdminStarted>,
        predecessor: Option<rpc_lifecycle::process::predecessor::Predecessor>,
    ) -> Result<Application, ApplicationError> {
        let registries = self.connect_registries().await?;
        let reference_registry = self.reference_registry(&registries)?;
        let references = self.managed_references(&reference_registry);
        let mut exports = self.export().await?;
        let taken = self
            .upgrade
            .taken_over(predecessor.as_ref())
            .map_err(ApplicationError::Upgrade)?;
        if let Some(export) = exports.first_mut() {
            crate::upgrade::inherit(export, taken);
        }
        let plan = StartPlan {
            references,
            check_timeout: self.config.consumer.check_timeout,
            exports,
            gates: std::mem::take(&mut self.gates),
            registries: registries.values().cloned().collect(),
        };
        // Under systemd (Type=notify) every phase from here on is told to it.
        let systemd = crate::systemd::notify_phases(&self.lifecycle);
        self.upgrade.configure(
            &self.lifecycle,
            &self.config.upgrade,
            admin.as_ref().map(|admin| admin.listener.clone()),
        );
        if let Err(error) = self.lifecycle.start(plan).await {
            return Err(self.explain(error));
        }
        crate::upgrade::serving(&self.lifecycle, &self.config.upgrade, predecessor).await;
        Ok(Application {
            admin_addr: admin.map(|admin| admin.addr),
            metrics: self.metrics,
            local_addr: self
                .lifecycle
                .servers()
                .first()
                .map(|server| server.local_addr()),
            lifecycle: self.lifecycle,
            systemd,
            resumable: self.resumable,
            references: self
                .references
                .into_iter()
                .map(|(channel, _)| channel)
                .collect(),
        })
    }

    /// The references bound to `registry`, each with whether start-up waits for its
    /// provider: `consumer.check` (or the reference's own `check`), except for a
    /// reference to a service this application provides itself.
    fn managed_references(
        &self,
        registry: &Arc<dyn Registry>,
    ) -> Vec<(Arc<dyn ManagedReference>, bool)> {
        self.references
            .iter()
            .map(|(channel, check)| {
                let key = channel.directory().service();
                let own = self.services.contains(key);
                if *check && own {
                    tracing::info!(
                        reference = %key,
                        "start-up check skipped: this application provides the service itself, \
                         and registers it once started"
                    );
                }
                let reference = ClusterReference::new(channel.clone(), registry.clone());
                (
                    Arc::new(reference) as Arc<dyn ManagedReference>,
                    *check && !own,
                )
            })
            .collect()
    }

    /// A start-up error, with what this application provides instead when a reference
    /// found no provider of its group and version.
    fn explain(&self, error: StartError) -> ApplicationError {
        if let StartError::Transport(TransportError::Bind { addr, .. }) = &error {
            return ApplicationError::Listen {
                port: addr.port(),
                hint: format!(
                    "set protocol.port in {} or RPC_PROTOCOL__PORT (0 = any free port)",
                    self.config.origin()
                ),
                source: Box::new(error),
            };
        }
        let hint = match &error {
            StartError::NoProvider { service, .. } => provided_instead(service, &self.services),
            _ => None,
        };
        match hint {
            Some(hint) => ApplicationError::NoMatchingProvider {
                source: Box::new(error),
                hint,
            },
            None => ApplicationError::Start(error),
        }
    }

    async fn connect_registries(
        &mut self,
    ) -> Result<BTreeMap<String, Arc<dyn Registry>>, ApplicationError> {
        let mut registries = std::mem::take(&mut self.registries);
        for (name, entry) in &self.config.registries {
            if registries.contains_key(name) {
                continue;
            }
            let connect = rpc_registry::connect_as(&entry.url, entry.format);
            let registry = connect.await.map_err(|source| match source {
                // A URL that is wrong (a parameter only its backend reads, too) is the
                // configuration's error: named by its file and key, exit code 2.
                RegistryError::InvalidUrl { .. } => {
                    ApplicationError::Config(ConfigError::Invalid {
                        origin: self.config.registry_url_origin(name).to_owned(),
                        key: format!("registries.{name}.url"),
                        message: source.to_string(),
                    })
                }
                source => ApplicationError::Registry {
                    name: name.clone(),
                    source,
                },
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

    async fn export(&mut self) -> Result<Vec<Export>, ApplicationError> {
        if self.services.is_empty() {
            return Ok(Vec::new());
        }
        let protocol = &self.config.protocol;
        let ip: IpAddr = protocol
            .host
            .parse()
            .map_err(|_| ApplicationError::InvalidHost(protocol.host.clone()))?;
        let registry_urls: Vec<String> = self
            .config
            .registries
            .values()
            .map(|registry| registry.url.clone())
            .collect();
        let advertised =
            advertised_host(ip, protocol.advertise_host.as_deref(), &registry_urls).await;
        tracing::info!(
            app = %self.config.application.name,
            host = %advertised.host,
            reason = %advertised.reason,
            "advertising providers at {}",
            advertised.host
        );
        let mut routes = std::mem::take(&mut self.routes);
        for key in &self.services {
            routes.serve_as(&key.interface, &key.version, &key.group);
        }
        routes.add_service(self.lifecycle.health_service());
        if self.config.provider.reflection {
            super::reflection::add(
                &mut routes,
                &self.config,
                &self.descriptor_sets,
                &self.services,
            )?;
        }
        let service = self.provider_stack(routes);
        let services = self.exported_services();
        Ok(vec![Export {
            listener: None,
            bind: SocketAddr::new(ip, protocol.port),
            advertise_host: Some(advertised.host),
            options: self.server_options.clone(),
            service,
            services,
        }])
    }
}
