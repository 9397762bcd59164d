//! Output files that appear whole or not at all.
//!
//! A run's outputs (`--json`, `--save`, `--plot`, the Stan CSV files of
//! `--csv`) are written beside their final path and renamed onto it when
//! complete, so a reader never sees half a file, and two runs writing the
//! same path leave one whole file rather than interleaved lines:
//!
//! - [`write_whole`] writes bytes at once through a temporary file named
//!   for this process (`NAME.PID-K.partial`), and [`temporary_like`] names
//!   such a file for a writer of its own (a plot);
//! - [`PartialFile`] is a file written over a run (draws streamed as they
//!   are made) at `NAME.partial`, locked for the run so that a second run
//!   writing the same file fails at the start, and renamed at the end. A
//!   run killed before the end (SIGKILL, a crash) leaves `NAME.partial`:
//!   marked by its name as unfinished, every complete line readable.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// `path` with `suffix` added to its file name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// A temporary name beside `path`, unique to this process and call:
/// `NAME.PID-K.partial`.
pub fn temporary_beside(path: &Path) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let k = COUNTER.fetch_add(1, Ordering::Relaxed);
    with_suffix(path, &format!(".{}-{k}.partial", std::process::id()))
}

/// A temporary name beside `path` that keeps its extension, for writers
/// that choose the format by it (PNG): `STEM.PID-K.partial.EXT`. A writer
/// that puts further files beside it (`STEM.PID-K.partial_fit.png`) has
/// them renamed by [`final_name`].
pub fn temporary_like(path: &Path) -> PathBuf {
    let tmp = temporary_beside(path.with_extension("").as_path());
    match path.extension() {
        Some(ext) => tmp.with_extension(format!("partial.{}", ext.to_string_lossy())),
        None => tmp,
    }
}

/// The final name of `written`, a file written at the temporary name `tmp`
/// of `path` ([`temporary_like`]) or beside it with a name that extends
/// the temporary stem: that stem replaced by `path`'s.
pub fn final_name(tmp: &Path, path: &Path, written: &Path) -> PathBuf {
    let stem = |p: &Path| p.file_stem().map(|s| s.to_string_lossy().into_owned());
    let (Some(tmp_stem), Some(stem), Some(name)) = (
        stem(tmp),
        stem(path),
        written
            .file_name()
            .map(|n| n.to_string_lossy().into_owned()),
    ) else {
        return written.to_path_buf();
    };
    match name.strip_prefix(&tmp_stem) {
        Some(rest) => written.with_file_name(format!("{stem}{rest}")),
        None => written.to_path_buf(),
    }
}

/// Write `bytes` to `path` whole: to a temporary file beside it, then
/// renamed onto it (the temporary file is removed when writing fails).
pub fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = temporary_beside(path);
    let r = std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, path));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// Why a [`PartialFile`] could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// Another process holds the lock on `NAME.partial`: it is writing the
    /// same output now.
    Busy(PathBuf),
    /// The file could not be created or locked.
    Io(io::Error),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Busy(p) => write!(
                f,
                "another run is writing it now (`{}` is locked by that process); wait for it to end or write elsewhere",
                p.display()
            ),
            OpenError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// A file written over a run at `NAME.partial`, locked by this process
/// until [`PartialFile::commit`] renames it to `NAME`. Dropped without a
/// commit, it is removed unless [`PartialFile::keep`] was called (a file
/// with something worth reading).
#[derive(Debug)]
pub struct PartialFile {
    file: File,
    partial: PathBuf,
    path: PathBuf,
    keep: bool,
    committed: bool,
}

