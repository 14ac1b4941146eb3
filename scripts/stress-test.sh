#!/usr/bin/env bash
# The determinism proof (issue 31): on a loaded machine the shipped policy suite gives the
# same events every run and the whole test suite passes, run after run.
#
#   scripts/stress-test.sh                 # 2 CPU hogs; scenarios --repeat 20 --jobs 4; the suite 10 times
#   scripts/stress-test.sh --runs 3 --repeat 5 --hogs 2
#
# While it runs, HOGS processes spin on the CPU (at the tests' own priority). Then:
#   1. `apphost test scenarios/ios --repeat R --jobs 4`: each scenario R times; a scenario whose
#      runs' events differ, or that fails, fails the step;
#   2. `swift test` (everything scripts/test.sh runs) RUNS times in a row; any failure stops it.
# Prints what each step took and exits non-zero at the first failure. Needs a build of the
# tests (scripts/test.sh does one; so does `swift build --build-tests`).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=10
repeat=20
hogs=2
jobs=4
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --hogs) hogs="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "stress-test: unknown option $1 (see --help)" >&2; exit 64 ;;
  esac
done
for n in "$runs" "$repeat" "$hogs" "$jobs"; do
  case "$n" in ''|*[!0-9]*) echo "stress-test: counts are whole numbers, got \"$n\"" >&2; exit 64 ;; esac
done

[ -x .build/debug/apphost ] || { echo "stress-test: no build; run scripts/test.sh (or swift build --build-tests) first" >&2; exit 66; }

pids=()
stop_hogs() { for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; }
trap stop_hogs EXIT INT TERM
for _ in $(seq 1 "$hogs"); do
  # A CPU hog that stops by itself after an hour even if this script is killed with SIGKILL.
  timeout 3600 sh -c 'while :; do :; done' &
  pids+=("$!")
done
echo "stress-test: $hogs CPU hog(s) running on $(nproc) CPU(s)"

start=$(date +%s)
echo "stress-test: apphost test scenarios/ios --repeat $repeat --jobs $jobs"
.build/debug/apphost test scenarios/ios --repeat "$repeat" --jobs "$jobs" --junit .build/stress-scenarios.xml > .build/stress-scenarios.txt \
  || { grep -v '^PASS' .build/stress-scenarios.txt; echo "stress-test: the scenarios FAILED under load"; exit 1; }
tail -n 1 .build/stress-scenarios.txt
echo "stress-test: scenarios took $(( $(date +%s) - start )) s"

for i in $(seq 1 "$runs"); do
  t=$(date +%s)
  if swift test --skip-build --disable-xctest > ".build/stress-run-$i.txt" 2>&1; then
    echo "stress-test: suite run $i of $runs passed ($(( $(date +%s) - t )) s): $(grep -E 'Test run with' ".build/stress-run-$i.txt" | tail -n 1)"
  else
    grep -E '✘' ".build/stress-run-$i.txt" | grep -v 'failed after' | head -n 40
    echo "stress-test: suite run $i of $runs FAILED under load (.build/stress-run-$i.txt)"
    exit 1
  fi
done
echo "stress-test: all passed in $(( $(date +%s) - start )) s"
