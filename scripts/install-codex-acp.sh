#!/usr/bin/env bash
# Install the pinned Codex ACP adapter (Zed's `codex-acp`: Codex driven over the Agent
# Client Protocol, configured like codex by its CODEX_HOME) from npm into a cache folder
# outside the repo.
#
#   scripts/install-codex-acp.sh     # installs @zed-industries/codex-acp@0.16.0
#
# Environment:
#   LAB_CODEX_ACP_VERSION   version to install (default 0.16.0)
#   LAB_CACHE_DIR           cache root (default $HOME/.cache/lab); the install goes to
#                           $LAB_CACHE_DIR/codex-acp/<version>
#
# Idempotent: an install whose package.json has the requested version is kept. The
# absolute path of the runnable `codex-acp` is the LAST line of stdout; everything else
# goes to stderr. Needs only node + npm.
set -euo pipefail

VERSION="${LAB_CODEX_ACP_VERSION:-0.16.0}"
CACHE_ROOT="${LAB_CACHE_DIR:-${HOME:?HOME is not set}/.cache/lab}"
PREFIX="${CACHE_ROOT}/codex-acp/${VERSION}"
PKG="@zed-industries/codex-acp"

log() { printf 'install-codex-acp: %s\n' "$*" >&2; }
die() { printf 'install-codex-acp: error: %s\n' "$*" >&2; exit 1; }

case "$VERSION" in
  ''|*[!0-9A-Za-z.+-]*) die "LAB_CODEX_ACP_VERSION '$VERSION' is not a plain version string" ;;
esac
command -v npm >/dev/null 2>&1 || die "npm is not installed"

installed() {
  [ -f "$PREFIX/node_modules/$PKG/package.json" ] &&
    [ "$(node -p 'require(process.argv[1]).version' "$PREFIX/node_modules/$PKG/package.json" 2>/dev/null)" = "$VERSION" ] &&
    [ -x "$PREFIX/node_modules/.bin/codex-acp" ]
}

if ! installed; then
  log "installing $PKG@$VERSION into $PREFIX"
  mkdir -p "$PREFIX"
  tmp="$(mktemp -d "${CACHE_ROOT}/.codex-acp-install.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error --no-save "$PKG@$VERSION" >&2 ||
    die "npm install $PKG@$VERSION failed"
  rm -rf "$PREFIX"
  mv "$tmp" "$PREFIX"
  trap - EXIT
  installed || die "installed, but $PREFIX/node_modules/.bin/codex-acp is not $VERSION"
fi
printf '%s\n' "$PREFIX/node_modules/.bin/codex-acp"
