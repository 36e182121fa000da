//! A provider's hot upgrade on its simulated host: the framework's own upgrade sequence
//! (`Application::upgrade`), whose next generation is a new `Application` on the same
//! host (`ApplicationBuilder::upgrade_spawner` and `take_over`) instead of a new
//! process. The generations share the host's listener (`network.rs`), so the new one
//! accepts on the old one's address, registers its instance ids and says ready; only
//! then does the old one stop accepting, give its registrations up, drain and end.

use std::sync::Arc;

use async_trait::async_trait;
use rpc::lifecycle::{Handoff, Spawner, Successor};
use rpc::{Application, ApplicationBuilder};
use tokio::sync::{mpsc, oneshot};

/// The generations of a provider on one host: how each is built, and where each
/// started by an upgrade goes (the host's command loop).
#[derive(Clone)]
pub struct Generations {
    build: Arc<dyn Fn() -> ApplicationBuilder + Send + Sync>,
    started: mpsc::UnboundedSender<Application>,
}

impl Generations {
    /// Generations built by `build` (everything but the upgrade's spawner), each
    /// started by an upgrade sent to `started`.
    pub fn new(
        build: impl Fn() -> ApplicationBuilder + Send + Sync + 'static,
        started: mpsc::UnboundedSender<Application>,
    ) -> Self {
        Self {
            build: Arc::new(build),
            started,
        }
    }

    /// A builder of a generation whose upgrade starts the next one.
    pub fn builder(&self) -> ApplicationBuilder {
        let mut builder = (self.build)();
        builder.upgrade_spawner(Arc::new(SimSpawner {
            generations: self.clone(),
        }));
        builder
    }
}

/// Starts a provider's next generation on its own host.
struct SimSpawner {
    generations: Generations,
}

#[async_trait]
impl Spawner for SimSpawner {
    /// The configuration is the simulator's own: nothing to check.
    async fn check(&self) -> Result<(), String> {
        Ok(())
    }

    fn spawn(&self, handoff: Handoff) -> Result<Box<dyn Successor>, String> {
        let mut builder = self.generations.builder();
        builder.take_over(handoff);
        let (ready, is_ready) = oneshot::channel();
        let started = self.generations.started.clone();
        // On the host's runtime: a crash of the host ends it too.
        let start = tokio::spawn(async move {
            match builder.start().await {
                Ok(app) => {
                    let _ = started.send(app);
                    let _ = ready.send(Ok(()));
                }
                Err(error) => drop(ready.send(Err(error.to_string()))),
            }
        });
        Ok(Box::new(SimSuccessor { is_ready, start }))
    }
}

/// A generation being started by [`SimSpawner`].
struct SimSuccessor {
    is_ready: oneshot::Receiver<Result<(), String>>,
    /// Its start-up, stopped if the upgrade gives up on it.
    start: tokio::task::JoinHandle<()>,
}

#[async_trait]
impl Successor for SimSuccessor {
    /// Every generation shares the simulator's process.
    fn pid(&self) -> u32 {
        std::process::id()
    }

    async fn ready(&mut self) -> Result<(), String> {
        (&mut self.is_ready)
            .await
            .unwrap_or_else(|_| Err("the generation's start task ended".into()))
    }

    /// Stops a start-up the upgrade gave up on (the old generation registers its
    /// instances again).
    async fn abandon(self: Box<Self>) -> String {
        self.start.abort();
        String::new()
    }

    fn taken_over(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        Box::new(())
    }
}
