//! The one run of the shutdown sequence an application gets: started once however often
//! it is asked for, interrupted by a second signal, and its report handed to everyone
//! who waits.

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::shutdown_report::{Interrupt, ShutdownReport};
use crate::step::StepReport;

/// What starts, interrupts and publishes the shutdown of one application.
#[derive(Default)]
pub(crate) struct ShutdownControl {
    /// The run under way (or finished): every caller awaits the same one.
    run: Mutex<Option<Shared<BoxFuture<'static, ShutdownReport>>>>,
    finished: watch::Sender<Option<ShutdownReport>>,
    /// Cancelled by a second signal: every remaining wait ends at once.
    force: CancellationToken,
    /// Cancelled when shutdown is asked for while start-up is still under way.
    start_cancel: CancellationToken,
    interrupt: Mutex<Option<Interrupt>>,
    /// The steps taken so far, for observers while the sequence runs.
    steps: Mutex<Vec<StepReport>>,
}

impl ShutdownControl {
    /// The run: started by `start` the first time, the same shared run every later
    /// time.
    pub(crate) fn run_once(
        &self,
        start: impl FnOnce() -> BoxFuture<'static, ShutdownReport>,
    ) -> BoxFuture<'static, ShutdownReport> {
        let mut run = self.run.lock();
        run.get_or_insert_with(|| start().shared()).clone().boxed()
    }

    /// Hands `report` to every waiter, and returns it.
    pub(crate) fn publish(&self, report: ShutdownReport) -> ShutdownReport {
        self.finished.send_replace(Some(report.clone()));
        report
    }

    /// Waits for a published report.
    pub(crate) async fn wait(&self) -> ShutdownReport {
        let mut rx = self.finished.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(report) => report.clone().unwrap_or_default(),
            Err(_) => ShutdownReport::default(),
        }
    }

    /// The published report, if there is one.
    pub(crate) fn report(&self) -> Option<ShutdownReport> {
        self.finished.borrow().clone()
    }

    /// A second signal: remember which (the first one counts), end every wait.
    pub(crate) fn interrupt(&self, by: Interrupt) {
        self.interrupt.lock().get_or_insert(by);
        self.force.cancel();
    }

    /// The signal that interrupted the run, if one did.
    pub(crate) fn interrupted_by(&self) -> Option<Interrupt> {
        *self.interrupt.lock()
    }

    /// The token a second signal cancels.
    pub(crate) fn force(&self) -> CancellationToken {
        self.force.clone()
    }

    /// Cuts a start-up under way short.
    pub(crate) fn cancel_start(&self) {
        self.start_cancel.cancel();
    }

    /// Resolves once shutdown was asked for during start-up.
    pub(crate) async fn start_cancelled(&self) {
        self.start_cancel.cancelled().await;
    }

    /// The steps taken so far (written by the sequence runner as each step ends).
    pub(crate) fn steps(&self) -> &Mutex<Vec<StepReport>> {
        &self.steps
    }
}
