#!/usr/bin/env bash
# Installs the system packages AppHost needs when they are missing (Debian/Ubuntu).
# curl and openssl are for the tests (the HTTP test server's client, its throwaway CA).
# libfreetype-dev, libpng-dev and fonts-dejavu-core are for app-switcher snapshots (text, PNG, the font).
# chromium is for the tests: a headless screenshot of an `apphost test --html` page (CI=true requires it).
set -euo pipefail
need=()
for pkg in libseccomp-dev libsqlite3-dev pkg-config curl openssl libfreetype-dev libpng-dev fonts-dejavu-core chromium; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "apphost setup: installing ${need[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
command -v swift >/dev/null || { echo "apphost setup: the Swift toolchain (6.0 or later) must be on PATH" >&2; exit 1; }
