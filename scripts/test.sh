#!/usr/bin/env bash
# README's second command: install what is missing, build every product (the tests
# launch the sample apps), and run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
swift build --build-tests 2>&1 | { grep -vE '^\[[0-9]+/[0-9]+\]' || true; }
swift test --skip-build --disable-xctest "$@"
# The shipped policy suite (scenarios/ios: one scenario per iOS rule AppHost enforces),
# each on a private host with a virtual clock; a failure fails the run.
.build/debug/apphost test scenarios/ --jobs 2 --junit .build/scenarios-junit.xml
# The host's own memory (issue 17): a daemon with 100 suspended apps, each with a
# snapshot of its own, may hold at most 64 KiB more anonymous memory per app than with
# none (glibc kept each app's 11 MiB render buffers once; see docs/benchmarks/2026-11-26-issue-17.md).
.build/debug/apphost-bench idle --apps 100 --idle-seconds 2 --max-anon-kib-per-app 64 > .build/idle-memory.txt \
    || { cat .build/idle-memory.txt; exit 1; }
grep -E "anonymous memory" .build/idle-memory.txt
