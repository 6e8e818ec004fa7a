"""Print every status change the key may see, as it happens; resumes where it left off.

The cursor of the last event is kept in a file, so a restarted listener misses nothing and
repeats nothing.

    QUEUELOG_URL=http://127.0.0.1:8000/graphql QUEUELOG_KEY=<key> python listener.py [--count N]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from queuelog.client import Client


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, help="stop after this many events")
    parser.add_argument("--cursor-file", type=Path, default=Path(".listener-cursor"))
    args = parser.parse_args()
    after = args.cursor_file.read_text().strip() if args.cursor_file.exists() else None
    with Client() as client:
        for n, event in enumerate(client.watch(after=after or None), start=1):
            job = event.job
            print(f"{event.cursor} job {job.id} {job.type} {event.status.value}", flush=True)
            args.cursor_file.write_text(event.cursor)
            if args.count is not None and n >= args.count:
                break


if __name__ == "__main__":
    main()
