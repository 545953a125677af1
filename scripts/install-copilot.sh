#!/usr/bin/env bash
# Install the pinned GitHub Copilot CLI (lab drives it over the Agent Client Protocol,
# `copilot --acp`, with a model provider of the operator's own: its BYOK mode needs no
# GitHub sign-in) from npm into a cache folder outside the repo.
#
#   scripts/install-copilot.sh       # installs @github/copilot@1.0.102
#
# Environment:
#   LAB_COPILOT_VERSION   version to install (default 1.0.102)
#   LAB_CACHE_DIR         cache root (default $HOME/.cache/lab); the install goes to
#                         $LAB_CACHE_DIR/copilot/<version>
#
# Idempotent: an install whose package.json has the requested version is kept. The
# absolute path of the runnable `copilot` (its launcher, which runs the platform's
# native binary from the package beside it) is the LAST line of stdout; everything
# else goes to stderr. Needs only node + npm.
set -euo pipefail

VERSION="${LAB_COPILOT_VERSION:-1.0.102}"
# shellcheck source=lib/npm-bin.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/npm-bin.sh"
install_npm_bin install-copilot LAB_COPILOT_VERSION copilot @github/copilot copilot
