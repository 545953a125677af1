//! `lab new-provider <name>`: writes a provider crate that builds, outside the lab tree,
//! into a component this lab loads.
//!
//! The crate depends on `lab-provider-sdk` by path (the SDK is not published): by
//! default the `sdk/` of the checkout this `lab` was built from, else `--sdk-path`. It
//! is its own workspace (an empty `[workspace]` table), pins lab's toolchain with the
//! `wasm32-wasip2` target, and starts from lab's `Cargo.lock`, so its first build uses
//! the dependency versions lab's own providers are built and tested with.
//!
//! The template files live under `host/templates/provider/`. `lib.rs.tmpl` has two
//! variants in one file: whole lines `//#if hooker`, `//#else`, `//#end` select the
//! `--dialog-hooker` lines; `acp_lib.rs.tmpl` is an ACP provider's (`--acp`);
//! `{{key}}` placeholders are filled in from [`Vars`].

use anyhow::{bail, Context as _, Result};
use std::path::{Path, PathBuf};

const CARGO_TOML: &str = include_str!("../../templates/provider/Cargo.toml.tmpl");
const TOOLCHAIN: &str = include_str!("../../templates/provider/rust-toolchain.toml.tmpl");
const LIB_RS: &str = include_str!("../../templates/provider/lib.rs.tmpl");
const ACP_LIB_RS: &str = include_str!("../../templates/provider/acp_lib.rs.tmpl");
const README: &str = include_str!("../../templates/provider/README.md.tmpl");
const GITIGNORE: &str = include_str!("../../templates/provider/gitignore.tmpl");

/// The WIT version new providers are built against (the SDK's, the newest this lab loads).
fn wit_version() -> &'static str {
    let newest = crate::agents::components::WIT_PACKAGES[0];
    newest.strip_prefix("lab:provider@").unwrap_or(newest)
}

/// lab's own rust-toolchain.toml, for when the SDK's checkout has none.
const LAB_TOOLCHAIN: &str = include_str!("../../../rust-toolchain.toml");

/// The SDK of the checkout this binary was built from.
pub const DEFAULT_SDK_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sdk");

/// Which kind of provider `lab new-provider` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `base` only: the agent's dialogs from its transcript.
    TranscriptOnly,
    /// `--dialog-hooker`: live prompts through the agent's hooks, answered with keys.
    DialogHooker,
    /// `--acp`: an agent that speaks the Agent Client Protocol; the component declares it.
    Acp,
}

/// What `lab new-provider` was asked for.
#[derive(Debug, Clone)]
pub struct Options {
    pub name: String,
    pub kind: Kind,
    /// The folder the crate folder is created in.
    pub parent: PathBuf,
    /// `lab-provider-sdk`'s folder (None: [`DEFAULT_SDK_PATH`]).
    pub sdk_path: Option<PathBuf>,
}

/// What was written.
#[derive(Debug, Clone)]
pub struct Created {
    pub dir: PathBuf,
    pub files: Vec<&'static str>,
    pub wasm_file: String,
    pub sdk: PathBuf,
}

/// A provider name: 1–64 chars of `[a-z0-9-]`, not starting with `-`. It is the
/// provider's name in lab (`POST /runs`), the crate is `lab-provider-<name>`.
pub fn validate_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the provider name is empty".into());
    }
    if name.len() > 64 {
        return Err(format!("the provider name is {} characters long (at most 64)", name.len()));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')) {
        return Err(format!("the provider name {name:?} has {c:?}: use only a-z, 0-9 and -"));
    }
    if name.starts_with('-') {
        return Err(format!("the provider name {name:?} starts with -"));
    }
    Ok(())
}

/// `echo-kit` → `EchoKit` (a Rust type name).
fn type_name(name: &str) -> String {
    let mut out: String = name
        .split('-')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic()) {
        out.insert(0, 'P');
    }
    out
}

