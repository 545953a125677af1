//! The plugin loader against the real components built with the project.

use lab::components::{fixtures, CallErrorKind, ComponentHost, Limits, ProviderSet, Source};
use std::path::Path;
use std::time::{Duration, Instant};

fn host(cache: Option<&Path>) -> ComponentHost {
    ComponentHost::new(
        cache.map(Path::to_path_buf),
        Limits { call_deadline: Duration::from_millis(500), memory_bytes: 32 << 20 },
    )
    .unwrap()
}

#[test]
fn capability_is_detected_both_ways() {
    let h = host(None);
    let (plain, p) = h.load_file(Path::new(fixtures::PLAINLOG)).unwrap();
    assert_eq!(plain.info.name, "plainlog");
    assert!(!plain.dialog_hooker && !p.dialog_hooker());
    assert_eq!(plain.wit_packages, vec!["lab:provider@0.1.0".to_string()]);

    let (cc, c) = h.load_file(Path::new(fixtures::CLAUDE_CODE)).unwrap();
    assert_eq!(cc.info.name, "claude-code");
    assert!(cc.dialog_hooker && c.dialog_hooker());
}

#[test]
fn a_base_only_component_refuses_dialog_hooker_calls_cleanly() {
    let h = host(None);
    let (_, p) = h.load_file(Path::new(fixtures::PLAINLOG)).unwrap();
    let ctx = lab_provider_sdk::HookContext {
        run_id: "r".into(),
        spool_write: "x".into(),
        spool_clear: "y".into(),
        marker_write: "z".into(),
    };
    let err = p.hook_settings_blocking(ctx).unwrap_err();
    assert_eq!(err.kind, CallErrorKind::Unsupported);
    // and it still works afterwards
    assert_eq!(p.info_blocking().unwrap().name, "plainlog");
}

#[test]
fn a_looping_call_is_stopped_by_its_deadline_and_the_provider_recovers() {
    let h = host(None);
    let (_, p) = h.load_file(Path::new(fixtures::UNRULY)).unwrap();
    let start = Instant::now();
    let err = p.parse_transcript_blocking(b"loop".to_vec()).unwrap_err();
    let took = start.elapsed();
    assert!(matches!(err.kind, CallErrorKind::Timeout { millis: 500 }), "{err}");
    assert!(took < Duration::from_secs(5), "deadline took {took:?}");
    assert!(err.to_string().contains("deadline"), "{err}");
    // The store was rebuilt: ordinary calls work again.
    assert!(p.parse_transcript_blocking(b"fine".to_vec()).unwrap().messages.is_empty());
}

#[test]
fn a_memory_hog_hits_the_cap_and_the_provider_recovers() {
    let h = host(None);
    let (_, p) = h.load_file(Path::new(fixtures::UNRULY)).unwrap();
    let err = p.parse_transcript_blocking(b"hog".to_vec()).unwrap_err();
    assert_eq!(err.kind, CallErrorKind::OutOfMemory { cap_mib: 32 }, "{err}");
    assert!(p.parse_transcript_blocking(b"fine".to_vec()).is_ok());
}

#[test]
fn a_panicking_component_traps_with_a_clear_error() {
    let h = host(None);
    let (_, p) = h.load_file(Path::new(fixtures::UNRULY)).unwrap();
    let err = p.parse_transcript_blocking(b"panic".to_vec()).unwrap_err();
    assert!(matches!(err.kind, CallErrorKind::Trap(_)), "{err}");
    assert!(err.to_string().starts_with("provider `unruly`: `parse-transcript` trapped"), "{err}");
    assert!(p.parse_transcript_blocking(b"fine".to_vec()).is_ok());
}

#[test]
fn bad_files_are_reported_and_skipped() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("providers");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("garbage.wasm"), b"not wasm at all").unwrap();
    // A core module, not a component.
    std::fs::write(dir.join("core.wasm"), b"\0asm\x01\0\0\0").unwrap();
    std::fs::copy(fixtures::PLAINLOG, dir.join("plainlog.wasm")).unwrap();
    std::fs::write(dir.join("ignored.txt"), b"x").unwrap();
    let set = ProviderSet::load_all(&host(None), &dir);
    let names: Vec<_> = set.loaded.iter().map(|(f, _)| f.info.name.clone()).collect();
    assert_eq!(names, vec!["claude-code", "plainlog"]);
    assert_eq!(set.failed.len(), 2, "{:?}", set.failed);
    for f in &set.failed {
        assert!(matches!(&f.source, Source::File(p) if p.extension().unwrap() == "wasm"));
        assert!(!f.error.is_empty());
    }
}

#[test]
fn a_dropped_in_component_replaces_the_bundled_one_of_the_same_name() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("providers");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixtures::CLAUDE_CODE, dir.join("my-claude.wasm")).unwrap();
    let set = ProviderSet::load_all(&host(None), &dir);
    let (facts, _) = set.get("claude-code").unwrap();
    assert_eq!(facts.source, Source::File(dir.join("my-claude.wasm")));
    assert_eq!(set.loaded.len(), 1);
}

#[test]
fn the_compile_cache_hits_and_misses_on_change() {
    let cache = tempfile::tempdir().unwrap();
    let h = host(Some(cache.path()));
    let bytes = std::fs::read(fixtures::PLAINLOG).unwrap();
    let (f1, _) = h.load(Source::Bundled("plainlog"), &bytes).unwrap();
    assert!(!f1.from_cache);
    let (f2, _) = h.load(Source::Bundled("plainlog"), &bytes).unwrap();
    assert!(f2.from_cache);
    // A damaged cache entry is recompiled, not trusted.
    for e in std::fs::read_dir(cache.path()).unwrap() {
        std::fs::write(e.unwrap().path(), b"damaged").unwrap();
    }
    let (f3, p3) = h.load(Source::Bundled("plainlog"), &bytes).unwrap();
    assert!(!f3.from_cache);
    assert_eq!(p3.info_blocking().unwrap().name, "plainlog");
    // Different component bytes never hit another component's entry.
    let other = std::fs::read(fixtures::UNRULY).unwrap();
    let (f4, _) = h.load(Source::Bundled("unruly"), &other).unwrap();
    assert!(!f4.from_cache);
}
