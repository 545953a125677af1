#!/usr/bin/env bash
# Install the pinned OpenAI Codex CLI from npm into a cache folder outside the repo.
#
#   scripts/install-codex.sh            # installs @openai/codex@0.171.0
#
# Environment:
#   LAB_CODEX_VERSION    version to install (default 0.171.0)
#   LAB_CACHE_DIR        cache root (default $HOME/.cache/lab); the install goes to
#                        $LAB_CACHE_DIR/codex/<version>
#
# Idempotent: when that folder already holds a `codex` whose `--version` reports the
# requested version, nothing is downloaded. The absolute path of the runnable `codex`
# executable is printed as the LAST line of stdout; everything else goes to stderr.
# The native binary inside the platform package is preferred over the node launcher.
# Needs only node + npm. Exits non-zero with a message on any failure.
set -euo pipefail

VERSION="${LAB_CODEX_VERSION:-0.171.0}"
CACHE_ROOT="${LAB_CACHE_DIR:-${HOME:?HOME is not set}/.cache/lab}"
PREFIX="${CACHE_ROOT}/codex/${VERSION}"
PKG="@openai/codex"

log() { printf 'install-codex: %s\n' "$*" >&2; }
die() { printf 'install-codex: error: %s\n' "$*" >&2; exit 1; }

case "$VERSION" in
  ''|*[!0-9A-Za-z.+-]*) die "LAB_CODEX_VERSION '$VERSION' is not a plain version string" ;;
esac

# Candidate executables, most direct first. The npm package ships a node launcher
# (bin "codex"); the real native binary lives in the platform package
# @openai/codex-<os>-<arch> under vendor/<rust target triple>/bin/codex (with the bundled
# `rg` beside it). Whichever answers `--version` with "codex-cli <VERSION>" wins.
platform_pkg() {
  local os arch
  case "$(uname -s)" in
    Linux) os=linux ;; Darwin) os=darwin ;; *) os="$(uname -s | tr 'A-Z' 'a-z')" ;;
  esac
  case "$(uname -m)" in
    x86_64|amd64) arch=x64 ;; aarch64|arm64) arch=arm64 ;; *) arch="$(uname -m)" ;;
  esac
  printf '%s-%s-%s' "$PKG" "$os" "$arch"
}

target_triples() {
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64|Linux-amd64) echo x86_64-unknown-linux-musl; echo x86_64-unknown-linux-gnu ;;
    Linux-aarch64|Linux-arm64) echo aarch64-unknown-linux-musl; echo aarch64-unknown-linux-gnu ;;
    Darwin-x86_64) echo x86_64-apple-darwin ;;
    Darwin-arm64) echo aarch64-apple-darwin ;;
  esac
}

candidates() {
  local nm="$PREFIX/node_modules" plat t
  plat="$(platform_pkg)"
  # native binary in the platform package (also where older releases nest it)
  for t in $(target_triples); do
    for f in "$nm/$plat/vendor/$t/bin/codex" "$nm/$plat/vendor/$t/codex/codex" \
             "$nm/$PKG/node_modules/$plat/vendor/$t/bin/codex" "$nm/$PKG/vendor/$t/codex/codex"; do
      printf '%s\n' "$f"
    done
  done
  # whatever bin the main package declares (the node launcher)
  if [ -f "$nm/$PKG/package.json" ]; then
    node -e '
      const p = require(process.argv[1]); const dir = require("path").dirname(process.argv[1]);
      let b = p.bin; if (typeof b === "string") b = { codex: b };
      for (const v of Object.values(b || {})) console.log(require("path").resolve(dir, v));
    ' "$nm/$PKG/package.json" 2>/dev/null || true
  fi
  printf '%s\n' "$PREFIX/node_modules/.bin/codex"
}

# Prints the first candidate that runs and reports $VERSION; returns 1 if none does.
# HOME/CODEX_HOME point at an empty scratch folder so `--version` reads no user config.
find_working() {
  local c out real scratch rc=1
  scratch="$(mktemp -d)"
  while IFS= read -r c; do
    [ -n "$c" ] && [ -f "$c" ] && [ -x "$c" ] || continue
    real="$(readlink -f "$c")"
    out="$(HOME="$scratch" CODEX_HOME="$scratch" timeout 60 "$real" --version 2>/dev/null </dev/null || true)"
    case "$out" in
      "codex-cli $VERSION"|"codex-cli $VERSION "*|"$VERSION")
        printf '%s\n' "$real"; rc=0; break ;;
    esac
  done < <(candidates)
  rm -rf "$scratch"
  return $rc
}

# shellcheck source=lib/npm-pinned.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/npm-pinned.sh"
install_pinned codex
