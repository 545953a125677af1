//! The host and the UI know spools, files, tmux, HTTP and components — never an agent.
//! Everything agent-specific (names, tool and hook event names, picker geometry, key
//! timings, wording) comes from the provider through the WIT interface, so a second agent
//! needs no host change. This test reads host/src and web/*.js outside comments and fails
//! on any agent, tool, hook-event or agent-timing name.

use std::path::{Path, PathBuf};

/// Case-insensitive; matched as whole words (letters, digits and `_` delimit).
const FORBIDDEN: &[&str] = &[
    "claude",
    "anthropic",
    "codex",
    "openai",
    "gemini",
    "opencode",
    "copilot",
    "askuserquestion",
    "exitplanmode",
    "pretooluse",
    "posttooluse",
    "permissionrequest",
    "sessionstart",
    "userpromptsubmit",
    "bash",
    "picker_settle",
    "key_delay",
];

fn files(dir: &Path, ext: &str, recurse: bool, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() && recurse {
            files(&p, ext, recurse, out);
        } else if p.extension().is_some_and(|x| x == ext) {
            out.push(p);
        }
    }
}

/// The text without `//…` line comments and `/* … */` block comments (strings are not
/// parsed: a `//` inside one cuts the rest of that line, which can only hide a word).
fn code_only(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while !rest.is_empty() {
        match (rest.find("//"), rest.find("/*")) {
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                out.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |n| &rest[l + n..]);
            }
            (_, Some(b)) => {
                out.push_str(&rest[..b]);
                rest = rest[b..].find("*/").map_or("", |e| &rest[b + e + 2..]);
            }
            _ => {
                out.push_str(rest);
                rest = "";
            }
        }
    }
    out
}

fn words(line: &str) -> impl Iterator<Item = String> + '_ {
    line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

#[test]
fn host_src_and_web_name_no_agent_tool_or_timing() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    files(&root.join("src"), "rs", true, &mut all);
    files(&root.join("../web"), "js", false, &mut all);
    assert!(all.len() > 20, "found only {} files", all.len());
    let mut hits = Vec::new();
    for f in &all {
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        // The shell completions name the shell `bash` (not the agents' tool of that name).
        let shell_code =
            f.to_string_lossy().contains("src/cli/completions.rs") || f.to_string_lossy().contains("src/cli/service/");
        for (i, line) in code.lines().enumerate() {
            for w in words(line) {
                if shell_code && w == "bash" {
                    continue;
                }
                if FORBIDDEN.contains(&w.as_str()) || FORBIDDEN.iter().any(|x| w.starts_with(x) && w.contains('_')) {
                    hits.push(format!("{}:{}: `{w}` in {}", f.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(hits.is_empty(), "agent knowledge outside the providers:\n{}", hits.join("\n"));
}

#[test]
fn the_comment_stripper_keeps_code_and_drops_comments() {
    let src = "let a = 1; // claude\n/* codex\n */ let b = \"x\";\n/// bash\nlet c;";
    let code = code_only(src);
    assert!(code.contains("let a = 1;") && code.contains("let b") && code.contains("let c;"), "{code}");
    assert!(!code.contains("claude") && !code.contains("codex") && !code.contains("bash"), "{code}");
    assert!(words("fn claude_code() {}").any(|w| w == "claude_code"));
}
