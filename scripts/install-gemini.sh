#!/usr/bin/env bash
# Install the pinned Google Gemini CLI (lab drives it over the Agent Client Protocol,
# `gemini --acp`: providers/gemini-cli) from npm into a cache folder outside the repo.
#
#   scripts/install-gemini.sh        # installs @google/gemini-cli@0.61.0
#
# Environment:
#   LAB_GEMINI_VERSION   version to install (default 0.61.0)
#   LAB_CACHE_DIR        cache root (default $HOME/.cache/lab); the install goes to
#                        $LAB_CACHE_DIR/gemini-cli/<version>
#
# Idempotent: an install whose package.json has the requested version is kept. The
# absolute path of the runnable `gemini` is the LAST line of stdout; everything else
# goes to stderr. Needs only node (>= 20) + npm.
set -euo pipefail

VERSION="${LAB_GEMINI_VERSION:-0.61.0}"
# shellcheck source=lib/npm-bin.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/npm-bin.sh"
install_npm_bin install-gemini LAB_GEMINI_VERSION gemini-cli @google/gemini-cli gemini
