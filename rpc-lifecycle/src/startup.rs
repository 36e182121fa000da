//! Graceful online: references, then services, then readiness gates, then registration.
//! Each step finishes before the next begins; if one fails, what was done is undone.
//!
//! A listener this process inherited (a hot upgrade's predecessor still accepts on the
//! same socket; or systemd's socket activation) is served, but accepts nothing until the
//! gates passed, right before registration: until then the kernel gives every dial to
//! the process that is ready, and a start that fails before that point has accepted no
//! connection, so none is lost with it (`Server::serve_later`).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use rpc_core::{Instance, ManagedReference, Registry};
use rpc_transport::{Server, ServerHandle};
use tonic_health::ServingStatus;
use tracing::{Instrument, info_span};

use crate::start_plan::{Export, ReadinessGate, StartError, StartPlan};
use crate::{Lifecycle, Phase, signals};

impl Lifecycle {
    /// Brings the application online in order: subscribe references (and, for checked
    /// ones, wait for a provider) → bind listeners and serve → run readiness gates →
    /// register every exported service in every registry (honouring `delay`) → phase
    /// [`Phase::Serving`]. Installs signal handlers first when `internal_signal` is on
    /// (and the SIGUSR2 handler alone when it is off but the upgrade is enabled).
    ///
    /// # Errors
    /// The first step's [`StartError`]; by then registrations are withdrawn, listeners
    /// closed and references closed, and the phase is [`Phase::Stopped`].
    pub async fn start(&self, plan: StartPlan) -> Result<(), StartError> {
        if !self.inner.phase.advance(Phase::Starting) {
            return Err(StartError::AlreadyStarted(self.name().to_owned()));
        }
        let StartPlan {
            references,
            check_timeout,
            exports,
            gates,
            registries,
        } = plan;
        self.inner.protocols.set_registries(registries.clone());
        // One span per step, as the shutdown's steps have.
        let steps = async {
            let handled = signals::Handled::at_start(
                self.config().internal_signal,
                self.upgrade_by_signal_enabled(),
            );
            signals::install(self.clone(), handled).map_err(StartError::Signals)?;
            self.start_references(references, check_timeout)
                .instrument(info_span!("references"))
                .await?;
            let (pending, held) = self
                .start_services(exports)
                .instrument(info_span!("services"))
                .await?;
            run_gates(gates)
                .instrument(info_span!("readiness-gates"))
                .await?;
            // Ready: the inherited listeners accept from now on, then registration.
            for server in held {
                server.start_accepting();
            }
            self.register_all(pending, &registries)
                .instrument(info_span!("register"))
                .await
        }
        .instrument(info_span!("startup", app = %self.name()));
        // A signal (or before_shutdown) during start-up stops the waiting at once: a
        // provider check, a readiness gate or a registration delay can be long.
        let result = tokio::select! {
            result = steps => result,
            _ = self.inner.shutdown.start_cancelled() => Err(StartError::Interrupted),
        };
        match result {
            Ok(()) => {
                self.inner.health.set_all(ServingStatus::Serving).await;
                self.advance(Phase::Serving);
                Ok(())
            }
            Err(error) => {
                tracing::error!(app = %self.name(), %error, "start-up failed; undoing it");
                self.abort().await;
                Err(error)
            }
        }
    }

    async fn start_references(
        &self,
        references: Vec<(Arc<dyn ManagedReference>, bool)>,
        check_timeout: Duration,
    ) -> Result<(), StartError> {
        for (reference, _) in &references {
            self.inner.protocols.add_reference(reference.clone());
            reference
                .subscribe()
                .await
                .map_err(|source| StartError::Subscribe {
                    service: reference.service().clone(),
                    source,
                })?;
        }
        for (reference, check) in &references {
            if *check
                && tokio::time::timeout(check_timeout, reference.wait_for_provider())
                    .await
                    .is_err()
            {
                return Err(StartError::NoProvider {
                    service: reference.service().clone(),
                    timeout: check_timeout,
                });
            }
        }
        Ok(())
    }

