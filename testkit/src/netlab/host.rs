//! One host of the lab: its namespace, its address, and programs run inside it.

use std::future::Future;
use std::net::Ipv4Addr;

use super::faults::Fault;

/// A host: a network namespace with one address. A clone names the same host (the
/// lab removes it, not its handles).
#[derive(Clone, Debug)]
pub struct Host {
    namespace: String,
    address: Ipv4Addr,
}

impl Host {
    pub(super) fn new(namespace: String, address: Ipv4Addr) -> Self {
        Self { namespace, address }
    }

    /// The namespace's name (`ip netns exec NAME …` runs a program inside).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The host's address on the lab's network.
    pub fn address(&self) -> Ipv4Addr {
        self.address
    }

    /// Runs `program` inside this host: on a thread of its own that entered the host's
    /// network namespace, under a current-thread tokio runtime (so every socket the
    /// program opens, and every thread it starts, is the host's). Returns what the
    /// program returns; a panic inside is resumed here.
    ///
    /// # Panics
    /// When the namespace cannot be entered.
    pub fn run<F, Fut, T>(&self, program: F) -> impl Future<Output = T> + Send + 'static
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T>,
        T: Send + 'static,
    {
        let path = format!("/run/netns/{}", self.namespace);
        let (done, result) = tokio::sync::oneshot::channel();
        let thread = std::thread::spawn(move || {
            let namespace = std::fs::File::open(&path).expect("the host's namespace exists");
            nix::sched::setns(namespace, nix::sched::CloneFlags::CLONE_NEWNET)
                .expect("enter the host's network namespace");
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the host");
            let _ = done.send(runtime.block_on(program()));
        });
        async move {
            match result.await {
                Ok(value) => value,
                Err(_) => match thread.join() {
                    Err(panic) => std::panic::resume_unwind(panic),
                    Ok(()) => unreachable!("the program's thread sends before it ends"),
                },
            }
        }
    }

    /// Applies `fault` to this host until [`Host::restore`] (one fault at a time:
    /// applying another replaces it).
    ///
    /// # Panics
    /// When nftables refuses the rules.
    pub fn apply(&self, fault: Fault) {
        fault.apply(&self.namespace);
    }

    /// Removes the fault of this host: its traffic flows again.
    pub fn restore(&self) {
        Fault::clear(&self.namespace);
    }
}
