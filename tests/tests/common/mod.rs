//! Helpers shared by the end-to-end tests: applications on loopback, on an in-process
//! registry hub of their own.

#![allow(dead_code)]

pub mod backend;
pub mod cluster;
pub mod dubbo;
pub mod lab;
pub mod lab_process;
pub mod page_server;
pub mod registry;
pub mod switched_registry;

use std::sync::Arc;
use std::time::Duration;

use proto::echo::echo_server::EchoServer;
use proto::greeter::greeter_server::GreeterServer;
use rpc::registry::MemoryHub;
use rpc::{Application, ApplicationBuilder, Config};
use rpc_testkit::services::{EchoProvider, GreeterProvider};

/// A configuration for tests: loopback, port 0 (the admin endpoint's too: tests run
/// side by side), no signal handlers, quick shutdown, no default log subscriber (a test
/// that wants logs calls [`logs`]).
pub fn config(name: &str) -> Config {
    let mut config = Config::default();
    config.application.name = name.to_owned();
    config.graceful_shutdown.internal_signal = false;
    config.admin.port = 0;
    config.application.logging = false;
    config
}

/// A builder whose registry is a client of `hub` with `delay` propagation delay.
pub fn builder(name: &str, hub: &MemoryHub, delay: Duration) -> ApplicationBuilder {
    builder_with(config(name), hub, delay)
}

/// As [`builder`], with a given configuration.
pub fn builder_with(config: Config, hub: &MemoryHub, delay: Duration) -> ApplicationBuilder {
    let mut builder = Application::builder(config);
    builder.registry("default", Arc::new(hub.client_with_delay(delay)));
    builder
}

/// Starts a greeter provider on `hub`.
pub async fn greeter_provider(hub: &MemoryHub) -> Application {
    let mut builder = builder("greeter-provider", hub, Duration::ZERO);
    builder.service(GreeterServer::new(GreeterProvider));
    builder.start().await.expect("provider starts")
}

/// Starts an echo provider on `hub` that works `work_ms` per request.
pub async fn echo_provider(hub: &MemoryHub, work_ms: u32, config: Config) -> Application {
    let mut builder = builder_with(config, hub, Duration::ZERO);
    builder.service(EchoServer::new(EchoProvider { work_ms }));
    builder.start().await.expect("provider starts")
}

/// Installs a test log subscriber (RUST_LOG, default warn).
pub fn logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// What a [`Scripted`] provider does with each request.
#[derive(Clone, Copy, Debug)]
pub enum Behavior {
    /// Answer at once.
    Ok,
    /// Fail with this status code.
    Fail(tonic::Code),
    /// Sleep, then answer.
    Sleep(Duration),
}

/// An echo provider whose behaviour the test sets, counting every execution.
#[derive(Clone, Debug)]
pub struct Scripted {
    /// Requests that reached the handler.
    pub calls: Arc<std::sync::atomic::AtomicUsize>,
    /// What the next requests get.
    pub behavior: Arc<parking_lot::Mutex<Behavior>>,
}

impl Scripted {
    /// A provider that behaves as `behavior`.
    pub fn new(behavior: Behavior) -> Self {
        Self {
            calls: Arc::default(),
            behavior: Arc::new(parking_lot::Mutex::new(behavior)),
        }
    }

    /// Requests executed so far.
    pub fn calls(&self) -> usize {
        self.calls.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Changes what the next requests get.
    pub fn set(&self, behavior: Behavior) {
        *self.behavior.lock() = behavior;
    }
}

#[tonic::async_trait]
impl proto::echo::echo_server::Echo for Scripted {
    async fn echo(
        &self,
        request: tonic::Request<proto::echo::EchoRequest>,
    ) -> Result<tonic::Response<proto::echo::EchoReply>, tonic::Status> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let provider = request
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let behavior = *self.behavior.lock();
        match behavior {
            Behavior::Ok => {}
            Behavior::Fail(code) => return Err(tonic::Status::new(code, "scripted failure")),
            Behavior::Sleep(duration) => tokio::time::sleep(duration).await,
        }
        Ok(tonic::Response::new(proto::echo::EchoReply {
            payload: request.into_inner().payload,
            provider,
        }))
    }
}

/// Starts a scripted provider on `hub` with `config`.
pub async fn scripted_provider(
    hub: &MemoryHub,
    scripted: &Scripted,
    config: Config,
) -> Application {
    let mut builder = builder_with(config, hub, Duration::ZERO);
    builder.service(EchoServer::new(scripted.clone()));
    builder.start().await.expect("provider starts")
}

/// The JSON lines of `path` once it holds `count` (an access log writes from a thread of
/// its own), within a bound of 10 s.
pub async fn json_lines(path: &std::path::Path, count: usize) -> Vec<serde_json::Value> {
    let read = async {
        loop {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            if text.lines().count() >= count && text.ends_with('\n') {
                return text
                    .lines()
                    .map(|line| serde_json::from_str(line).expect("a JSON line"))
                    .collect();
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .unwrap_or_else(|_| panic!("{count} lines in {}", path.display()))
}
