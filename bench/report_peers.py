"""Section 6 of docs/benchmarks.md, queuelog against its peers (huey on SQLite, PgQueuer on
PostgreSQL), the Targets rows against huey, and the number formats the whole report uses."""

from __future__ import annotations

from typing import Any

from bench.bench_peers import ONE as ONE_MODE
from bench.bench_peers import QUEUELOG_MODES

AT_BEST = tuple(m for m in QUEUELOG_MODES if m != ONE_MODE)
PEER_MODES = (
    "- huey (no batch API; every enqueue and every dequeue is its own `BEGIN EXCLUSIVE` "
    "transaction): N jobs enqueued, then dequeued until the queue is empty, from 1 thread; "
    "from 4 or 16 threads sharing one `SqliteStorage` (one connection behind a lock), as "
    "huey's consumer with thread workers shares its `Huey` instance; and from 4 threads with "
    "a storage (connection) each, as its process workers have. The best of these counts.",
    "- queuelog, 32 concurrent callers: 32 asyncio tasks call `JobService.enqueue`, then "
    "`claim` (one job), then `complete`; the writer commits every write queued meanwhile in "
    "one transaction (group commit), so concurrent calls share one fsync.",
    "- queuelog, batches of 100: one caller; `enqueue_many` of 100 jobs, `claim(limit=100)`, "
    "then `complete` per job (there is no batch complete), a claimed batch's 100 completes "
    "issued concurrently so they share group commits.",
    "- Each phase (enqueue N, take N, complete N) is timed on its own; a per-job rate is "
    "1 / (1/enqueue + 1/dequeue or claim [+ 1/complete]).",
)  # fmt: skip
RATE_COLS = ("enqueue", "claim", "complete", "take_per_job", "full_per_job")


def num(x: float, digits: int = 0) -> str:
    """`x` with thousands separators and `digits` decimals: 12,345."""
    return f"{x:,.{digits}f}"


def verdict(ok: bool) -> str:
    """A target's verdict, a miss in bold."""
    return "met" if ok else "**missed**"


def _x(ratio: float) -> str:
    return f"{ratio:.2f}x"


def _ahead(take: float, full: float) -> str:
    def yes(ratio: float) -> str:
        return "yes" if ratio > 1 else "**no**"

    return f"{yes(take)} / {yes(full)}"


def peer_targets(peers: dict[str, Any], names: list[str]) -> list[str]:
    """The issue's "ahead of huey's SQLite storage per job" target, one row per mode: the
    verdict is on enqueue+claim (huey's enqueue+dequeue); the figure with complete is shown."""
    e = peers.get("embedded")
    if e is None:
        return []
    cells = {ONE_MODE + " (vs huey 1 thread)": (e["ratio_take"], e["ratio_full"])}
    for mode in AT_BEST:
        r = e["best"]["ratios"][mode]
        cells[f"{mode} (vs huey's best)"] = (r["take_per_job"], r["full_per_job"])
    rows = []
    for label, (take, full) in cells.items():
        row = [
            f"{_x(take)}; {_x(full)} with complete ({verdict(take > 1)})"
            if name == "sqlite"
            else "n/a"
            for name in names
        ]
        rows.append(
            f"| ahead of huey's SQLite storage per job (enqueue+claim): {label} | "
            + " | ".join(row)
            + " |"
        )
    return rows


def _rate_row(side: str, mode: str, r: dict[str, float], dequeue: str = "claim") -> str:
    complete = num(r["complete"]) if "complete" in r else "n/a"
    full = num(r["full_per_job"]) if "full_per_job" in r else "n/a"
    return (
        f"| {side} | {mode} | {num(r['enqueue'])} | {num(r[dequeue])} | {complete} | "
        f"{num(r.get('take_per_job', r.get('per_job', 0.0)))} | {full} |"
    )


