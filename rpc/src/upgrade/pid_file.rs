//! `upgrade.pid_file`: this process's pid, written atomically once it serves.

use std::io::{self, Write};
use std::path::Path;

/// Writes this process's pid (and a newline) to `path`: into a new file beside it, then
/// renamed over it, so a reader sees the old pid or the new one, never a part.
///
/// # Errors
/// The file system's error.
pub(crate) fn write(path: &Path) -> io::Result<()> {
    let directory = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut file = tempfile::NamedTempFile::new_in(directory)?;
    writeln!(file, "{}", std::process::id())?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|error| error.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pid_replaces_what_was_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.pid");
        std::fs::write(&path, "1\n").unwrap();
        write(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{}\n", std::process::id())
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
