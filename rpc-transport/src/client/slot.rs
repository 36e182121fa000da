//! The connections of one instance's slots: the open one found, one dialled when there
//! is none (callers arriving meanwhile share its result), and one forgotten once it takes
//! no new stream, so the next call dials again.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use h2::client::SendRequest;
use rpc_core::BoxError;

use super::link::Link;
use super::not_sent::NotSent;
use super::{Shared, dial};

/// One connection to the instance, open or not.
#[derive(Debug, Default)]
pub(super) struct Slot {
    /// The open connection, if any.
    pub(super) current: ArcSwapOption<Open>,
    /// Held while dialling, so that concurrent callers share one dial.
    pub(super) dialing: tokio::sync::Mutex<DialRecord>,
    /// Dials begun so far: a caller that waited for another's dial sees it changed.
    pub(super) dials: AtomicU64,
}

#[derive(Debug)]
pub(super) struct Open {
    pub(super) send: SendRequest<Bytes>,
    /// What its calls share with its task.
    pub(super) link: Arc<Link>,
    /// The dial that made it, so that an old connection's end does not forget a newer one.
    pub(super) dial: u64,
}

/// How the latest dial ended.
#[derive(Debug, Default)]
pub(super) struct DialRecord {
    pub(super) failure: Option<(io::ErrorKind, String)>,
}

impl Shared {
    /// The handle of `slot`'s open connection, its link and its dial; `None` when there
    /// is none.
    pub(super) fn current(&self, slot: usize) -> Option<(SendRequest<Bytes>, Arc<Link>, u64)> {
        let open = self.slots[slot].current.load();
        let open = open.as_deref()?;
        Some((open.send.clone(), open.link.clone(), open.dial))
    }

    /// The handle of `slot`'s open connection, its link and its dial, dialling first
    /// when there is none. Of callers arriving during a dial, all take its result: one
    /// failed dial fails them together rather than each trying in turn.
    pub(super) async fn open(
        &self,
        slot: usize,
    ) -> Result<(SendRequest<Bytes>, Arc<Link>, u64), BoxError> {
        if let Some(open) = self.current(slot) {
            return Ok(open);
        }
        let connection = &self.slots[slot];
        let seen = connection.dials.load(Ordering::Acquire);
        let mut record = connection.dialing.lock().await;
        if let Some(open) = connection.current.load().as_deref() {
            return Ok((open.send.clone(), open.link.clone(), open.dial));
        }
        if connection.dials.load(Ordering::Acquire) != seen
            && let Some((kind, message)) = &record.failure
        {
            return Err(self.not_dialled(io::Error::new(*kind, message.clone())));
        }
        let dial = connection.dials.fetch_add(1, Ordering::AcqRel) + 1;
        // A dial its caller abandons (dropped mid-way: the call left for another
        // instance, or its deadline came) leaves no failure, so those waiting for it dial
        // again rather than take an older dial's failure as this one's.
        record.failure = None;
        let weak = self.weak.clone();
        match dial::dial(&self.target, move || forget(&weak, slot, dial)).await {
            Ok((send, link)) => {
                record.failure = None;
                connection.current.store(Some(Arc::new(Open {
                    send: send.clone(),
                    link: link.clone(),
                    dial,
                })));
                Ok((send, link, dial))
            }
            Err(error) => {
                record.failure = Some((error.kind(), error.to_string()));
                Err(self.not_dialled(error))
            }
        }
    }

    pub(super) fn not_dialled(&self, error: io::Error) -> BoxError {
        Box::new(NotSent::new(
            format!("cannot connect to {}", self.target.authority),
            error,
        ))
    }

    /// The connection of `dial` takes no new stream (closed, or GOAWAY received): it is
    /// forgotten, so the next call dials again, and this request was not sent.
    pub(super) fn closed(&self, slot: usize, dial: u64, error: h2::Error) -> BoxError {
        self.closed_before_open(slot, dial, error)
    }

    pub(super) fn closed_before_open(
        &self,
        slot: usize,
        dial: u64,
        error: impl Into<BoxError>,
    ) -> BoxError {
        self.forget(slot, dial);
        Box::new(NotSent::new(
            format!(
                "the connection to {} takes no new stream",
                self.target.authority
            ),
            error,
        ))
    }

    pub(super) fn forget(&self, slot: usize, dial: u64) {
        self.slots[slot]
            .current
            .rcu(|current| match current.as_deref() {
                Some(open) if open.dial == dial => None,
                _ => current.clone(),
            });
    }
}

/// The connection task's end: the connection of `slot`'s `dial` is forgotten.
fn forget(shared: &Weak<Shared>, slot: usize, dial: u64) {
    if let Some(shared) = shared.upgrade() {
        shared.forget(slot, dial);
    }
}
