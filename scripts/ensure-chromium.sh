#!/usr/bin/env bash
# Install Debian's chromium when it is missing: tests/browser drives it headless.
set -euo pipefail
[ -x /usr/bin/chromium ] && exit 0
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q chromium >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }
[ -x /usr/bin/chromium ] || { echo "chromium could not be installed" >&2; exit 1; }
