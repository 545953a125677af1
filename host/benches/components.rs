//! Component benchmark (not a test): prints figures for the plugin loader and the
//! claude-code component. Run with
//!
//!     cargo bench -p lab --bench components
//!
//! Figures: compile cold vs from the on-disk cache (ratio), instantiate, per-call cost
//! (p50/p90/p99), and transcript parsing throughput through the component in MB/s.

use lab::agents::components::{fixtures, ComponentHost, Limits, Source};
use std::time::{Duration, Instant};

fn percentiles(mut v: Vec<Duration>) -> (Duration, Duration, Duration) {
    v.sort();
    let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    (at(0.50), at(0.90), at(0.99))
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A realistic Claude Code transcript: user prompts, assistant text, tool calls and
/// results, system lines, in the 2.1.198 shapes.
fn transcript(target_bytes: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0u64;
    while out.len() < target_bytes {
        let lines = [
            format!(r#"{{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/work/app","sessionId":"0b6a9f5e-1111-4c1e-9a59-9f0f6d1f0a01","version":"2.1.198","gitBranch":"main","type":"user","message":{{"role":"user","content":"Please refactor module {i} and keep the tests green."}},"uuid":"u-{i}","timestamp":"2026-07-07T10:00:00.000Z"}}"#),
            format!(r#"{{"parentUuid":"u-{i}","isSidechain":false,"userType":"external","cwd":"/work/app","sessionId":"0b6a9f5e-1111-4c1e-9a59-9f0f6d1f0a01","version":"2.1.198","type":"assistant","message":{{"id":"msg_{i}","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{{"type":"text","text":"I'll start by reading the module. It has **three** functions that need `async` and a shared error type; here's the plan:\n\n1. read\n2. edit\n3. test"}}],"stop_reason":null,"usage":{{"input_tokens":1200,"output_tokens":80}}}},"uuid":"a-{i}","timestamp":"2026-07-07T10:00:01.000Z"}}"#),
            format!(r#"{{"parentUuid":"a-{i}","isSidechain":false,"type":"assistant","message":{{"id":"msg_{i}b","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{{"type":"tool_use","id":"toolu_{i:020}","name":"Read","input":{{"file_path":"/work/app/src/mod_{i}.rs"}}}}],"stop_reason":"tool_use"}},"uuid":"b-{i}","timestamp":"2026-07-07T10:00:02.000Z","sessionId":"0b6a9f5e-1111-4c1e-9a59-9f0f6d1f0a01"}}"#),
            format!(r#"{{"parentUuid":"b-{i}","isSidechain":false,"type":"user","message":{{"role":"user","content":[{{"tool_use_id":"toolu_{i:020}","type":"tool_result","content":"pub fn a() {{}}\npub fn b() {{}}\npub fn c() {{}}\n"}}]}},"toolUseResult":{{"type":"text"}},"uuid":"c-{i}","timestamp":"2026-07-07T10:00:03.000Z","sessionId":"0b6a9f5e-1111-4c1e-9a59-9f0f6d1f0a01"}}"#),
            format!(r#"{{"type":"system","subtype":"turn_duration","durationMs":4200,"uuid":"s-{i}","timestamp":"2026-07-07T10:00:04.000Z","sessionId":"0b6a9f5e-1111-4c1e-9a59-9f0f6d1f0a01","isMeta":false}}"#),
            r#"{"type":"file-history-snapshot","messageId":"x","snapshot":{"trackedFileBackups":{}},"isSnapshotUpdate":false}"#.to_string(),
        ];
        for l in lines {
            out.extend_from_slice(l.as_bytes());
            out.push(b'\n');
        }
        i += 1;
    }
    out
}

fn main() {
    let bytes = std::fs::read(fixtures::CLAUDE_CODE).expect("the claude-code component");
    println!("claude-code component: {} KiB", bytes.len() / 1024);

    // Compile: cold (empty cache) vs cached (deserialised from the on-disk cache).
    let mut cold = Vec::new();
    let mut cached = Vec::new();
    for _ in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let host = ComponentHost::new(Some(dir.path().to_path_buf()), Limits::default()).unwrap();
        let t = Instant::now();
        let (_, from_cache) = host.compile(&bytes).unwrap();
        cold.push(t.elapsed());
        assert!(!from_cache);
        for _ in 0..4 {
            let t = Instant::now();
            let (_, from_cache) = host.compile(&bytes).unwrap();
            cached.push(t.elapsed());
            assert!(from_cache);
        }
    }
    let (c50, _, _) = percentiles(cold.clone());
    let (h50, h90, _) = percentiles(cached.clone());
    println!(
        "compile cold:    p50 {:>8.1} ms   (n={})\ncompile cached:  p50 {:>8.2} ms   p90 {:>8.2} ms (n={})\ncold/cached ratio: {:.0}x",
        ms(c50),
        cold.len(),
        ms(h50),
        ms(h90),
        cached.len(),
        c50.as_secs_f64() / h50.as_secs_f64()
    );

    // Load = compile (cached) + link + capability detection + instantiate + info().
    let dir = tempfile::tempdir().unwrap();
    let host = ComponentHost::new(Some(dir.path().to_path_buf()), Limits::default()).unwrap();
    host.compile(&bytes).unwrap();
    let mut loads = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let (_facts, _h) = host.load(Source::Bundled("claude-code"), &bytes).unwrap();
        loads.push(t.elapsed());
    }
    let (l50, l90, l99) = percentiles(loads);
    println!("load+instantiate: p50 {:>8.2} ms   p90 {:>8.2} ms   p99 {:>8.2} ms", ms(l50), ms(l90), ms(l99));

    // Per-call cost: a tiny call (info) and a one-line parse, through the provider thread.
    let (_, p) = host.load(Source::Bundled("claude-code"), &bytes).unwrap();
    let line = transcript(1);
    let first_line = line.split_inclusive(|b| *b == b'\n').next().unwrap().to_vec();
    for _ in 0..200 {
        p.info().blocking().unwrap();
    }
    let mut info = Vec::new();
    let mut parse = Vec::new();
    for _ in 0..2000 {
        let t = Instant::now();
        p.info().blocking().unwrap();
        info.push(t.elapsed());
        let t = Instant::now();
        p.parse_transcript(first_line.clone()).blocking().unwrap();
        parse.push(t.elapsed());
    }
    let (i50, i90, i99) = percentiles(info);
    let (q50, q90, q99) = percentiles(parse);
    println!("call info():            p50 {:>7.1} µs   p90 {:>7.1} µs   p99 {:>7.1} µs", us(i50), us(i90), us(i99));
    println!("call parse(1 line):     p50 {:>7.1} µs   p90 {:>7.1} µs   p99 {:>7.1} µs", us(q50), us(q90), us(q99));

    // Throughput: 1 MiB chunks (the tailer's chunk size) of a realistic transcript.
    let data = transcript(16 << 20);
    let chunks: Vec<Vec<u8>> = {
        let mut v = Vec::new();
        let mut rest = &data[..];
        while !rest.is_empty() {
            let cut =
                rest[..rest.len().min(1 << 20)].iter().rposition(|b| *b == b'\n').map(|i| i + 1).unwrap_or(rest.len());
            v.push(rest[..cut].to_vec());
            rest = &rest[cut..];
        }
        v
    };
    let mut messages = 0;
    let t = Instant::now();
    for c in &chunks {
        let out = p.parse_transcript(c.clone()).blocking().unwrap();
        assert!(out.diagnostics.is_empty(), "{:?}", out.diagnostics.first());
        messages += out.messages.len();
    }
    let took = t.elapsed();
    println!(
        "parse throughput: {:.1} MB/s through the component ({} MiB, {} chunks, {} messages, {:.0} ms)",
        data.len() as f64 / 1e6 / took.as_secs_f64(),
        data.len() >> 20,
        chunks.len(),
        messages,
        ms(took)
    );
    // The same parse natively, as a reference for the sandbox's cost.
    let t = Instant::now();
    let mut native = 0;
    for c in &chunks {
        native += <lab_provider_claude_code::ClaudeCode as lab_provider_claude_code::Provider>::parse_transcript(c)
            .messages
            .len();
    }
    let native_took = t.elapsed();
    assert_eq!(native, messages);
    println!(
        "native reference: {:.1} MB/s  → component/native time ratio {:.2}",
        data.len() as f64 / 1e6 / native_took.as_secs_f64(),
        took.as_secs_f64() / native_took.as_secs_f64()
    );
}
