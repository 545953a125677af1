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
# shellcheck source=lib/npm-bin.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/npm-bin.sh"
install_npm_bin install-opencode LAB_OPENCODE_VERSION opencode opencode-ai opencode
