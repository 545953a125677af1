#!/usr/bin/env bash
# Install the pinned OpenCode (lab drives it over the Agent Client Protocol,
# `opencode acp`: providers/opencode) from npm into a cache folder outside the repo.
#
#   scripts/install-opencode.sh      # installs opencode-ai@1.18.33
#
# Environment:
#   LAB_OPENCODE_VERSION   version to install (default 1.18.33)
#   LAB_CACHE_DIR          cache root (default $HOME/.cache/lab); the install goes to
#                          $LAB_CACHE_DIR/opencode/<version>
#
# Idempotent: an install whose package.json has the requested version is kept. The
# absolute path of the runnable `opencode` (its launcher, which runs the platform's
# native binary from the package beside it) is the LAST line of stdout; everything
# else goes to stderr. Needs only node + npm.
set -euo pipefail

VERSION="${LAB_OPENCODE_VERSION:-1.18.33}"
CACHE_ROOT="${LAB_CACHE_DIR:-${HOME:?HOME is not set}/.cache/lab}"
PREFIX="${CACHE_ROOT}/opencode/${VERSION}"
PKG="opencode-ai"

log() { printf 'install-opencode: %s\n' "$*" >&2; }
die() { printf 'install-opencode: error: %s\n' "$*" >&2; exit 1; }

case "$VERSION" in
  ''|*[!0-9A-Za-z.+-]*) die "LAB_OPENCODE_VERSION '$VERSION' is not a plain version string" ;;
esac
command -v npm >/dev/null 2>&1 || die "npm is not installed"

installed() {
  [ -f "$PREFIX/node_modules/$PKG/package.json" ] &&
    [ "$(node -p 'require(process.argv[1]).version' "$PREFIX/node_modules/$PKG/package.json" 2>/dev/null)" = "$VERSION" ] &&
    [ -x "$PREFIX/node_modules/.bin/opencode" ]
}

if ! installed; then
  log "installing $PKG@$VERSION into $PREFIX"
  mkdir -p "$PREFIX"
  tmp="$(mktemp -d "${CACHE_ROOT}/.opencode-install.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error --no-save "$PKG@$VERSION" >&2 ||
    die "npm install $PKG@$VERSION failed"
  rm -rf "$PREFIX"
  mv "$tmp" "$PREFIX"
  trap - EXIT
  installed || die "installed, but $PREFIX/node_modules/.bin/opencode is not $VERSION"
fi
printf '%s\n' "$PREFIX/node_modules/.bin/opencode"
