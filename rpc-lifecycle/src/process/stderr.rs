//! A new process's standard error until it is ready: an unlinked temporary file the old
//! process can read back. A pipe would not do: once the old process exits nobody reads
//! it, and the new process's logs would fail (or block) from then on. With a file the
//! old process reads the tail when the start fails, and copies the start-up output to
//! its own stderr when it succeeds (the new process has by then put the original stderr
//! back on its fd 2, see `predecessor`).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::process::Stdio;

/// Bytes of the tail kept in a failure's reason.
pub(crate) const TAIL_BYTES: u64 = 2048;
/// Bytes of start-up output copied to this process's stderr after a successful start.
pub(crate) const COPY_BYTES: u64 = 64 * 1024;

/// The file a child writes its stderr to.
#[derive(Debug)]
pub(crate) struct StderrCapture {
    file: File,
}

impl StderrCapture {
    /// A new, already unlinked file (it disappears when the last descriptor closes).
    pub(crate) fn new() -> io::Result<Self> {
        Ok(Self {
            file: tempfile::tempfile()?,
        })
    }

    /// The child's end.
    pub(crate) fn stdio(&self) -> io::Result<Stdio> {
        Ok(Stdio::from(self.file.try_clone()?))
    }

    /// The last `bytes` bytes written, as text (lossy), trimmed; starting at a line
    /// boundary when it was cut.
    pub(crate) fn tail(&self, bytes: u64) -> String {
        let read = || -> io::Result<String> {
            let mut file = &self.file;
            let len = file.seek(SeekFrom::End(0))?;
            let start = len.saturating_sub(bytes);
            file.seek(SeekFrom::Start(start))?;
            let mut buffer = Vec::new();
            file.take(bytes).read_to_end(&mut buffer)?;
            let mut text = String::from_utf8_lossy(&buffer).into_owned();
            if start > 0
                && let Some(newline) = text.find('\n')
            {
                text.drain(..=newline);
            }
            Ok(text.trim().to_owned())
        };
        read().unwrap_or_else(|error| format!("(stderr unreadable: {error})"))
    }

    /// Copies the last [`COPY_BYTES`] to this process's stderr (the new process's
    /// start-up log, which only this file saw).
    pub(crate) fn copy_to_stderr(&self) {
        let output = self.tail(COPY_BYTES);
        if !output.is_empty() {
            let mut stderr = io::stderr().lock();
            let _ = writeln!(stderr, "{output}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_starts_at_a_line_when_cut() {
        let capture = StderrCapture::new().unwrap();
        let mut file = &capture.file;
        for n in 0..100 {
            writeln!(file, "line {n}").unwrap();
        }
        assert_eq!(capture.tail(20), "line 98\nline 99");
        assert!(capture.tail(10_000).starts_with("line 0\n"));
    }
}
