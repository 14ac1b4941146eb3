#!/usr/bin/env bash
# Background-transfer benchmark: a 1 GiB download on loopback from nginx, through the
# host and apphost-transferd (a ProbeApp starts it), against curl fetching the same
# file from the same server in the same run. Prints wall time, throughput, the
# daemon's CPU seconds and peak RSS. Needs a release build and nginx:
#   swift build -c release --product apphost && swift build -c release --product apphost-transferd \
#     && swift build -c release --product ProbeApp
#   [ROUNDS=3] [BIN=.build/release] scripts/bench-transfer.sh [SIZE_MIB]   (default 1024)
# BIN names the directory holding the three release binaries (e.g. a private
# --scratch-path: BIN=.build-tp/release).
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-1024}
bin=${BIN:-.build/release}
for b in apphost apphost-transferd ProbeApp; do
  test -x "$bin/$b" || { echo "build $b in release first (see the header of this script)" >&2; exit 1; }
done
if ! command -v nginx >/dev/null; then
  if [ "$(id -u)" = 0 ]; then apt-get install -y nginx-light >/dev/null; else sudo apt-get install -y nginx-light >/dev/null; fi
fi
work=$(mktemp -d /tmp/ah-bench-transfer-XXXX)
cleanup() {
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  "$bin/apphost" shutdown --state-dir "$work/state" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
[ -n "${KEEP:-}" ] && trap - EXIT

# The file, and nginx serving it on a free port.
mkdir -p "$work/www" "$work/nginx-tmp"
head -c $((size_mib * 1024 * 1024)) /dev/urandom > "$work/www/big.bin"
chmod 755 "$work" "$work/www"; chmod 644 "$work/www/big.bin"   # nginx's workers run as another user
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$work/nginx.conf" <<EOF
daemon on;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
worker_processes 1;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path $work/nginx-tmp; proxy_temp_path $work/nginx-tmp;
  fastcgi_temp_path $work/nginx-tmp; uwsgi_temp_path $work/nginx-tmp; scgi_temp_path $work/nginx-tmp;
  sendfile on;
  server { listen 127.0.0.1:$port; root $work/www; }
}
EOF
nginx -c "$work/nginx.conf"
url="http://127.0.0.1:$port/big.bin"
expected=$(sha256sum "$work/www/big.bin" | cut -d' ' -f1)

# Rounds alternate curl and the host. Before each, the previous file is deleted and
# everything synced, so every run starts from the same page-cache state. (In this
# VM, the first touch of fresh guest memory costs more than the copy itself: a run
# writing into pages another run just freed is about 3x faster; see docs/benchmarks/2026-11-22-transfers-issue-6.md.)
rounds=${ROUNDS:-3}
curl -sf -o "$work/warm.bin" "$url"   # warms nginx's page cache and frees a file's worth of pages
rm -f "$work/warm.bin"; sync

# The host and the daemon: a probe starts the download; a round ends when its
# didCompleteWithError callback returned.
"$bin/apphost" daemon --state-dir "$work/state" > "$work/daemon.log" 2>&1 &
until grep -q "daemon ready" "$work/daemon.log" 2>/dev/null; do
  kill -0 $! 2>/dev/null || { cat "$work/daemon.log" >&2; exit 1; }
  sleep 0.05  # polling a log file for the daemon's readiness line (a shell script has no event to wait on)
