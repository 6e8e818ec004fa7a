"""docs/benchmarks.md and the claim-latency plot, from the results of one run."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path
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
HTTP_ROWS = (
    ("typename", "`{ __typename }`"),
    ("enqueue", "`enqueueJob`"),
    ("cycle", "`claimJob`+`completeJob`"),
    ("batch", "`enqueueJobs` jobs"),
)
SELECTION_LABELS = {"events": "events", "with_job": "with the job"}  # bench_subscriptions
VERSIONS = ("queuelog", "strawberry-graphql", "graphql-core", "sqlalchemy", "starlette",
            "uvicorn", "psycopg", "aiohttp", "huey", "pgqueuer")  # fmt: skip


def machine() -> list[str]:
    import sqlite3

    cpu = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = Path("/proc/meminfo").read_text().split("\n", 1)[0].split()[1]
    try:
        pg = subprocess.run(
            ["psql", "-h", "127.0.0.1", "-U", "postgres", "-Atc", "SHOW server_version"],
            capture_output=True, text=True, timeout=5, check=False,
        ).stdout.strip()  # fmt: skip
    except OSError:
        pg = "?"
    versions = []
    for name in VERSIONS:
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return [
        f"- {cpu}, {len(_cpus())} CPU(s), {int(mem) // 1024} MiB RAM; {platform.platform()}",
        f"- Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"PostgreSQL {pg or '?'}",
        f"- {', '.join(versions)}",
    ]


def _cpus() -> list[str]:
    text = Path("/proc/cpuinfo").read_text()
    return [line for line in text.splitlines() if line.startswith("processor")]


def _f(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def _verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def markdown(results: dict[str, Any], command: str, notes: list[str]) -> str:
    be = results["backends"]
    names = list(be)
    out = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`python -m bench`); do not edit by hand. Every figure is the "
        "median of repeated runs; every speed is also a ratio to a reference measured in the "
        "same run, since the machine is shared and noisy: trust the ratios over the absolute "
        "figures.",
        "",
        f"Command: `{command}`  ",
        f"Run: {results['started']}, {results['elapsed_s'] / 60:.1f} minutes, "
        f"{results['repeats']} repeats.",
        "",
        "## Machine",
        "",
        *machine(),
        "",
        "## Targets",
        "",
        "| target | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for label, check in _targets():
        row = []
        for name in names:
            try:
                value, ok = check(be[name])
                row.append(f"{value} ({_verdict(ok)})")
            except KeyError:
                row.append("n/a")
        out.append(f"| {label} | " + " | ".join(row) + " |")
    out += _peer_targets(results["peers"], names)
    out += ["", "## 1. Service layer, no HTTP", ""]
    out += [
        "One operation at a time, one transaction each. Reference: the same statements on the "
        "bare driver (`sqlite3` with WAL, synchronous=FULL, BEGIN IMMEDIATE; `psycopg`).",
        "",
        "| backend | operation | queuelog /s | raw driver /s | ratio |",
        "|---|---|---|---|---|",
    ]
    for name in names:
        for op, label in (("enqueue", "enqueue"), ("cycle", "claim+complete")):
            r = be[name]["service"][op]
            out.append(
                f"| {name} | {label} | {_f(r['service'])} | {_f(r['raw'])} | {r['ratio']:.2f} |"
            )
    out += ["", "## 2-3. Over HTTP, one server process", ""]
    h0 = be[names[0]]["http"]
    out += [
        f"aiohttp load generator in a separate process, {h0['connections']} connections "
        f"(`enqueueJobs`: {h0['batch_connections']} connections of 100-job batches). Ratio: "
        "to the same server answering `{ __typename }` in the same repeat. Server CPU: all "
        "its threads, per request, and in cores; the load generator's cores show when it, "
        "not the server, set the rate (near 1.0: one core's worth, all it can use).",
        "",
        "| backend | operation | rate /s | p50 ms | p99 ms | ratio to `__typename` "
        "| server CPU µs/request | server cores | load generator cores |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        h = be[name]["http"]
        for op, label in HTTP_ROWS:
            ratio = f"{h[op]['ratio']:.2f}" if "ratio" in h[op] else ""
            out.append(
                f"| {name} | {label} | {_f(h[op]['rate'])} | {h[op]['p50_ms']:.1f} | "
                f"{h[op]['p99_ms']:.1f} | {ratio} | {_f(h[op]['server_us'])} | "
                f"{h[op]['server_cores']:.2f} | {h[op]['client_cores']:.2f} |"
            )
    out += [
        "",
        "## 4. Claim latency against backlog",
        "",
        "Each backlog size has its own database, and the sizes were measured interleaved: "
        "repeat 1 of every size (smallest to largest), then repeat 2, and so on, so the "
        "machine changing speed falls on every size alike. p50 and p99: the median over "
        "repeats of each run's. Ratio: the median of the paired ratios, the largest "
        "backlog's p50 over the smallest's in the same repeat.",
        "",
        "![claim latency](claim-latency.png)",
        "",
    ]
    out += ["| backend | pending jobs | claim p50 ms | claim p99 ms | bulk load s |"]
    out += ["|---|---|---|---|---|"]
    for name in names:
        b = be[name]["backlog"]
        for size in (k for k in b if k.isdigit()):
            out.append(
                f"| {name} | {_f(int(size))} | {b[size]['p50_ms']:.3f} | "
                f"{b[size]['p99_ms']:.3f} | {b[size]['load_s']:.1f} |"
            )
    out.append("")
    for name in names:
        b = be[name]["backlog"]
        each = ", ".join(f"{r:.2f}" for r in b.get("ratios", ()))
        out.append(
            f"- {name}: the largest backlog's p50 is {b['ratio']:.2f}x the smallest's"
            + (f" (per repeat: {each})" if each else "")
        )
    other = {n: be[n]["backlog"]["other_type"] for n in names if "other_type" in be[n]["backlog"]}
    if other:
        out += ["", "Claiming another type behind the largest backlog (a `sync` job each):", ""]
        for name, o in other.items():
            out.append(
                f"- {name}: behind {_f(o['behind'])} pending `email` jobs, claim p50 "
                f"{o['p50_ms']:.3f} ms, p99 {o['p99_ms']:.3f} ms: {o['ratio']:.2f}x the p50 "
                "at the smallest backlog in the same repeat (median of the paired ratios)"
            )
    out += ["", "## 5. Subscription delivery", ""]
    subs = {n: be[n]["subscriptions"] for n in names if "subscriptions" in be[n]}
    if subs:
        out += _subscriptions(subs)
    else:
        out.append("Not measured: `bench/bench_subscriptions.py` is not there yet.")
    out += ["", "## 6. Peers, side by side", "", *_peers(results["peers"])]
    out += ["## Memory", ""]
    for name in names:
        m = be[name].get("memory")
        if m:
            subscribed = (
                f" with {m['subscribers']} subscriptions to the jobs it completed, receiving "
                f"{_f(m['deliveries'])} of {_f(m['subscribers'] * m['completed'])} changes"
                if "subscribers" in m
                else ""
            )
            out.append(
                f"- {name}: {m['seconds']:.0f} s of mixed load at {_f(m['rate'])} req/s"
                f"{subscribed}: RSS "
                f"{m['start_mib']:.1f} MiB after warm-up, {m['end_mib']:.1f} MiB at the end, "
                f"peak {m['max_mib']:.1f} MiB: drift {m['drift_pct']:+.1f} %."
            )
    out += ["", "## Notes", "", *[f"- {n}" for n in notes], ""]
    return "\n".join(out)


def _subscriptions(subs: dict[str, Any]) -> list[str]:
    first = next(iter(next(iter(subs.values())).values()))
    out = [
        "Every subscriber must receive every change (jobs enqueued at "
        f"{first['rate_per_s']:g}/s); each selection has its own new connections, measured "
        "one after the other on one server. Selections: *events* = `jobStatusChanged(type: "
        "…) { cursor occurredAt }`; *with the job* = `jobStatusChanged(type: …) { cursor "
        "occurredAt status job { id status } }`, as a frontend showing job status asks (one "
        "read of the job per change, shared by its subscribers); latency = the subscriber's "
        "receive time minus the event's `occurredAt` (same machine, same clock); server CPU: "
        "all its threads, from the first timed enqueue to the last delivery, per delivery.",
        "",
        "| backend | selection | subscribers | events | delivered/expected | p50 ms | p99 ms "
        "| max ms | server CPU µs/delivery |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, by_selection in subs.items():
        for selection, s in by_selection.items():
            out.append(
                f"| {name} | {SELECTION_LABELS.get(selection, selection)} | "
                f"{_f(s['subscribers'])} | {_f(s['events'])} | "
                f"{_f(s['delivered'])}/{_f(s['expected'])} | {s['p50_ms']:.1f} | "
                f"{s['p99_ms']:.1f} | {s['max_ms']:.1f} | {_f(s['server_us_per_delivery'])} |"
            )
    return out


def _x(ratio: float) -> str:
    return f"{ratio:.2f}x"


def _ahead(take: float, full: float) -> str:
    def yes(ratio: float) -> str:
        return "yes" if ratio > 1 else "**no**"

    return f"{yes(take)} / {yes(full)}"


def _peer_targets(peers: dict[str, Any], names: list[str]) -> list[str]:
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
            f"{_x(take)}; {_x(full)} with complete ({_verdict(take > 1)})"
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
    complete = _f(r["complete"]) if "complete" in r else "n/a"
    full = _f(r["full_per_job"]) if "full_per_job" in r else "n/a"
    return (
        f"| {side} | {mode} | {_f(r['enqueue'])} | {_f(r[dequeue])} | {complete} | "
        f"{_f(r.get('take_per_job', r.get('per_job', 0.0)))} | {full} |"
    )


def _peers(peers: dict[str, Any]) -> list[str]:
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
            f"| huey | {_f(e['huey_enqueue'])} | {_f(e['huey_dequeue'])} | n/a | "
            f"{_f(e['huey_per_job'])} |",
            f"| queuelog | {_f(e['queuelog_enqueue'])} | {_f(e['queuelog_claim'])} | "
            f"{_f(e['queuelog_complete'])} | {_f(e['queuelog_take_per_job'])} "
            f"(with complete: {_f(e['queuelog_full_per_job'])}) |",
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
            f"| PgQueuer | {_f(s['pgqueuer_enqueue'])} | {_f(s['pgqueuer_cycle'])} |",
            f"| queuelog | {_f(s['queuelog_enqueue'])} | {_f(s['queuelog_cycle'])} |",
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


def _targets() -> list[tuple[str, Any]]:
    def svc(op: str) -> Any:
        return lambda b: (f"{b['service'][op]['ratio']:.2f}x", b["service"][op]["ratio"] >= 0.5)

    return [
        ("service enqueue ≥ 0.5x raw", svc("enqueue")),
        ("service claim+complete ≥ 0.5x raw", svc("cycle")),
        ("HTTP enqueueJob ≥ 0.4x `__typename`",
         lambda b: (f"{b['http']['enqueue']['ratio']:.2f}x", b["http"]["enqueue"]["ratio"] >= 0.4)),
        ("HTTP enqueueJob ≥ 1,500/s",
         lambda b: (_f(b["http"]["enqueue"]["rate"]), b["http"]["enqueue"]["rate"] >= 1500)),
        ("HTTP enqueueJob p99 ≤ 50 ms",
         lambda b: (f"{b['http']['enqueue']['p99_ms']:.0f} ms",
                    b["http"]["enqueue"]["p99_ms"] <= 50)),
        ("enqueueJobs ≥ 20,000 jobs/s",
         lambda b: (_f(b["http"]["batch"]["rate"]), b["http"]["batch"]["rate"] >= 20_000)),
        ("claim at largest backlog ≤ 1.5x at 1k, same repeat",
         lambda b: (f"{b['backlog']['ratio']:.2f}x", b["backlog"]["ratio"] <= 1.5)),
        ("RSS flat ± 10 %",
         lambda b: (f"{b['memory']['drift_pct']:+.1f} %", abs(b["memory"]["drift_pct"]) <= 10)),
    ]  # fmt: skip


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for name, b in results["backends"].items():
        sizes = sorted(int(k) for k in b["backlog"] if k.isdigit())
        for q, style in (("p50_ms", "-o"), ("p99_ms", ":x")):
            ax.plot(sizes, [b["backlog"][str(s)][q] for s in sizes], style,
                    label=f"{name} {q.split('_')[0]}")  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlabel("pending jobs")
    ax.set_ylabel("claim latency through the service (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title("queuelog: claim latency against backlog")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
