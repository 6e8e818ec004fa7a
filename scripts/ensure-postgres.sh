#!/usr/bin/env bash
# Start the machine's PostgreSQL cluster when it is not answering (tests need it).
set -euo pipefail
host=127.0.0.1 port=5432
if pg_isready -q -h "$host" -p "$port" 2>/dev/null; then exit 0; fi
if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
fi
for _ in $(seq 1 30); do
  pg_isready -q -h "$host" -p "$port" 2>/dev/null && exit 0
  sleep 1
done
echo "PostgreSQL is not answering on $host:$port" >&2
exit 1
