#!/usr/bin/env bash
# Fuzz AppHost's input readers with libFuzzer (see SECURITY.md, "Fuzzing").
#
#   scripts/fuzz.sh <target>|all <seconds>
#
# Builds the harness if its sources changed (swiftc -sanitize=fuzzer,address, outside
# SwiftPM), assembles seeds, runs libFuzzer for <seconds> of wall time, prints the CPU
# time fuzzed and the crashes found, and exits 1 if there was a crash.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(manifest-xml manifest-binary frame apns mode-hub)
WORK=${APPHOST_FUZZ_DIR:-.fuzz}
SHARED=${APPHOST_CORPUS:-../shared/corpus}
SWIFTC=${SWIFTC:-swiftc}
BUILD=$WORK/build

usage() {
    cat <<EOF
usage: scripts/fuzz.sh <target>|all <seconds>

targets:
  manifest-xml     Info.plist bytes (XML, OpenStep) through the strict and lenient manifest readers
  manifest-binary  binary (bplist00) Info.plists through the same readers
  frame            IPC / control-socket byte streams through FrameDecoder and Frame.decode of every message type
  apns             .apns push payloads through APNsPayload.parse
  mode-hub         app IPC streams through ModeHub and every background-mode plugin (virtual clock)
  all              each of the above for <seconds>

Seeds: $SHARED (plists, entitlements, apns; skipped with a note if missing),
manifests/*.app, Fuzz/seeds, Fuzz/regressions, and messages the frame harness encodes.
Work files (gitignored): $WORK/build (harnesses), $WORK/corpus/<target> (kept between
runs), $WORK/crashes/<target> (crash inputs), $WORK/logs, $WORK/runs.tsv (one line a run).
Environment: APPHOST_FUZZ_DIR (work dir), APPHOST_CORPUS (shared corpus), SWIFTC,
FUZZ_ARGS (extra libFuzzer flags, e.g. "-jobs=1 -use_value_profile=1").
EOF
}

if [[ $# -ne 2 || $1 == -h || $1 == --help ]]; then
    usage
    [[ $# -eq 1 && ($1 == -h || $1 == --help) ]] && exit 0
    exit 64
fi
target=$1
seconds=$2
if ! [[ $seconds =~ ^[0-9]+$ ]] || (( seconds < 1 )); then
    echo "fuzz: <seconds> must be a whole number of seconds, got \"$seconds\"" >&2
    exit 64
fi
if [[ $target != all ]] && ! printf '%s\n' "${TARGETS[@]}" | grep -qx -- "$target"; then
    echo "fuzz: unknown target \"$target\" (known: ${TARGETS[*]}, all)" >&2
    exit 64
fi
command -v "$SWIFTC" >/dev/null || { echo "fuzz: $SWIFTC not found; put the Swift toolchain on PATH" >&2; exit 69; }

mkdir -p "$BUILD" "$WORK/logs"
# The Swift runtime's backtracer and libFuzzer both want the crash signals; with both,
# a crash hangs in swift-backtrace. libFuzzer and ASan report crashes here.
export SWIFT_BACKTRACE=enable=no
# Leaks: Foundation keeps caches for the process's life; they are not input-driven.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}

SWIFT_FLAGS=(-swift-version 6 -sanitize=fuzzer,address -O -g -parse-as-library)

# Whether $1 is missing or older than any of the other files.
stale() {
    local out=$1; shift
    [[ ! -e $out ]] || [[ -n $(find "$@" -newer "$out" -print -quit) ]]
}

# Compiles module $1 from the sources after $2 into $BUILD/$1.o and its .swiftmodule,
# with -enable-testing so that the harnesses can reach internal entry points
# (@testable import). $2 is the files it depends on besides its sources (the objects of
# the modules it imports, separated by spaces), or "".
build_module() {
    local name=$1 dependencies=$2; shift 2
    local sources=("$@")
    # shellcheck disable=SC2086
    stale "$BUILD/$name.o" "${sources[@]}" $dependencies || return 0
    echo "fuzz: building $name (sanitized)"
    if ! "$SWIFTC" "${SWIFT_FLAGS[@]}" -enable-testing -whole-module-optimization -module-name "$name" \
        -I "$BUILD" -emit-module -emit-module-path "$BUILD/$name.swiftmodule" -c -o "$BUILD/$name.o" \
        "${sources[@]}" >"$WORK/logs/build-$name.log" 2>&1; then
        cat "$WORK/logs/build-$name.log" >&2
        echo "fuzz: building $name failed (-sanitize=fuzzer needs the toolchain's clang_rt.fuzzer)" >&2
        exit 1
    fi
    # swiftc leaves an object whose bytes did not change as it was: without this, a module
    # rebuilt after a change in a module it imports stayed older than that module's object,
    # and was built again for every harness.
    touch "$BUILD/$name.o"
}

build_harness() {
    local t=$1
    build_module AppHostProtocol "" Sources/AppHostProtocol/*.swift
    local objects=("$BUILD/AppHostProtocol.o")
    local sources=(Fuzz/FuzzSupport.swift)
    case $t in
        manifest-*) sources+=(Fuzz/ManifestFuzzing.swift) ;;
        frame) sources+=(Fuzz/SeedMessages.swift Tests/TestNumericIDLiterals/NumericIDLiterals.swift) ;;
    esac
    # The manifest reader, and the host config's text forms: the manifest targets read
    # with the first, Plugins imports both (its linter, its durations).
    case $t in
        manifest-* | apns | mode-hub)
            build_module AppHostManifest "$BUILD/AppHostProtocol.o" Sources/AppHostManifest/*.swift
            objects+=("$BUILD/AppHostManifest.o")
            ;;
    esac
    case $t in
        apns | mode-hub)
            build_module HostConfig "$BUILD/AppHostProtocol.o" Sources/HostConfig/*.swift
            build_module Plugins "$BUILD/AppHostProtocol.o $BUILD/AppHostManifest.o $BUILD/HostConfig.o" Sources/Plugins/*.swift
            objects+=("$BUILD/HostConfig.o" "$BUILD/Plugins.o")
            ;;
    esac
    [[ $t == mode-hub ]] && sources+=(Fuzz/SeedMessages.swift Tests/TestNumericIDLiterals/NumericIDLiterals.swift)
    sources+=("Fuzz/Targets/$t.swift")
    stale "$BUILD/$t" "${sources[@]}" "${objects[@]}" || return 0
    echo "fuzz: building harness $t"
    if ! "$SWIFTC" "${SWIFT_FLAGS[@]}" -module-name Harness -I "$BUILD" "${sources[@]}" "${objects[@]}" \
        -o "$BUILD/$t" >"$WORK/logs/build-$t.log" 2>&1; then
        cat "$WORK/logs/build-$t.log" >&2
        echo "fuzz: building harness $t failed" >&2
        exit 1
    fi
}

# Copies the files given (those that exist) into directory $1, each named after a hash
# of its content plus its base name: manifests/*.app/Info.plist are eleven files with one
# base name, and a copy by base name alone kept only the last. Same content, one seed.
seed_name() {
    local hash
    hash=$(sha1sum <"$1")
    printf '%s-%s' "${hash:0:16}" "$(basename "$1")"
}

copy_seeds() {
    local dir=$1; shift
    local f
    for f in "$@"; do
        [[ -f $f ]] && cp "$f" "$dir/$(seed_name "$f")"
    done
    return 0
}

# Fills $WORK/seeds/$1 afresh.
assemble_seeds() {
    local t=$1
    local dir=$WORK/seeds/$t
    rm -rf "$dir"
    mkdir -p "$dir"
    shopt -s nullglob
    local shared_plists=() shared_apns=()
    if [[ -d $SHARED ]]; then
        shared_plists=("$SHARED"/plists/* "$SHARED"/entitlements/*)
        shared_apns=("$SHARED"/apns/*)
    elif [[ $t != frame && $t != mode-hub ]]; then
        echo "fuzz: note: $SHARED not found; seeds from the project's fixtures only"
    fi
    local project_plists=(manifests/*.app/Info.plist manifests/*.app/*.entitlements)
    case $t in
        manifest-xml)
            copy_seeds "$dir" "${shared_plists[@]}" "${project_plists[@]}"
            ;;
        manifest-binary)
            APPHOST_FUZZ_MAKE_SEEDS=$dir "$BUILD/$t" "${shared_plists[@]}" "${project_plists[@]}" \
                "Fuzz/regressions/manifest-xml/"* >/dev/null
            local f
            for f in "${shared_plists[@]}"; do
                [[ $(head -c 6 "$f") == bplist ]] && cp "$f" "$dir/$(seed_name "$f")"
            done
            ;;
        frame | mode-hub)
            APPHOST_FUZZ_MAKE_SEEDS=$dir "$BUILD/$t" >/dev/null
            ;;
        apns)
            copy_seeds "$dir" "${shared_apns[@]}" Fuzz/seeds/apns/*
            ;;
    esac
    copy_seeds "$dir" "Fuzz/regressions/$t/"*
    shopt -u nullglob
    local n
    n=$(find "$dir" -type f | wc -l)
    if (( n == 0 )); then
        echo "fuzz: no seeds for $t" >&2
        exit 1
    fi
    echo "fuzz: $t: $n seeds"
}

# Runs one target; returns 1 if it found a crash.
run_target() {
    local t=$1
    build_harness "$t"
    assemble_seeds "$t"
    local corpus=$WORK/corpus/$t crashes=$WORK/crashes/$t
    mkdir -p "$corpus" "$crashes"
    local flags=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
                 -artifact_prefix="$crashes/")
    case $t in
        manifest-xml) flags+=(-dict=Fuzz/dictionaries/plist.dict -max_len=65536) ;;
        manifest-binary) flags+=(-max_len=16384) ;;
        frame) flags+=(-dict=Fuzz/dictionaries/json.dict -max_len=8192) ;;
        mode-hub) flags+=(-dict=Fuzz/dictionaries/json.dict -max_len=16384) ;;
        apns) flags+=(-dict=Fuzz/dictionaries/json.dict -max_len=5000) ;;
    esac
    # shellcheck disable=SC2206
    local extra=(${FUZZ_ARGS:-})
    local stamp log
    stamp=$(date -u +%Y%m%dT%H%M%SZ)
    log=$WORK/logs/$t-$stamp.log
    local marker=$WORK/logs/.start-$t
    touch "$marker"
    local started=$SECONDS status=0
    echo "fuzz: $t for ${seconds}s (log: $log)"
    # The `time` keyword reports the harness's own user and system CPU time.
    local TIMEFORMAT='%U %S'
    { time "$BUILD/$t" "${flags[@]}" "${extra[@]}" "$corpus" "$WORK/seeds/$t" >"$log" 2>&1; } \
        2>"$WORK/logs/.cpu-$t" || status=$?
    local wall=$((SECONDS - started))
    local cpu runs found
    cpu=$(awk '{ printf "%.1f", $1 + $2 }' "$WORK/logs/.cpu-$t")
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    found=$(find "$crashes" -type f -newer "$marker" | sort)
    local count
    count=$(grep -c . <<<"$found" || true)
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$stamp" "$t" "$wall" "$cpu" "${runs:-?}" "$count" >>"$WORK/runs.tsv"
    echo "fuzz: $t: ${wall}s wall, ${cpu}s CPU fuzzed, ${runs:-?} runs, corpus $(find "$corpus" -type f | wc -l) inputs, $count crashes"
    if (( count > 0 )) || (( status != 0 )); then
        echo "fuzz: $t: libFuzzer exited with status $status; the end of its log:" >&2
        grep -v '^#[0-9]' "$log" | tail -n 40 >&2
        local f
        for f in $found; do
            echo "fuzz: crash input: $f (replay: SWIFT_BACKTRACE=enable=no $BUILD/$t $f)" >&2
        done
        return 1
    fi
}

failed=0
if [[ $target == all ]]; then
    for t in "${TARGETS[@]}"; do
        run_target "$t" || failed=1
    done
else
    run_target "$target" || failed=1
fi
total=$(awk -F'\t' 'NR > 0 { cpu[$2] += $4; runs[$2] += ($5 == "?" ? 0 : $5); crashes[$2] += $6 }
    END { for (t in cpu) printf "  %-16s %8.1f s CPU  %12d runs  %d crashes\n", t, cpu[t], runs[t], crashes[t] }' \
    "$WORK/runs.tsv" | sort)
echo "fuzz: all runs recorded in $WORK/runs.tsv:"
echo "$total"
exit $failed
