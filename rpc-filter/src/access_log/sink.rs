//! Where access-log lines go: a bounded queue, drained by one writer thread of its own
//! (blocking writes never run on the runtime, and no runtime is needed to build it) into
//! standard output or a file (appended), flushed whenever the queue runs empty.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use std::sync::mpsc;

/// Lines the queue holds before new ones are dropped.
pub const QUEUE_LINES: usize = 8192;

/// The writer of one application's access log. Cheap to clone; clones share the queue.
#[derive(Clone, Debug)]
pub struct AccessLogSink {
    lines: mpsc::SyncSender<String>,
    dropped: Arc<AtomicU64>,
}

impl AccessLogSink {
    /// A sink writing to `path` (`-`: standard output), appending to a file that
    /// exists.
    ///
    /// # Errors
    /// The file cannot be opened for appending, or the writer thread cannot start.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let out: Box<dyn Write + Send> = if path == Path::new("-") {
            Box::new(std::io::stdout())
        } else {
            Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            )
        };
        Self::to_writer(out)
    }

    /// A sink writing to `out`.
    ///
    /// # Errors
    /// The writer thread cannot start.
    pub fn to_writer(out: Box<dyn Write + Send>) -> std::io::Result<Self> {
        let (lines, queue) = mpsc::sync_channel::<String>(QUEUE_LINES);
        // The thread ends when every sender is gone (the application and its filters).
        std::thread::Builder::new()
            .name("rpc-access-log".to_owned())
            .spawn(move || {
                let mut out = std::io::BufWriter::new(out);
                while let Ok(line) = queue.recv() {
                    let mut written = writeln!(out, "{line}");
                    // Flush once nothing else waits: a burst is written in one go.
                    while written.is_ok()
                        && let Ok(next) = queue.try_recv()
                    {
                        written = writeln!(out, "{next}");
                    }
                    if let Err(error) = written.and_then(|()| out.flush()) {
                        tracing::warn!(%error, "the access log could not be written; lines are lost");
                    }
                }
            })?;
        Ok(Self {
            lines,
            dropped: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Queues `line`, or drops it (counted) when the queue is full.
    pub fn write(&self, line: String) {
        if self.lines.try_send(line).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Lines dropped so far because the writer fell behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}
