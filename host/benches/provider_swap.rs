//! Provider swap benchmark (not a test): how long a build dropped into
//! `<home>/providers/` takes to serve new runs while `lab serve` runs. Run with
//!
//!     cargo bench -p lab --bench provider_swap                    # 30 swaps
//!     LAB_SWAPS=100 cargo bench -p lab --bench provider_swap
//!
//! One `lab serve` (release), its compile cache filled by a first start. Then, swap
//! after swap, another build of the plainlog provider (the current one and the one
//! built against WIT 0.2.0, in turn) is copied over `providers/plainlog.wasm`, and
//! `GET /providers` is polled every 10 ms until plainlog's `digest` is the new
//! build's: printed as percentiles, with the same for a corrupt file until its
//! refusal shows, and for a file removed until the provider is gone. The folder is
//! looked at every 0.4 s and a change is loaded once it held still for one look, so
//! 0.4–0.8 s of each figure is that wait; the rest is loading the component (from the
//! compile cache: each build was compiled once before).
//!
//! `cargo test -p lab --bench provider_swap` (debug build) does 3 swaps.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/mod.rs"]
mod support;

use common::*;
use lab::agents::components::fixtures;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};
use support::{env_num, ms, print_pct};

/// How long one change may take to show before the bench gives up.
const SHOWN_WITHIN: Duration = Duration::from_secs(30);

fn plainlog(lab: &Lab) -> Vec<Value> {
    let (status, list) = lab.get("/providers");
    assert_eq!(status, 200, "GET /providers: {list}");
    list.as_array().expect("a list").iter().filter(|p| p["name"] == "plainlog").cloned().collect()
}

/// Milliseconds from `change` (done now) until `shown` holds of GET /providers.
fn time_until(lab: &Lab, change: impl FnOnce(), shown: impl Fn(&[Value]) -> bool) -> f64 {
    let t = Instant::now();
    change();
    loop {
        if shown(&plainlog(lab)) {
            return ms(t.elapsed());
        }
        assert!(t.elapsed() < SHOWN_WITHIN, "not shown within {SHOWN_WITHIN:?}: {:?}", plainlog(lab));
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn serving_digest(list: &[Value]) -> Option<&str> {
    list.iter().find(|p| p["state"] == "serving").and_then(|p| p["digest"].as_str())
}

fn main() {
    let swaps: usize = env_num("LAB_SWAPS", if cfg!(debug_assertions) { 3 } else { 30 });
    let builds = [fixtures::PLAINLOG, fixtures::PLAINLOG_V0_2_0];
    let digests: Vec<String> =
        builds.iter().map(|b| lab::agents::components::digest(&std::fs::read(b).unwrap())).collect();
    let w = World::new();
    let file = w.home.join("providers").join("plainlog.wasm");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    // Both builds compiled once (the cache), as after their first install.
    for b in builds {
        std::fs::copy(b, &file).unwrap();
        w.serve().stop();
    }
    let lab = w.serve();
    let copy = |from: &str, to: &Path| {
        std::fs::copy(from, to).unwrap();
    };

    let mut swapped = Vec::new();
    for i in 0..swaps {
        let next = (i + 1) % 2;
        let want = digests[next].clone();
        swapped.push(time_until(&lab, || copy(builds[next], &file), |l| serving_digest(l) == Some(want.as_str())));
    }
    let mut refused = Vec::new();
    let mut removed = Vec::new();
    for i in 0..swaps.div_ceil(3) {
        // A corrupt file (a different one each time), then the good build back.
        let junk = format!("\0asm not a component {i}");
        refused.push(time_until(
            &lab,
            || std::fs::write(&file, &junk).unwrap(),
            |l| l.iter().any(|p| p["refused"].as_array().is_some_and(|r| !r.is_empty())),
        ));
        let want = digests[0].clone();
        time_until(&lab, || copy(builds[0], &file), |l| serving_digest(l) == Some(want.as_str()));
        removed.push(time_until(&lab, || std::fs::remove_file(&file).unwrap(), |l| serving_digest(l).is_none()));
        time_until(&lab, || copy(builds[0], &file), |l| serving_digest(l) == Some(want.as_str()));
    }
    println!(
        "a provider swapped while lab serves ({} build):",
        if cfg!(debug_assertions) { "debug" } else { "release" }
    );
    print_pct("new build serving after the copy", 36, swapped);
    print_pct("corrupt file refused after the write", 36, refused);
    print_pct("provider gone after the removal", 36, removed);
    lab.stop();
}
