//! On-disk compile cache. A compiled component is stored under a key that hashes the
//! component's bytes together with the engine's compatibility hash (wasmtime version,
//! target and compiler settings), so a changed component or engine never loads stale
//! code: it simply misses and recompiles.

use anyhow::Result;
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
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
        // Read into memory rather than mmap the file: a cache file truncated under a
        // live mapping would crash the process (SIGBUS).
        if let Ok(data) = std::fs::read(&path) {
            // SAFETY: the bytes were written by `Component::serialize` of this very
            // engine configuration (the key includes its compatibility hash) into a
            // directory only lab writes; damaged bytes fail to deserialize (wasmtime
            // checks the header and engine) and are recompiled below.
            match unsafe { Component::deserialize(engine, &data) } {
                Ok(c) => return Ok((c, true)),
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %super::wasm_err(e), "discarding an unreadable compile-cache entry")
                }
            }
        }
        let component = Component::new(engine, bytes).map_err(super::wasm_err)?;
        if let Err(e) = self.store(&path, &component) {
            tracing::warn!(file = %path.display(), error = %e, "could not write the compile cache");
        }
        Ok((component, false))
    }

    fn store(&self, path: &Path, component: &Component) -> Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let data = component.serialize().map_err(super::wasm_err)?;
        crate::fsutil::write_atomic(path, &data, 0o600)?;
        Ok(())
    }
}
