//! On-disk compile cache. A compiled component is stored under a key that hashes the
//! component's bytes together with the engine's compatibility hash (wasmtime version,
//! target and compiler settings), so a changed component or engine never loads stale
//! code: it simply misses and recompiles.
//!
//! Loading an entry runs native code (`Component::deserialize` trusts its input), so
//! an entry is only loaded when it can only have been written by lab's own user: the
//! entry is a regular file (opened without following symlinks, checked on the open
//! descriptor), the entry and the cache directory are owned by the effective uid, and
//! neither is writable by group or others. Anything else is ignored with a warning,
//! and the entry is recompiled and replaced atomically (0600, in a 0700 directory).

use crate::store::fsutil::{self, Kind};
use anyhow::Result;
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use wasmtime::component::Component;
use wasmtime::Engine;

#[derive(Clone)]
pub struct CompileCache {
    dir: PathBuf,
    engine_key: [u8; 32],
}

/// Feeds `Hash` output into SHA-256, so the engine's compatibility hash is stable
/// across processes (unlike `DefaultHasher`'s random keys... which it does not use,
/// but its algorithm is not promised to stay the same between Rust releases).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

impl CompileCache {
    pub fn new(dir: PathBuf, engine: &Engine) -> Self {
        let mut h = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut h);
        h.0.update(env!("CARGO_PKG_VERSION").as_bytes());
        CompileCache { dir, engine_key: h.0.finalize().into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cache file for these component bytes.
    pub fn path_for(&self, bytes: &[u8]) -> PathBuf {
        let mut h = Sha256::new();
        h.update(self.engine_key);
        h.update(bytes);
        let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{hex}.cwasm"))
    }

    /// The compiled component, and whether it came from the cache.
    pub fn get_or_compile(&self, engine: &Engine, bytes: &[u8]) -> Result<(Component, bool)> {
        let path = self.path_for(bytes);
        match self.read_trusted(&path) {
            Ok(None) => {}
            Ok(Some(data)) => {
                // SAFETY: the bytes come from a file only lab's user can have written (checked
                // by `read_trusted` on the open descriptor), written by `Component::serialize`
                // of this very engine configuration (the key includes its compatibility
                // hash); damaged bytes fail to deserialize (wasmtime checks the header and
                // engine) and are recompiled below.
                match unsafe { Component::deserialize(engine, &data) } {
                    Ok(c) => return Ok((c, true)),
                    Err(e) => {
                        tracing::warn!(file = %path.display(), error = %super::wasm_err(e), "discarding an unreadable compile-cache entry")
                    }
                }
            }
            Err(why) => {
                tracing::warn!(file = %path.display(), reason = %why, "not loading a compile-cache entry lab cannot trust; recompiling it")
            }
        }
        let component = Component::new(engine, bytes).map_err(super::wasm_err)?;
        if let Err(e) = self.store(&path, &component) {
            tracing::warn!(file = %path.display(), error = %e, "could not write the compile cache");
        }
        Ok((component, false))
    }

    /// The entry's bytes: `Ok(None)` when there is none, `Err(why)` when there is one
    /// that must not be loaded. Read into memory rather than mmapped: a cache file
    /// truncated under a live mapping would crash the process (SIGBUS).
    fn read_trusted(&self, path: &Path) -> Result<Option<Vec<u8>>, String> {
        let euid = fsutil::euid();
        let dir = match std::fs::symlink_metadata(&self.dir) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot inspect the cache directory: {e}")),
        };
        if let Some(why) = fsutil::untrusted(&dir, Kind::Dir, euid) {
            return Err(format!("the cache directory {}: {why}", self.dir.display()));
        }
        // O_NOFOLLOW: a symlink fails to open; O_NONBLOCK: a fifo cannot hang us.
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path);
        let mut file = match opened {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err("the entry is a symlink".into()),
            Err(e) => return Err(format!("cannot open the entry: {e}")),
        };
        let meta = file.metadata().map_err(|e| format!("cannot inspect the entry: {e}"))?;
        if let Some(why) = fsutil::untrusted(&meta, Kind::File, euid) {
            return Err(format!("the entry: {why}"));
        }
        let mut data = Vec::with_capacity(meta.len() as usize);
        file.read_to_end(&mut data).map_err(|e| format!("cannot read the entry: {e}"))?;
        Ok(Some(data))
    }

    fn store(&self, path: &Path, component: &Component) -> Result<()> {
        fsutil::private_dir(&self.dir)?;
        if let Some(why) = fsutil::untrusted(&std::fs::symlink_metadata(&self.dir)?, Kind::Dir, fsutil::euid()) {
            anyhow::bail!("the cache directory {}: {why}", self.dir.display());
        }
        let data = component.serialize().map_err(super::wasm_err)?;
        fsutil::write_atomic(path, &data, 0o600)?;
        Ok(())
    }
}