/// The template's placeholders.
type Vars<'a> = &'a [(&'a str, String)];

/// Keep or drop `//#if hooker` / `//#else` / `//#end` sections, then fill in `{{key}}`s.
fn render(template: &str, vars: Vars, hooker: bool) -> String {
    let mut out = String::with_capacity(template.len());
    // None: outside any section; Some(keep): inside one.
    let mut section: Option<bool> = None;
    for line in template.split_inclusive('\n') {
        match line.trim() {
            "//#if hooker" => section = Some(hooker),
            "//#else" => section = section.map(|k| !k),
            "//#end" => section = None,
            _ if section.unwrap_or(true) => out.push_str(line),
            _ => {}
        }
    }
    for (key, value) in vars {
        out = out.replace(&format!("{{{{{key}}}}}"), value);
    }
    debug_assert!(!out.contains("{{"), "unfilled placeholder in a template");
    out
}

/// The `channel` of a rust-toolchain.toml.
fn toolchain_channel(text: &str) -> Option<String> {
    let v: toml::Value = toml::from_str(text).ok()?;
    v.get("toolchain")?.get("channel")?.as_str().map(str::to_string)
}

/// Find and check the SDK folder.
fn resolve_sdk(path: Option<&Path>) -> Result<PathBuf> {
    let given = path.is_some();
    let path = path.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from(DEFAULT_SDK_PATH));
    let hint = if given {
        "--sdk-path must name the sdk/ folder of a lab checkout"
    } else {
        "this lab was built elsewhere: pass --sdk-path <lab checkout>/sdk"
    };
    let dir =
        path.canonicalize().map_err(|e| anyhow::anyhow!("no lab-provider-sdk at {} ({e}); {hint}", path.display()))?;
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))
        .map_err(|e| anyhow::anyhow!("no lab-provider-sdk at {} ({e}); {hint}", dir.display()))?;
    let name = toml::from_str::<toml::Value>(&manifest)
        .ok()
        .and_then(|v| v.get("package")?.get("name")?.as_str().map(str::to_string));
    if name.as_deref() != Some("lab-provider-sdk") {
        bail!("{} is not lab-provider-sdk's Cargo.toml; {hint}", dir.join("Cargo.toml").display());
    }
    Ok(dir)
}

/// Write the crate. Refuses a bad name and an existing folder; on a write error the
/// half-written folder is removed.
pub fn create(opts: &Options) -> Result<Created> {
    validate_name(&opts.name).map_err(anyhow::Error::msg)?;
    let sdk = resolve_sdk(opts.sdk_path.as_deref())?;
    let lab_root = sdk.parent().unwrap_or(&sdk).to_path_buf();
    let dir = opts.parent.join(&opts.name);
    if dir.symlink_metadata().is_ok() {
        bail!("{} already exists: choose another name or --dir", dir.display());
    }
    std::fs::create_dir_all(&opts.parent).with_context(|| format!("creating {}", opts.parent.display()))?;
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir.canonicalize().unwrap_or(dir);
    match write_files(&dir, opts, &sdk, &lab_root) {
        Ok((files, wasm_file)) => Ok(Created { dir, files, wasm_file, sdk }),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(e)
        }
    }
}

