//! Builds the provider components (wasm32-wasip2) with a nested cargo, in the style of
//! wasmtime's `crates/test-programs/artifacts/build.rs`, and exposes their paths as
//! compile-time env vars: `LAB_COMPONENT_<NAME>`. The bundled ones are embedded in the
//! `lab` binary; the fixtures are only used by tests.
use std::{env, path::PathBuf, process::Command};

/// (constant name, package, bundled under this provider name). Every component becomes a
/// path constant in `components::fixtures`; the bundled ones also an entry of
/// `components::BUNDLED` (`$OUT_DIR/components.rs`), so host/src names no agent.
const COMPONENTS: &[(&str, &str, Option<&str>)] = &[
    ("CLAUDE_CODE", "lab-provider-claude-code", Some("claude-code")),
    ("CODEX", "lab-provider-codex", Some("codex")),
    ("GEMINI_CLI", "lab-provider-gemini-cli", Some("gemini-cli")),
    ("OPENCODE", "lab-provider-opencode", Some("opencode")),
    ("PLAINLOG", "lab-provider-plainlog", None),
    ("UNRULY", "lab-provider-unruly", None),
    ("GREEDY", "lab-provider-greedy", None),
    ("ACP_FIXTURE", "lab-provider-acp-fixture", None),
];

/// Components built against an older WIT version, checked in as test fixtures:
/// (constant name, file under host/tests/fixtures).
const OLD_COMPONENTS: &[(&str, &str)] = &[
    ("CLAUDE_CODE_V0_1_0", "wit-0.1.0/lab_provider_claude_code.wasm"),
    ("PLAINLOG_V0_1_0", "wit-0.1.0/lab_provider_plainlog.wasm"),
    ("CLAUDE_CODE_V0_2_0", "wit-0.2.0/lab_provider_claude_code.wasm"),
    ("PLAINLOG_V0_2_0", "wit-0.2.0/lab_provider_plainlog.wasm"),
    ("CLAUDE_CODE_V0_3_0", "wit-0.3.0/lab_provider_claude_code.wasm"),
    ("PLAINLOG_V0_3_0", "wit-0.3.0/lab_provider_plainlog.wasm"),
    ("ACP_FIXTURE_V0_3_0", "wit-0.3.0/lab_provider_acp_fixture.wasm"),
    ("CLAUDE_CODE_V0_4_0", "wit-0.4.0/lab_provider_claude_code.wasm"),
    ("PLAINLOG_V0_4_0", "wit-0.4.0/lab_provider_plainlog.wasm"),
    ("ACP_FIXTURE_V0_4_0", "wit-0.4.0/lab_provider_acp_fixture.wasm"),
    ("CLAUDE_CODE_V0_5_0", "wit-0.5.0/lab_provider_claude_code.wasm"),
    ("PLAINLOG_V0_5_0", "wit-0.5.0/lab_provider_plainlog.wasm"),
    ("ACP_FIXTURE_V0_5_0", "wit-0.5.0/lab_provider_acp_fixture.wasm"),
    ("CLAUDE_CODE_V0_6_0", "wit-0.6.0/lab_provider_claude_code.wasm"),
    ("PLAINLOG_V0_6_0", "wit-0.6.0/lab_provider_plainlog.wasm"),
    ("ACP_FIXTURE_V0_6_0", "wit-0.6.0/lab_provider_acp_fixture.wasm"),
    ("CLAUDE_CODE_V0_7_0", "wit-0.7.0/lab_provider_claude_code.wasm"),
    ("PLAINLOG_V0_7_0", "wit-0.7.0/lab_provider_plainlog.wasm"),
    ("ACP_FIXTURE_V0_7_0", "wit-0.7.0/lab_provider_acp_fixture.wasm"),
    ("CLAUDE_CODE_V0_8_0", "wit-0.8.0/lab_provider_claude_code.wasm"),
    ("PLAINLOG_V0_8_0", "wit-0.8.0/lab_provider_plainlog.wasm"),
    ("ACP_FIXTURE_V0_8_0", "wit-0.8.0/lab_provider_acp_fixture.wasm"),
];