impl PartialFile {
    /// Create (or empty) `path.partial` and lock it for this process.
    /// [`OpenError::Busy`] when another process holds its lock.
    pub fn create(path: &Path) -> Result<PartialFile, OpenError> {
        let partial = with_suffix(path, ".partial");
        // The file found at the name may be renamed by the run that held
        // it between our open and our lock: then the lock is on another
        // run's finished file, so let it go and open the name again.
        for _ in 0..8 {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&partial)
                .map_err(OpenError::Io)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) if same_file(&file, &partial) => {
                    return Err(OpenError::Busy(partial));
                }
                Err(std::fs::TryLockError::WouldBlock) => continue,
                Err(std::fs::TryLockError::Error(e)) => return Err(OpenError::Io(e)),
            }
            if same_file(&file, &partial) {
                file.set_len(0).map_err(OpenError::Io)?;
                return Ok(PartialFile {
                    file,
                    partial,
                    path: path.to_path_buf(),
                    keep: false,
                    committed: false,
                });
            }
        }
        Err(OpenError::Busy(partial))
    }

    /// The file, for writing (its position is where the next bytes go).
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// The path it is written at until [`PartialFile::commit`].
    pub fn partial_path(&self) -> &Path {
        &self.partial
    }

    /// The path it is renamed to at the end.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Leave the file at `NAME.partial` if it is dropped without a commit.
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// Rename the file to its final path (still under this process's
    /// lock, released when it closes).
    pub fn commit(mut self) -> io::Result<()> {
        self.committed = true;
        std::fs::rename(&self.partial, &self.path)
    }
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        if !self.committed && !self.keep {
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}

/// Whether the open `file` is the file at `path` now.
#[cfg(unix)]
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Whether the open `file` is the file at `path` now (without inode
/// numbers, trust the name: a file open elsewhere cannot be renamed here).
#[cfg(not(unix))]
fn same_file(_file: &File, path: &Path) -> bool {
    path.exists()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tempest_atomic_{tag}_{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_partial_file_appears_at_its_name_only_when_committed() {
        let d = dir("commit");
        let path = d.join("draws_1.csv");
        let _ = std::fs::remove_file(&path);
        let mut f = PartialFile::create(&path).unwrap();
        f.file().write_all(b"a,b\n1,2\n").unwrap();
        assert!(!path.exists());
        assert_eq!(std::fs::read(f.partial_path()).unwrap(), b"a,b\n1,2\n");
        // A second writer of the same file is refused while the first runs.
        let busy = PartialFile::create(&path).unwrap_err();
        assert!(matches!(busy, OpenError::Busy(_)), "{busy:?}");
        assert!(busy.to_string().contains("another run is writing it"));
        let partial = f.partial_path().to_path_buf();
        f.commit().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"a,b\n1,2\n");
        assert!(!partial.exists());
        // Once committed, the name is free for the next run; a file
        // dropped unfinished is removed unless kept.
        let g = PartialFile::create(&path).unwrap();
        let gp = g.partial_path().to_path_buf();
        drop(g);
        assert!(!gp.exists() && path.exists());
        let mut k = PartialFile::create(&path).unwrap();
        k.keep();
        drop(k);
        assert!(gp.exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn files_written_beside_a_temporary_name_map_back() {
        let path = Path::new("out/fig.png");
        let tmp = temporary_like(path);
        let name = tmp.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("fig.") && name.ends_with(".partial.png"),
            "{name}"
        );
        assert_eq!(tmp.parent(), path.parent());
        assert_eq!(final_name(&tmp, path, &tmp), path);
        let stem = tmp.file_stem().unwrap().to_string_lossy().into_owned();
        let beside = tmp.with_file_name(format!("{stem}_fit.png"));
        assert_eq!(
            final_name(&tmp, path, &beside),
            Path::new("out/fig_fit.png")
        );
    }

    #[test]
    fn whole_writes_leave_no_temporary_file() {
        let d = dir("whole");
        let path = d.join("out.json");
        write_whole(&path, b"{}\n").unwrap();
        write_whole(&path, b"{\"a\": 1}\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"a\": 1}\n");
        let names: Vec<_> = std::fs::read_dir(&d).unwrap().collect();
        assert_eq!(names.len(), 1);
        assert!(write_whole(&d.join("missing").join("x.json"), b"x").is_err());
        let _ = std::fs::remove_dir_all(&d);
    }
}