    /// Binds and serves every export; returns the instances to register, and the
    /// servers of inherited listeners, which accept nothing until told (see the module
    /// documentation).
    async fn start_services(
        &self,
        exports: Vec<Export>,
    ) -> Result<(Vec<Pending>, Vec<ServerHandle>), StartError> {
        let mut pending = Vec::new();
        let mut held = Vec::new();
        for export in exports {
            // A previous generation still accepts on this address (an inherited socket,
            // or a custom stack's listener shared with a successor that takes its
            // instance ids over): this one accepts only once it is ready.
            let inherited = export.listener.is_some()
                || export
                    .services
                    .iter()
                    .any(|service| service.instance_id.is_some());
            let server = match export.listener {
                Some(listener) => Server::from_std(listener, export.options)?,
                None => Server::bind(export.bind, export.options).await?,
            };
            let addr = server.local_addr();
            let host = export
                .advertise_host
                .unwrap_or_else(|| advertised_host(addr.ip()));
            let handle = if inherited {
                let handle = server.serve_later(export.service);
                held.push(handle.clone());
                handle
            } else {
                server.serve(export.service)
            };
            tracing::info!(app = %self.name(), %addr, "serving");
            self.inner.protocols.add_server(handle);
            for service in export.services {
                self.inner.health.add(&service.key);
                self.inner.registrations.provide(service.key.clone());
                let mut instance = Instance::new(service.key, host.clone(), addr.port())
                    .with_weight(service.weight);
                if let Some(id) = service.instance_id {
                    instance.id = id;
                }
                instance.metadata = service.metadata;
                pending.push(Pending {
                    instance,
                    delay: service.delay,
                    offline: service.offline,
                });
            }
        }
        Ok((pending, held))
    }

    /// Registers every pending instance in every registry, except those to start
    /// offline: they are kept withdrawn (an online registers them), and marked offline.
    async fn register_all(
        &self,
        pending: Vec<Pending>,
        registries: &[Arc<dyn Registry>],
    ) -> Result<(), StartError> {
        let (offline, pending): (Vec<Pending>, Vec<Pending>) =
            pending.into_iter().partition(|pending| pending.offline);
        self.start_offline(offline, registries).await;
        let registrations = pending.iter().flat_map(
            |Pending {
                 instance, delay, ..
             }| {
                registries.iter().map(move |registry| async move {
                    tokio::time::sleep(*delay).await;
                    registry
                        .register(instance)
                        .await
                        .map(|()| (registry.clone(), instance.clone()))
                        .map_err(|source| StartError::Register {
                            instance: instance.id.clone(),
                            source,
                        })
                })
            },
        );
        let mut first_error = None;
        for result in join_all(registrations).await {
            match result {
                Ok(registration) => self.inner.registrations.add(registration),
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Lifecycle {
    /// Puts `offline` in the state a manual offline leaves: their registrations kept
    /// withdrawn, their health NOT_SERVING, the closing mark on their responses.
    async fn start_offline(&self, offline: Vec<Pending>, registries: &[Arc<dyn Registry>]) {
        if offline.is_empty() {
            return;
        }
        let services: Vec<_> = offline.iter().map(|p| p.instance.service.clone()).collect();
        let withdrawn = offline
            .into_iter()
            .flat_map(|pending| {
                registries
                    .iter()
                    .map(move |registry| (registry.clone(), pending.instance.clone()))
            })
            .collect();
        self.inner.registrations.keep_withdrawn(withdrawn);
        self.mark_offline(&services, true).await;
        tracing::info!(app = %self.name(), ?services, "started manually offline, as the previous generation was");
    }
}

/// An instance start-up registers once its listener serves.
struct Pending {
    instance: Instance,
    delay: Duration,
    /// Start it manually offline (see `ExportedService::offline`).
    offline: bool,
}

async fn run_gates(gates: Vec<ReadinessGate>) -> Result<(), StartError> {
    for (index, gate) in gates.into_iter().enumerate() {
        gate()
            .await
            .map_err(|source| StartError::Gate { index, source })?;
    }
    Ok(())
}

fn advertised_host(ip: IpAddr) -> String {
    if ip.is_unspecified() {
        "127.0.0.1".to_owned()
    } else {
        ip.to_string()
    }
}
