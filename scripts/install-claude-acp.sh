#!/usr/bin/env bash
# Install the pinned Claude ACP adapter (an Agent Client Protocol agent that drives
# Claude Code through the Agent SDK) from npm into a cache folder outside the repo.
#
#   scripts/install-claude-acp.sh        # installs @agentclientprotocol/claude-agent-acp@0.101.0
#
# Environment:
#   LAB_CLAUDE_ACP_VERSION   version to install (default 0.101.0)
#   LAB_CACHE_DIR            cache root (default $HOME/.cache/lab); the install goes to
#                            $LAB_CACHE_DIR/claude-agent-acp/<version>
#
# Idempotent: an install whose package.json has the requested version is kept. The
# absolute path of the runnable `claude-agent-acp` is the LAST line of stdout;
# everything else goes to stderr. Needs only node + npm.
set -euo pipefail

VERSION="${LAB_CLAUDE_ACP_VERSION:-0.101.0}"
# shellcheck source=lib/npm-bin.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/npm-bin.sh"
install_npm_bin install-claude-acp LAB_CLAUDE_ACP_VERSION claude-agent-acp @agentclientprotocol/claude-agent-acp claude-agent-acp
