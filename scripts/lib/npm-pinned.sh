# Sourced by scripts/install-claude.sh and scripts/install-codex.sh: the install step
# both share. The caller sets VERSION, PREFIX (the cache folder for this version) and
# PKG (the npm package), and defines log, die, candidates (executables to try) and
# find_working (prints the first candidate whose --version reports $VERSION).
#
# install_pinned NAME: print the working executable (installing the package first when
# none works yet) as the last stdout line, or die.
install_pinned() {
  local name="$1" exe
  if exe="$(find_working)"; then
    log "$name $VERSION already installed in $PREFIX"
    printf '%s\n' "$exe"
    return 0
  fi

  command -v node >/dev/null 2>&1 || die "node is not on PATH (need node >= 18 and npm)"
  command -v npm  >/dev/null 2>&1 || die "npm is not on PATH (need node >= 18 and npm)"

  mkdir -p "$PREFIX" || die "cannot create $PREFIX"
  # A package.json in the prefix keeps npm from walking up to some unrelated project.
  [ -f "$PREFIX/package.json" ] || printf '{ "name": "lab-%s-cache", "private": true }\n' "$name" > "$PREFIX/package.json"

  log "installing $PKG@$VERSION into $PREFIX"
  if ! npm install --prefix "$PREFIX" --no-audit --no-fund "$PKG@$VERSION" >&2; then
    die "npm install of $PKG@$VERSION failed (see npm output above)"
  fi

  if exe="$(find_working)"; then
    log "installed $name $VERSION"
    printf '%s\n' "$exe"
    return 0
  fi

  log "candidates tried:"; candidates | sed 's/^/  /' >&2
  die "installed $PKG@$VERSION but no executable reported version $VERSION for '--version'"
}
