# Sourced by the install scripts of agents whose npm package's own bin is what runs
# (install-claude-acp.sh, install-codex-acp.sh, install-gemini.sh, install-opencode.sh):
# the install step they share.
#
# install_npm_bin TAG VAR DIR PKG BIN: install $VERSION (the caller's; VAR names the
# variable that sets it, for messages) of npm package PKG into
# $LAB_CACHE_DIR/DIR/$VERSION (default ~/.cache/lab), unless an install of that version
# is there, and print the runnable node_modules/.bin/BIN as the LAST stdout line;
# everything else goes to stderr (prefixed TAG). Needs only node + npm. Exits non-zero
# with a message on any failure.
install_npm_bin() {
  local tag=$1 var=$2 dir=$3 pkg=$4 bin=$5
  local cache_root="${LAB_CACHE_DIR:-${HOME:?HOME is not set}/.cache/lab}"
  local prefix="$cache_root/$dir/$VERSION"
  log() { printf '%s: %s\n' "$tag" "$*" >&2; }
  die() { printf '%s: error: %s\n' "$tag" "$*" >&2; exit 1; }
  case "$VERSION" in
    ''|*[!0-9A-Za-z.+-]*) die "$var '$VERSION' is not a plain version string" ;;
  esac
  command -v npm >/dev/null 2>&1 || die "npm is not installed"
  installed() {
    [ -f "$prefix/node_modules/$pkg/package.json" ] &&
      [ "$(node -p 'require(process.argv[1]).version' "$prefix/node_modules/$pkg/package.json" 2>/dev/null)" = "$VERSION" ] &&
      [ -x "$prefix/node_modules/.bin/$bin" ]
  }
  if ! installed; then
    log "installing $pkg@$VERSION into $prefix"
    mkdir -p "$cache_root"
    local tmp
    tmp="$(mktemp -d "$cache_root/.$dir-install.XXXXXX")"
    # shellcheck disable=SC2064 # the folder is this call's
    trap "rm -rf '$tmp'" EXIT
    npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error --no-save "$pkg@$VERSION" >&2 ||
      die "npm install $pkg@$VERSION failed"
    rm -rf "$prefix"
    mkdir -p "$(dirname "$prefix")"
    mv "$tmp" "$prefix"
    trap - EXIT
    installed || die "installed, but $prefix/node_modules/.bin/$bin is not $VERSION"
  fi
  printf '%s\n' "$prefix/node_modules/.bin/$bin"
}