fn main() {
    embed_web_assets();
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.parent().unwrap().to_path_buf();
    for dir in ["sdk", "wit", "providers", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!("cargo:rerun-if-changed=build.rs");

    // `<target>/<profile>/build/lab-<hash>/out` → `<target>/wasm-components`: one
    // place shared by every profile, and not the outer cargo's locked target dir.
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let target_dir =
        out_dir.ancestors().nth(4).map(|p| p.join("wasm-components")).unwrap_or_else(|| out_dir.join("wasm"));

    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args(["build", "--target", "wasm32-wasip2", "--profile", "wasm"])
        .arg("--target-dir")
        .arg(&target_dir);
    for (_, pkg, _) in COMPONENTS {
        cmd.args(["-p", pkg]);
    }
    for (key, _) in env::vars() {
        if key.starts_with("CARGO_") && key != "CARGO_HOME" && key != "CARGO_MAKEFLAGS" || key == "RUSTFLAGS" {
            cmd.env_remove(key);
        }
    }
    let status = cmd.status().expect("run cargo to build the provider components");
    if !status.success() {
        panic!(
            "building the provider components for wasm32-wasip2 failed (see the cargo output above).\n\
             If it says the `wasm32-wasip2` target may not be installed, run:\n    \
             rustup target add wasm32-wasip2 --toolchain {toolchain}\n\
             (or scripts/ensure-toolchain, which scripts/serve and scripts/test run first)",
            toolchain = pinned_toolchain(&root).unwrap_or_else(|| "<the toolchain in rust-toolchain.toml>".into())
        );
    }
    let mut bundled = String::from("/// The components built with this `lab` and embedded in its binary.\npub const BUNDLED: &[(&str, &[u8])] = &[\n");
    let mut fixtures = String::from("/// Paths of the components built with the project, and of older builds kept as fixtures (tests use them).\npub mod fixtures {\n");
    for (name, pkg, bundled_as) in COMPONENTS {
        let file = target_dir.join("wasm32-wasip2/wasm").join(format!("{}.wasm", pkg.replace('-', "_")));
        assert!(file.exists(), "missing component {}", file.display());
        println!("cargo:rustc-env=LAB_COMPONENT_{name}={}", file.display());
        fixtures.push_str(&format!("    pub const {name}: &str = {:?};\n", file.display().to_string()));
        if let Some(as_name) = bundled_as {
            bundled.push_str(&format!("    ({as_name:?}, include_bytes!({:?})),\n", file.display().to_string()));
        }
    }
    for (name, rel) in OLD_COMPONENTS {
        let file = manifest.join("tests/fixtures").join(rel);
        fixtures.push_str(&format!("    pub const {name}: &str = {:?};\n", file.display().to_string()));
    }
    bundled.push_str("];\n");
    fixtures.push_str("}\n");
    std::fs::write(out_dir.join("components.rs"), format!("{bundled}\n{fixtures}")).expect("write components.rs");
}

/// The channel pinned in rust-toolchain.toml.
fn pinned_toolchain(root: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(root.join("rust-toolchain.toml")).ok()?;
    let line = text.lines().find(|l| l.trim_start().starts_with("channel"))?;
    line.split('"').nth(1).map(str::to_string)
}

/// Every servable file directly under web/ (not tests, not node tooling) becomes an
/// entry of `WEB_ASSETS` in `$OUT_DIR/web_assets.rs`, embedded with include_bytes!.
///
/// Only the embedded files are watched, not web/ itself: cargo watches a directory
/// recursively, so `npm ci` (web/node_modules) or a browser test's output would re-link
/// lab. A new asset is always referenced from one that is embedded already (index.html
/// or a script), whose edit re-runs this and picks the new file up.
fn embed_web_assets() {
    let web = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../web");
    let mut entries = Vec::new();
    if let Ok(rd) = std::fs::read_dir(&web) {
        for e in rd.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            let ext = path.extension().and_then(|x| x.to_str()).unwrap_or("");
            let mime = match ext {
                "html" => "text/html; charset=utf-8",
                "js" | "mjs" => "text/javascript; charset=utf-8",
                "css" => "text/css; charset=utf-8",
                "svg" => "image/svg+xml",
                "png" => "image/png",
                "ico" => "image/x-icon",
                "webmanifest" => "application/manifest+json",
                "txt" => "text/plain; charset=utf-8",
                _ => continue,
            };
            if !path.is_file() || name.contains(".test.") || name.starts_with('.') {
                continue;
            }
            println!("cargo:rerun-if-changed={}", path.display());
            entries.push(format!(
                "    ({name:?}, {mime:?}, include_bytes!({:?})),\n",
                path.canonicalize().unwrap().display().to_string()
            ));
        }
    }
    entries.sort();
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("web_assets.rs");
    std::fs::write(
        out,
        format!(
            "/// (file name, content type, bytes)\npub const WEB_ASSETS: &[(&str, &str, &[u8])] = &[\n{}];\n",
            entries.concat()
        ),
    )
    .unwrap();
}