done
mkdir -p "$work/P.app"
cat > "$work/P.app/Info.plist" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<plist version="1.0"><dict>
<key>CFBundleIdentifier</key><string>com.bench.transfer</string>
<key>CFBundleExecutable</key><string>ProbeApp</string>
</dict></plist>
EOF
"$bin/apphost" install "$work/P.app" --state-dir "$work/state" >/dev/null
until grep -q "transfer daemon ready" "$work/state/events.jsonl" 2>/dev/null; do sleep 0.05; done  # same: a log line
dpid=$(python3 -c '
import json, sys
pid = None
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["cause"].startswith("transfer daemon started"):
        pid = e.get("pid")
print(pid)' "$work/state/events.jsonl")
"$bin/apphost" events --follow com.bench.transfer --state-dir "$work/state" > "$work/events.txt" &
follower=$!
downloads="$work/state/containers/com.bench.transfer/Documents/downloads"
ticks=$(getconf CLK_TCK)
results="$work/results.txt"
for round in $(seq 1 "$rounds"); do
  # curl -o file
  sync
  # (bash's `time` gives curl's own CPU seconds, user + system, for the CPU comparison)
  t0=$(date +%s.%N); ccpu=$( { TIMEFORMAT='%U %S'; time curl -sf -o "$work/curl.bin" "$url"; } 2>&1 | awk '{print $1+$2}'); t1=$(date +%s.%N)
  [ "$(sha256sum "$work/curl.bin" | cut -d' ' -f1)" = "$expected" ] || { echo "curl got another file" >&2; exit 1; }
  rm -f "$work/curl.bin"; sync
  # curl -o file, then fsync it (the daemon fsyncs before it reports a download finished)
  t2=$(date +%s.%N); curl -sf -o "$work/curl.bin" "$url"; sync "$work/curl.bin"; t3=$(date +%s.%N)
  rm -f "$work/curl.bin"; sync
  # the host
  cpu0=$(awk '{print $14+$15}' "/proc/$dpid/stat")
  t4=$(date +%s.%N)
  "$bin/apphost" launch com.bench.transfer --state-dir "$work/state" -- --on launch url-session:s --on launch "download:s:$url" >/dev/null
  # The end is the event line; a script reads it by polling the follower's output
  # every 10 ms (so the figure may be up to 10 ms late).
  until [ "$(grep -c "didCompleteWithError(task [0-9]*, nil) returned" "$work/events.txt")" -ge "$round" ]; do sleep 0.01; done
  t5=$(date +%s.%N)
  cpu1=$(awk '{print $14+$15}' "/proc/$dpid/stat")
  got=$(ls -t "$downloads" | head -1)
  [ "$(sha256sum "$downloads/$got" | cut -d' ' -f1)" = "$expected" ] || { echo "the app got another file (round $round)" >&2; exit 1; }
  "$bin/apphost" terminate com.bench.transfer --state-dir "$work/state" >/dev/null
  rm -f "$downloads/$got"; sync
  echo "$t0 $t1 $t2 $t3 $t4 $t5 $cpu0 $cpu1 $ccpu" >> "$results"
done
kill $follower 2>/dev/null || true
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$dpid/status")
python3 -c '
import statistics, sys
size_mib, ticks, hwm = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
curl = [r[1]-r[0] for r in rows]; curlsync = [r[3]-r[2] for r in rows]; host = [r[5]-r[4] for r in rows]
cpu = [(r[7]-r[6])/ticks for r in rows]; ccpu = [r[8] for r in rows]
m = statistics.median
each = lambda xs: " ".join("%.3f" % x for x in xs)
print(f"1 file of {size_mib} MiB over loopback from nginx (sendfile), release build, {len(rows)} alternating rounds: median (each round)")
def line(name, xs, note):
    print(f"  {name:34s} {m(xs):7.3f} s  {size_mib/m(xs):7.1f} MiB/s  {note}   ({each(xs)})")
line("curl -o file", curl, "baseline")
line("curl -o file, then sync the file", curlsync, f"{m(curl)/m(curlsync):.2f}x of curl")
line("host + apphost-transferd", host, f"{m(curl)/m(host):.2f}x of curl, {m(curlsync)/m(host):.2f}x of curl+sync")
print("    (apphost launch -> the app returned from didCompleteWithError: launch, session, enqueue, download, fsync, rename, delivery)")
print(f"  daemon CPU {m(cpu):.2f} s a round ({m(cpu)/(size_mib/1024):.2f} CPU s per GiB; each round {each(cpu)}); daemon peak RSS {hwm/1024:.1f} MiB; every sha256 matches")
print(f"  curl CPU {m(ccpu):.2f} s a round ({m(ccpu)/(size_mib/1024):.2f} CPU s per GiB)")
' "$results" "$size_mib" "$ticks" "$hwm"
