#!/usr/bin/env bash
# README's first command: install what is missing, build, and show a host at work.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
swift build 2>&1 | { grep -vE '^\[[0-9]+/[0-9]+\]' || true; }
test -x .build/debug/apphost || { echo "build failed" >&2; exit 1; }
exec .build/debug/apphost demo "$@"
