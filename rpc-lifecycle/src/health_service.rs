//! The statuses of the gRPC health service (`grpc.health.v1.Health`) this lifecycle
//! drives: the whole server (`""`, what Kubernetes' gRPC probe asks) and each provided
//! service by its gRPC name. SERVING once registered; NOT_SERVING from shutdown step 1
//! on, and for a service while it is manually offline.

use parking_lot::Mutex;
use rpc_core::ServiceKey;
use tonic_health::ServingStatus;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};

/// The health reporter and the services it reports on.
pub(crate) struct HealthStatus {
    reporter: HealthReporter,
    /// The gRPC names of the provided services, as start-up bound them.
    names: Mutex<Vec<String>>,
}

impl Default for HealthStatus {
    fn default() -> Self {
        Self {
            reporter: HealthReporter::new(),
            names: Mutex::new(Vec::new()),
        }
    }
}

impl HealthStatus {
    /// The gRPC health service answering from these statuses.
    pub(crate) fn service(&self) -> HealthServer<HealthService> {
        HealthServer::new(HealthService::from_health_reporter(self.reporter.clone()))
    }

    /// Reports on `service` from now on (start-up, as it binds a listener).
    pub(crate) fn add(&self, service: &ServiceKey) {
        self.names.lock().push(service.interface.to_string());
    }

    /// The whole server and every service at `status`.
    pub(crate) async fn set_all(&self, status: ServingStatus) {
        let names = self.names.lock().clone();
        self.reporter.set_service_status("", status).await;
        for name in names {
            self.reporter.set_service_status(name, status).await;
        }
    }

    /// `services` at `status`, and the whole server at `whole`.
    pub(crate) async fn set_some(
        &self,
        services: &[ServiceKey],
        status: ServingStatus,
        whole: ServingStatus,
    ) {
        for service in services {
            self.reporter
                .set_service_status(&*service.interface, status)
                .await;
        }
        self.reporter.set_service_status("", whole).await;
    }
}
