"""Enqueue a few jobs and print their ids.

    QUEUELOG_URL=http://127.0.0.1:8000/graphql QUEUELOG_KEY=<producer key> python producer.py 3
"""

from __future__ import annotations

import os
import sys

from queuelog.client import Client

JOB_TYPE = os.environ.get("JOB_TYPE", "email")


def main(count: int) -> None:
    with Client() as client:
        for n in range(count):
            job = client.enqueue(JOB_TYPE, {"to": f"user{n}@example.com"}, priority="medium")
            print(job.id, flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