def peers_section(peers: dict[str, Any]) -> list[str]:
    out: list[str] = []
    head = [
        "| side | mode | enqueue /s | dequeue (claim) /s | complete /s | jobs/s: enqueue+"
        "dequeue (claim) | jobs/s: with complete |",
        "|---|---|---|---|---|---|---|",
    ]
    if "embedded" in peers:
        e = peers["embedded"]
        b = e["best"]
        out += [
            "### Embedded: huey's SQLite storage",
            "",
            "Both sides on a SQLite file in the same directory, WAL, fsync on: synchronous="
            "FULL. huey's `SqliteStorage(fsync=True)` sets `pragma synchronous=2` (FULL); "
            "queuelog's default `sqlite_synchronous` is FULL. Read back from the connections "
            f"in this run: {', '.join(e['synchronous'])} (2 = FULL).",
            "",
            "What each does per job: a huey enqueue inserts one row; a huey dequeue deletes it. "
            "A queuelog enqueue inserts the job and an event row; a claim also looks for "
            "expired leases to rescue, takes the job under a lease and writes an event row; "
            "a complete records the outcome (status, result, finish time) and an event row. "
            "huey records no lease, no event and no outcome.",
            "",
            "#### One at a time",
            "",
            "One caller, one job per call, one transaction per operation (huey's row is its "
            "1-thread mode below).",
            "",
            "| | enqueue /s | dequeue (claim) /s | complete /s | jobs/s through |",
            "|---|---|---|---|---|",
            f"| huey | {num(e['huey_enqueue'])} | {num(e['huey_dequeue'])} | n/a | "
            f"{num(e['huey_per_job'])} |",
            f"| queuelog | {num(e['queuelog_enqueue'])} | {num(e['queuelog_claim'])} | "
            f"{num(e['queuelog_complete'])} | {num(e['queuelog_take_per_job'])} "
            f"(with complete: {num(e['queuelog_full_per_job'])}) |",
            "",
            f"Ratio queuelog/huey per job: {e['ratio_take']:.2f} enqueue+claim, "
            f"{e['ratio_full']:.2f} enqueue+claim+complete.",
            "",
            "#### Each at its best",
            "",
            *PEER_MODES,
            "",
            *head,
            *(_rate_row("huey", m, r, "dequeue") for m, r in b["huey"].items()),
            *(_rate_row("queuelog", m, r) for m, r in b["queuelog"].items()),
            "",
            "Ratio queuelog/huey's best (for each column, the best huey mode of the same repeat):",
            "",
            "| queuelog mode | enqueue | claim / dequeue | per job | per job with complete | "
            "ahead of huey per job? (without / with complete) |",
            "|---|---|---|---|---|---|",
        ]
        for mode in AT_BEST:
            r = b["ratios"][mode]
            out.append(
                f"| {mode} | {_x(r['enqueue'])} | {_x(r['claim'])} | {_x(r['take_per_job'])} | "
                f"{_x(r['full_per_job'])} | {_ahead(r['take_per_job'], r['full_per_job'])} |"
            )
        out += ["", _huey_verdict(e), ""]
    if "server" in peers:
        s = peers["server"]
        out += [
            "### Server: PgQueuer on the same PostgreSQL",
            "",
            "One at a time: enqueue; dequeue one job and log it successful.",
            "",
            "| | enqueue /s | claim+complete /s |",
            "|---|---|---|",
            f"| PgQueuer | {num(s['pgqueuer_enqueue'])} | {num(s['pgqueuer_cycle'])} |",
            f"| queuelog | {num(s['queuelog_enqueue'])} | {num(s['queuelog_cycle'])} |",
            f"| ratio | {s['ratio_enqueue']:.2f} | {s['ratio_cycle']:.2f} |",
            "",
        ]
        if "best" in s:
            out += _pg_best(s["best"], head)
    return out


def _huey_verdict(e: dict[str, Any]) -> str:
    r = e["best"]["ratios"]
    ahead = [m for m in AT_BEST if r[m]["take_per_job"] > 1]
    full = [m for m in AT_BEST if r[m]["full_per_job"] > 1]
    behind = [ONE_MODE] * (e["ratio_take"] <= 1) + [m for m in AT_BEST if m not in ahead]
    return (
        "**Ahead of huey's SQLite storage on enqueue+dequeue per job**: "
        f"{', '.join(ahead) or 'no mode'}; behind: {', '.join(behind) or 'no mode'}. "
        "Counting queuelog's complete too (bookkeeping huey does not do): ahead in "
        f"{', '.join(full) or 'no mode'}."
    )


def _pg_best(b: dict[str, Any], head: list[str]) -> list[str]:
    out = [
        "At best: PgQueuer with its batch calls, 100 jobs each (`enqueue` of lists, "
        "`dequeue(batch_size=100)`, `log_jobs` of the batch, which is its complete), against "
        "queuelog's modes as on SQLite above.",
        "",
        *head,
        _rate_row("PgQueuer", "batches of 100", b["pgqueuer"]),
        *(_rate_row("queuelog", m, r) for m, r in b["queuelog"].items()),
        "",
        "| queuelog mode / PgQueuer batches | enqueue | claim / dequeue | complete / log | "
        "per job | per job with complete |",
        "|---|---|---|---|---|---|",
    ]
    for mode in AT_BEST:
        r = b["ratios"][mode]
        out.append(f"| {mode} | " + " | ".join(_x(r[k]) for k in RATE_COLS) + " |")
    ahead = [m for m in AT_BEST if b["ratios"][m]["take_per_job"] > 1]
    return [*out, "", f"Ahead of PgQueuer's batches per job: {', '.join(ahead) or 'no mode'}.", ""]
