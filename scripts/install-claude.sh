#!/usr/bin/env bash
# Install the pinned Claude Code CLI from npm into a cache folder outside the repo.
#
#   scripts/install-claude.sh            # installs @anthropic-ai/claude-code@2.1.332
#
# Environment:
#   LAB_CLAUDE_VERSION   version to install (default 2.1.332)
#   LAB_CACHE_DIR        cache root (default $HOME/.cache/lab); the install goes to
#                        $LAB_CACHE_DIR/claude-code/<version>
#
# Idempotent: when that folder already holds a `claude` whose `--version` reports the
# requested version, nothing is downloaded. The absolute path of the runnable `claude`
# executable is printed as the LAST line of stdout; everything else goes to stderr.
# Needs only node + npm. Exits non-zero with a message on any failure.
set -euo pipefail

VERSION="${LAB_CLAUDE_VERSION:-2.1.332}"
CACHE_ROOT="${LAB_CACHE_DIR:-${HOME:?HOME is not set}/.cache/lab}"
PREFIX="${CACHE_ROOT}/claude-code/${VERSION}"
PKG="@anthropic-ai/claude-code"

log() { printf 'install-claude: %s\n' "$*" >&2; }
die() { printf 'install-claude: error: %s\n' "$*" >&2; exit 1; }

case "$VERSION" in
  ''|*[!0-9A-Za-z.+-]*) die "LAB_CLAUDE_VERSION '$VERSION' is not a plain version string" ;;
esac

# Candidate executables, most direct first. The npm package ships a small launcher
# (bin "claude"); the real native binary lives in the platform package
# @anthropic-ai/claude-code-<os>-<arch>. Whichever answers `--version` correctly wins.
platform_pkg() {
  local os arch libc=""
  case "$(uname -s)" in
    Linux) os=linux ;; Darwin) os=darwin ;; *) os="$(uname -s | tr 'A-Z' 'a-z')" ;;
  esac
  case "$(uname -m)" in
    x86_64|amd64) arch=x64 ;; aarch64|arm64) arch=arm64 ;; *) arch="$(uname -m)" ;;
  esac
  if [ "$os" = linux ] && ldd --version 2>&1 | grep -qi musl; then libc="-musl"; fi
  printf '%s-%s-%s%s' "$PKG" "$os" "$arch" "$libc"
}

candidates() {
  local nm="$PREFIX/node_modules" plat
  plat="$(platform_pkg)"
  # native binary in the platform package (bin/claude or claude at its root)
  for f in "$nm/$plat/claude" "$nm/$plat/bin/claude"; do printf '%s\n' "$f"; done
  # whatever bin the main package declares
  if [ -f "$nm/$PKG/package.json" ]; then
    node -e '
      const p = require(process.argv[1]); const dir = require("path").dirname(process.argv[1]);
      let b = p.bin; if (typeof b === "string") b = { claude: b };
      for (const v of Object.values(b || {})) console.log(require("path").resolve(dir, v));
    ' "$nm/$PKG/package.json" 2>/dev/null || true
  fi
  printf '%s\n' "$PREFIX/node_modules/.bin/claude"
}

# Prints the first candidate that runs and reports $VERSION; returns 1 if none does.
find_working() {
  local c out real
  while IFS= read -r c; do
    [ -n "$c" ] && [ -f "$c" ] && [ -x "$c" ] || continue
    real="$(readlink -f "$c")"
    out="$(DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 timeout 60 "$real" --version 2>/dev/null </dev/null || true)"
    case "$out" in
      "$VERSION"|"$VERSION "*) printf '%s\n' "$real"; return 0 ;;
    esac
  done < <(candidates)
  return 1
}

# shellcheck source=lib/npm-pinned.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/npm-pinned.sh"
install_pinned claude
