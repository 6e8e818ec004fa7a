"""docs/benchmarks.md and the claim-latency plot, from the results of one run."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

HTTP_ROWS = (
    ("typename", "`{ __typename }`"),
    ("enqueue", "`enqueueJob`"),
    ("cycle", "`claimJob`+`completeJob`"),
    ("batch", "`enqueueJobs` jobs"),
)
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
        "to the same server answering `{ __typename }` in the same repeat.",
        "",
        "| backend | operation | rate /s | p50 ms | p99 ms | ratio to `__typename` |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        h = be[name]["http"]
        for op, label in HTTP_ROWS:
            ratio = f"{h[op]['ratio']:.2f}" if "ratio" in h[op] else ""
            out.append(
                f"| {name} | {label} | {_f(h[op]['rate'])} | {h[op]['p50_ms']:.1f} | "
                f"{h[op]['p99_ms']:.1f} | {ratio} |"
            )
    out += [
        "",
        "## 4. Claim latency against backlog",
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
    out += ["", "## 5. Subscription delivery", ""]
    subs = {n: be[n]["subscriptions"] for n in names if "subscriptions" in be[n]}
    if subs:
        for name, s in subs.items():
            out.append(f"- {name}: " + ", ".join(f"{k} {v}" for k, v in s.items()))
    else:
        out.append("Not measured: `bench/bench_subscriptions.py` is not there yet.")
    out += ["", "## 6. Peers, side by side", ""]
    if "embedded" in results["peers"]:
        e = results["peers"]["embedded"]
        out += [
            "Embedded: huey's `SqliteStorage` (fsync on) against queuelog's service on SQLite, "
            "one job at a time. A huey dequeue deletes the job; queuelog's claim takes it "
            "under a lease, and its complete records the outcome, which huey does not.",
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
        ]
    if "server" in results["peers"]:
        s = results["peers"]["server"]
        out += [
            "Server: PgQueuer on the same PostgreSQL (dequeue one job, log it successful).",
            "",
            "| | enqueue /s | claim+complete /s |",
            "|---|---|---|",
            f"| PgQueuer | {_f(s['pgqueuer_enqueue'])} | {_f(s['pgqueuer_cycle'])} |",
            f"| queuelog | {_f(s['queuelog_enqueue'])} | {_f(s['queuelog_cycle'])} |",
            f"| ratio | {s['ratio_enqueue']:.2f} | {s['ratio_cycle']:.2f} |",
            "",
        ]
    out += ["## Memory", ""]
    for name in names:
        m = be[name].get("memory")
        if m:
            out.append(
                f"- {name}: {m['seconds']:.0f} s of mixed load at {_f(m['rate'])} req/s: RSS "
                f"{m['start_mib']:.1f} MiB after warm-up, {m['end_mib']:.1f} MiB at the end, "
                f"peak {m['max_mib']:.1f} MiB: drift {m['drift_pct']:+.1f} %."
            )
    out += ["", "## Notes", "", *[f"- {n}" for n in notes], ""]
    return "\n".join(out)


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
        ("claim at largest backlog ≤ 1.5x at 1k",
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
