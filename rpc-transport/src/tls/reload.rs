//! The provider's TLS configuration, reloaded from disk when its files change.
//!
//! **Why a poll of the files' metadata, not a file watcher** (`notify`, inotify): a
//! certificate is rotated by replacing files, and the common ways of replacing them
//! defeat a watch on the files themselves — Kubernetes updates a mounted secret by
//! swapping a `..data` symlink (the watched inode never changes), editors and
//! `cert-manager` write a new file and rename it over the old. A watcher must therefore
//! watch the directories, follow symlinks, and debounce the bursts of events a rotation
//! makes; inotify does not work on every file system (NFS, some overlay set-ups) either.
//! Reading the metadata of two or three files every few seconds costs nothing, needs no
//! thread, sees every kind of replacement (a change of modification time, size or
//! inode, after following symlinks), and a rotation is announced minutes ahead anyway.
//!
//! A reload affects only connections accepted after it: a connection keeps the session
//! it negotiated, so no request is dropped. A change that does not load (the key written
//! but not yet the certificate, a broken file) keeps the configuration in force, is
//! logged, and is tried again at the next check.

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_util::sync::CancellationToken;

use super::{ServerTlsFiles, TlsError};

/// What identifies one version of a file: modification time, size, inode.
type Stamp = Option<(Option<SystemTime>, u64, u64)>;

/// A provider's TLS: the configuration in force, and the files it came from.
#[derive(Debug)]
pub(crate) struct ServerTls {
    files: ServerTlsFiles,
    config: ArcSwap<ServerConfig>,
    /// The stamps of the files the configuration in force was read from.
    loaded: Mutex<Vec<Stamp>>,
}

impl ServerTls {
    /// Reads the files.
    ///
    /// # Errors
    /// [`TlsError`] naming the file that cannot be used.
    pub(crate) fn load(files: ServerTlsFiles) -> Result<Arc<Self>, TlsError> {
        let stamps = stamps(&files);
        let config = files.server_config()?;
        Ok(Arc::new(Self {
            files,
            config: ArcSwap::new(config),
            loaded: Mutex::new(stamps),
        }))
    }

    /// An acceptor with the configuration in force now.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.config.load_full())
    }

    /// Checks the files every `reload_interval` and reloads them when one changed, until
    /// `stop` is cancelled.
    pub(crate) async fn watch(self: Arc<Self>, stop: CancellationToken) {
        // A zero interval would make tokio's interval panic; the configuration refuses
        // it, code may not.
        let period = self
            .files
            .reload_interval
            .max(std::time::Duration::from_millis(10));
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            match self.reload_if_changed() {
                Ok(true) => {
                    tracing::info!(cert = %self.files.cert.display(), "TLS certificate reloaded")
                }
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(%error, "TLS files changed but do not load; the previous certificate stays in force")
                }
            }
        }
    }

    /// Reloads the configuration if a file changed since it was read; whether it did.
    ///
    /// # Errors
    /// [`TlsError`] when the changed files do not load (the configuration in force
    /// stays).
    pub(crate) fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let now = stamps(&self.files);
        if *self.loaded.lock() == now {
            return Ok(false);
        }
        let config = self.files.server_config()?;
        self.config.store(config);
        *self.loaded.lock() = now;
        Ok(true)
    }
}

fn stamps(files: &ServerTlsFiles) -> Vec<Stamp> {
    files
        .paths()
        .map(|path| {
            std::fs::metadata(path)
                .ok()
                .map(|meta| (meta.modified().ok(), meta.len(), meta.ino()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes a new self-signed certificate for `localhost` and its key.
    fn write_certificate(files: &ServerTlsFiles) {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        std::fs::write(&files.key, made.signing_key.serialize_pem()).unwrap();
        std::fs::write(&files.cert, made.cert.pem()).unwrap();
    }

    #[test]
    fn a_change_is_loaded_a_broken_one_keeps_the_certificate_in_force() {
        let dir = tempfile::tempdir().unwrap();
        let files = ServerTlsFiles::new(dir.path().join("tls.crt"), dir.path().join("tls.key"));
        write_certificate(&files);
        let tls = ServerTls::load(files.clone()).unwrap();
        assert!(!tls.reload_if_changed().unwrap(), "nothing changed");

        let before = tls.config.load_full();
        std::fs::write(&files.cert, "not a certificate, and a different size").unwrap();
        assert!(
            tls.reload_if_changed().is_err(),
            "a broken file does not load"
        );
        assert!(
            Arc::ptr_eq(&before, &tls.config.load_full()),
            "still in force"
        );
        assert!(
            tls.reload_if_changed().is_err(),
            "tried again at the next check"
        );

        write_certificate(&files);
        assert!(tls.reload_if_changed().unwrap(), "the repaired files load");
        assert!(!Arc::ptr_eq(&before, &tls.config.load_full()));
        assert!(!tls.reload_if_changed().unwrap());
    }

    #[test]
    fn a_missing_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let files = ServerTlsFiles::new(dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let error = ServerTls::load(files).unwrap_err().to_string();
        assert!(error.contains("tls.crt"), "{error}");
    }
}