fn write_files(dir: &Path, opts: &Options, sdk: &Path, lab_root: &Path) -> Result<(Vec<&'static str>, String)> {
    let name = &opts.name;
    let crate_name = format!("lab-provider-{name}");
    let wasm_file = format!("{}.wasm", crate_name.replace('-', "_"));
    let channel = std::fs::read_to_string(lab_root.join("rust-toolchain.toml"))
        .ok()
        .and_then(|t| toolchain_channel(&t))
        .or_else(|| toolchain_channel(LAB_TOOLCHAIN))
        .unwrap_or_else(|| "stable".into());
    let guide = lab_root.join("docs/providers.md").display().to_string();
    let (capability, hooker_trait, description) = match opts.kind {
        Kind::DialogHooker => (
            "exports `base`, `dialog-hooker` and `screen-reader`: lab captures the agent's dialogs live through its hooks (and reads the ones shown before any hook off the screen) and answers them with keystrokes",
            ", `DialogHooker` and `ScreenReader`",
            format!("{name}: JSONL transcript, live questions, permission prompts and a trust screen answered from lab"),
        ),
        Kind::TranscriptOnly => (
            "exports `base` only (transcript-only): lab shows the agent's dialogs from the transcript, the operator answers them in the terminal",
            "",
            format!("{name}: JSONL transcript (transcript-only)"),
        ),
        Kind::Acp => (
            "exports `acp-agent` (an ACP provider): it declares an agent that speaks the Agent Client Protocol; lab runs it and speaks the protocol, its permission requests and forms answered from lab",
            "",
            format!("{name}: an Agent Client Protocol agent"),
        ),
    };
    let (teaches, traits) = match opts.kind {
        Kind::Acp => ("how to start the `{name}` agent, which speaks the Agent Client Protocol".replace("{name}", name), "`AcpAgent`".to_string()),
        _ => (
            format!("how to start the `{name}` agent, where its transcript is, how transcript lines become chat messages, and which tool calls are interactive dialogs"),
            format!("`Provider`{hooker_trait}"),
        ),
    };
    let vars: Vec<(&str, String)> = vec![
        ("name", name.clone()),
        ("crate_name", crate_name),
        ("type_name", type_name(name)),
        ("wasm_file", wasm_file.clone()),
        ("sdk_path", toml::Value::String(sdk.display().to_string()).to_string()),
        ("wit_version", wit_version().to_string()),
        ("toolchain_channel", channel),
        ("lab_root", lab_root.display().to_string()),
        ("guide", guide),
        ("capability", capability.to_string()),
        ("teaches", teaches.to_string()),
        ("traits", traits),
        ("description", description),
    ];
    let hooker = opts.kind == Kind::DialogHooker;
    let lib = if opts.kind == Kind::Acp { ACP_LIB_RS } else { LIB_RS };
    let mut files: Vec<(&'static str, String)> = vec![
        ("Cargo.toml", render(CARGO_TOML, &vars, hooker)),
        ("rust-toolchain.toml", render(TOOLCHAIN, &vars, hooker)),
        ("README.md", render(README, &vars, hooker)),
        (".gitignore", render(GITIGNORE, &vars, hooker)),
        ("src/lib.rs", render(lib, &vars, hooker)),
    ];
    // lab's lock file: cargo keeps the versions the new crate uses and drops the rest.
    if let Ok(lock) = std::fs::read_to_string(lab_root.join("Cargo.lock")) {
        files.push(("Cargo.lock", lock));
    }
    std::fs::create_dir_all(dir.join("src"))?;
    for (file, text) in &files {
        let path = dir.join(file);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok((files.into_iter().map(|(f, _)| f).collect(), wasm_file))
}

/// `lab new-provider`: create the crate and say what to do next.
pub fn run(name: String, kind: Kind, dir: Option<PathBuf>, sdk_path: Option<PathBuf>) -> Result<()> {
    let parent = match dir {
        Some(d) => d,
        None => std::env::current_dir()?,
    };
    let created = create(&Options { name: name.clone(), kind, parent, sdk_path })?;
    let kind = match kind {
        Kind::DialogHooker => "dialog-hooker",
        Kind::TranscriptOnly => "transcript-only",
        Kind::Acp => "ACP",
    };
    println!("created {} ({kind} provider `{name}`)", created.dir.display());
    println!("  files: {}", created.files.join(", "));
    println!("  lab-provider-sdk: {} (WIT lab:provider@{})", created.sdk.display(), wit_version());
    if created.sdk.parent().is_some_and(|lab_root| created.dir.starts_with(lab_root)) {
        println!("  note: this is inside the lab checkout; it builds on its own, but belongs outside (--dir)");
    }
    if let Some((bundled, _)) = crate::agents::components::BUNDLED.iter().find(|(n, _)| *n == name) {
        println!("  note: once installed it replaces lab's bundled `{bundled}` provider");
    }
    let wasm = format!("target/wasm32-wasip2/release/{}", created.wasm_file);
    println!("next:");
    println!("  cd {}", created.dir.display());
    println!("  cargo test");
    println!("  cargo build --release --target wasm32-wasip2");
    println!("  lab providers check {wasm}");
    println!("  cp {wasm} <lab home>/providers/");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated() {
        for good in ["echo", "my-agent", "a1", "9lives", "x-"] {
            assert!(validate_name(good).is_ok(), "{good}");
        }
        for bad in ["", "Echo", "my_agent", "a b", "../x", "a/b", "-x", "é", &"x".repeat(65)] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn type_names() {
        assert_eq!(type_name("echo-kit"), "EchoKit");
        assert_eq!(type_name("a--b-"), "AB");
        assert_eq!(type_name("9lives"), "P9lives");
    }

    #[test]
    fn sections_and_placeholders() {
        let t = "a {{x}}\n//#if hooker\nh\n//#else\nt\n//#end\nz\n";
        let vars = [("x", "1".to_string())];
        assert_eq!(render(t, &vars, true), "a 1\nh\nz\n");
        assert_eq!(render(t, &vars, false), "a 1\nt\nz\n");
        let t = "  //#if hooker\nonly\n  //#end\n";
        assert_eq!(render(t, &[], false), "");
    }

    #[test]
    fn every_placeholder_is_filled_in_every_variant() {
        let d = tempfile::tempdir().unwrap();
        for (kind, name) in [(Kind::TranscriptOnly, "plain"), (Kind::DialogHooker, "hooked"), (Kind::Acp, "proto")] {
            let c = create(&Options { name: name.into(), kind, parent: d.path().into(), sdk_path: None }).unwrap();
            for f in &c.files {
                let text = std::fs::read_to_string(c.dir.join(f)).unwrap();
                assert!(!text.contains("{{") && !text.contains("//#"), "{f}: {text}");
            }
            let lib = std::fs::read_to_string(c.dir.join("src/lib.rs")).unwrap();
            assert_eq!(lib.contains("impl DialogHooker for"), kind == Kind::DialogHooker);
            assert_eq!(lib.contains("impl AcpAgent for Proto"), kind == Kind::Acp);
            let manifest: toml::Value =
                toml::from_str(&std::fs::read_to_string(c.dir.join("Cargo.toml")).unwrap()).unwrap();
            assert_eq!(manifest["package"]["name"].as_str(), Some(format!("lab-provider-{name}").as_str()));
            assert!(manifest["workspace"].as_table().unwrap().is_empty());
            let sdk = manifest["dependencies"]["lab-provider-sdk"]["path"].as_str().unwrap();
            assert!(Path::new(sdk).join("Cargo.toml").is_file());
            let toolchain = std::fs::read_to_string(c.dir.join("rust-toolchain.toml")).unwrap();
            assert!(toolchain.contains("wasm32-wasip2"));
            assert_eq!(c.wasm_file, format!("lab_provider_{name}.wasm"));
        }
    }

    #[test]
    fn refuses_an_existing_folder_and_a_missing_sdk() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("taken")).unwrap();
        let opts = |name: &str, sdk: Option<PathBuf>| Options {
            name: name.into(),
            kind: Kind::TranscriptOnly,
            parent: d.path().into(),
            sdk_path: sdk,
        };
        let e = create(&opts("taken", None)).unwrap_err().to_string();
        assert!(e.contains("already exists"), "{e}");
        let e = create(&opts("fresh", Some(d.path().join("nope")))).unwrap_err().to_string();
        assert!(e.contains("no lab-provider-sdk"), "{e}");
        assert!(!d.path().join("fresh").exists());
        let e = create(&opts("Bad", None)).unwrap_err().to_string();
        assert!(e.contains("a-z"), "{e}");
    }
}
