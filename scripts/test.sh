#!/usr/bin/env bash
# The test suite: installs what it needs, builds, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cargo build --release --workspace
cargo test --workspace --release 2>&1
