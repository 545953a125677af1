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
# shellcheck source=lib/npm-bin.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/npm-bin.sh"
install_npm_bin install-codex-acp LAB_CODEX_ACP_VERSION codex-acp @zed-industries/codex-acp codex-acp
