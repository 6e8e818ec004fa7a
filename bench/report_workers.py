"""Section 8 of docs/benchmarks.md: workers end to end (bench/bench_workers.py)."""

from __future__ import annotations

from typing import Any

from bench.report_peers import num


def workers_section(workers: dict[str, Any]) -> list[str]:
    """Real worker processes against a live server (bench/bench_workers.py)."""
    out = [
        "One `queuelog.worker.Worker` process with a no-op handler, proven up by a warm-up "
        "job, while the jobs are enqueued in batches of 100 (`enqueueJobs`, concurrently); "
        "timed from the first enqueue until `queueStats` counts the last COMPLETED. huey: "
        "its consumer on `SqliteHuey` (fsync on) with thread workers and a no-op task, "
        "timed from the first enqueue until the last task ran. Latency: one idle "
        "long-polling worker, `time.time()` before `enqueueJob` to the handler's start. "
        "Idle: the server's CPU while 200 `claimJob(waitSeconds)` wait on an empty type.",
        "",
        "| backend | jobs | workers | queuelog jobs/s | huey jobs/s | queuelog/huey |",
        "|---|---|---|---|---|---|",
    ]
    for name, w in workers.items():
        for k, rate in w["throughput"].items():
            huey = w.get("huey", {}).get(k)
            ratio = w.get("ratio", {}).get(k)
            out.append(
                f"| {name} | {num(w['jobs'])} | {k} | {num(rate)} | "
                f"{num(huey) if huey else ''} | {f'{ratio:.2f}' if ratio else ''} |"
            )
    out.append("")
    for name, w in workers.items():
        lat, idle = w["latency"], w["idle"]
        out.append(
            f"- {name}: enqueue to start p50 {lat['p50_ms']:.1f} ms, p99 {lat['p99_ms']:.1f} ms "
            f"({lat['samples']} jobs); {idle['claims']} waiting claims cost the server "
            f"{idle['cpu_pct']:.1f} % of a core over {idle['seconds']:.0f} s "
            f"({idle['waiting_at_end']} still waiting at the end)."
        )
    return out
