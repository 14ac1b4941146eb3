#!/usr/bin/env bash
# Background-transfer benchmark: a 1 GiB download on loopback from nginx, through the
# host and apphost-transferd (a ProbeApp starts it), against curl fetching the same
# file from the same server in the same run. Prints wall time, throughput, the
# daemon's CPU seconds and peak RSS. Needs a release build and nginx:
#   swift build -c release --product apphost && swift build -c release --product apphost-transferd \
#     && swift build -c release --product ProbeApp
#   scripts/bench-transfer.sh [SIZE_MIB]   (default 1024)
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-1024}
bin=.build/release
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

# Baseline: curl to a file on the same disk, twice (the first warms the page cache).
curl -sf -o "$work/curl.bin" "$url"
t0=$(date +%s.%N); curl -sf -o "$work/curl.bin" "$url"; t1=$(date +%s.%N)
[ "$(sha256sum "$work/curl.bin" | cut -d' ' -f1)" = "$expected" ] || { echo "curl got another file" >&2; exit 1; }
curl_s=$(python3 -c "print($t1-$t0)")

# The host and the daemon: a probe starts the download; the run ends when its
# didCompleteWithError callback returned.
"$bin/apphost" daemon --state-dir "$work/state" > "$work/daemon.log" 2>&1 &
until grep -q "daemon ready" "$work/daemon.log"; do
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
dpid=$(python3 - "$work/state/events.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["cause"].startswith("transfer daemon started"):
        pid = e.get("pid")
print(pid)
PY
)
cpu0=$(awk '{print $14+$15}' /proc/$dpid/stat)
"$bin/apphost" events --follow com.bench.transfer --state-dir "$work/state" > "$work/events.txt" &
follower=$!
t0=$(date +%s.%N)
"$bin/apphost" launch com.bench.transfer --state-dir "$work/state" -- --on launch url-session:s --on launch "download:s:$url" >/dev/null
# The end is the event line; a script reads it by polling the follower's output
# every 10 ms (so the figure may be up to 10 ms late).
until grep -q "didCompleteWithError(task 1, nil) returned" "$work/events.txt"; do sleep 0.01; done
t1=$(date +%s.%N)
kill $follower 2>/dev/null || true
cpu1=$(awk '{print $14+$15}' /proc/$dpid/stat)
hwm=$(awk '/VmHWM/ {print $2}' /proc/$dpid/status)
got=$(sha256sum "$work/state/containers/com.bench.transfer/Documents/downloads/1" | cut -d' ' -f1)
host_s=$(python3 -c "print($t1-$t0)")
ticks=$(getconf CLK_TCK)
python3 - <<PY
size = $size_mib / 1024
curl_s, host_s = $curl_s, $host_s
cpu = ($cpu1 - $cpu0) / $ticks
print(f"1 file of {$size_mib} MiB over loopback from nginx 1.22 (sendfile), release build")
print(f"  curl -o file                    {curl_s:7.3f} s  {$size_mib/curl_s:8.1f} MiB/s  baseline")
print(f"  host + apphost-transferd        {host_s:7.3f} s  {$size_mib/host_s:8.1f} MiB/s  {curl_s/host_s:.2f}x of curl's throughput")
print(f"    (from 'apphost launch' to the app's didCompleteWithError returned: launch, session, enqueue, download, fsync, rename, delivery)")
print(f"  daemon CPU: {cpu:.2f} s for {size:.2f} GiB ({cpu/size:.2f} CPU s per GiB); daemon peak RSS {int('$hwm')/1024:.1f} MiB")
print(f"  sha256 {'matches' if '$got' == '$expected' else 'DIFFERS'}")
PY
