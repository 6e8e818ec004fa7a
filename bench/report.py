"""docs/benchmarks.md and the claim-latency plot, from the results of one run (the
measurements behind the design, written by hand, are in docs/performance.md). Section 6 and
the Targets rows against the peers are report_peers.py's; section 8's table is
report_workers.py's; section 9's is bench_limits.py's."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import bench_limits
from bench.report_dashboard import dashboard_section, dashboard_targets
from bench.report_peers import num, peer_targets, peers_section, verdict
from bench.report_workers import workers_section

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


def _reruns(results: dict[str, Any]) -> list[str]:
    """The line naming the sections run again alone after the full run, if any."""
    rerun = results.get("rerun")
    if not rerun:
        return []
    runs = ", ".join(f"{name} on {backend} ({started})" for name, backend, started in rerun)
    return ["", f"Run again alone since, on the code of their time: {runs}."]


def markdown(results: dict[str, Any], command: str, notes: list[str]) -> str:
    be = results["backends"]
    names = list(be)
    out = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`python -m bench`) from its results in `benchmarks.json`; do "
        "not edit by hand ([performance.md](performance.md) keeps the measurements behind the "
        "design and their history). Every figure is the "
        "median of repeated runs; every speed is also a ratio to a reference measured in the "
        "same run, since the machine is shared and noisy: trust the ratios over the absolute "
        "figures.",
        "",
        f"Command: `{command}`  ",
        f"Run: {results['started']}, {results['elapsed_s'] / 60:.1f} minutes, "
        f"{results['repeats']} repeats.",
        *_reruns(results),
        "",
        "## Machine",
        "",
        *results.get("machine", ()),
        "",
        "## Targets",
        "",
        "| target | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for label, check in [*_targets(), *dashboard_targets()]:
        row = []
        for name in names:
            try:
                value, ok = check(be[name])
                row.append(f"{value} ({verdict(ok)})")
            except KeyError:
                row.append("n/a")
        out.append(f"| {label} | " + " | ".join(row) + " |")
    out += peer_targets(results["peers"], names)
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
                f"| {name} | {label} | {num(r['service'])} | {num(r['raw'])} | {r['ratio']:.2f} |"
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
                f"| {name} | {label} | {num(h[op]['rate'])} | {h[op]['p50_ms']:.1f} | "
                f"{h[op]['p99_ms']:.1f} | {ratio} | {num(h[op]['server_us'])} | "
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
                f"| {name} | {num(int(size))} | {b[size]['p50_ms']:.3f} | "
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
                f"- {name}: behind {num(o['behind'])} pending `email` jobs, claim p50 "
                f"{o['p50_ms']:.3f} ms, p99 {o['p99_ms']:.3f} ms: {o['ratio']:.2f}x the p50 "
                "at the smallest backlog in the same repeat (median of the paired ratios)"
            )
    out += ["", "## 5. Subscription delivery", ""]
    subs = {n: be[n]["subscriptions"] for n in names if "subscriptions" in be[n]}
    if subs:
        out += _subscriptions(subs)
    else:
        out.append("Not measured in this run.")
    out += ["", "## 6. Peers, side by side", "", *peers_section(results["peers"])]
    attacked = {name: be[name]["attacks"] for name in names if "attacks" in be[name]}
    if attacked:
        out += ["## 7. Under attack", "", *_attacks(attacked), ""]
    workers = {name: be[name]["workers"] for name in names if "workers" in be[name]}
    if workers:
        out += ["## 8. Workers end to end", "", *workers_section(workers), ""]
    limited = {name: be[name]["limits"] for name in names if "limits" in be[name]}
    if limited:
        out += ["## 9. Claim latency with job-type limits", "", *bench_limits.report(limited), ""]
    dash = {name: be[name]["dashboard"] for name in names if "dashboard" in be[name]}
    if dash:
        out += ["## 10. Dashboard queries at a million jobs", "", *dashboard_section(dash), ""]
    out += ["## Memory", ""]
    for name in names:
        m = be[name].get("memory")
        if m:
            subscribed = (
                f" with {m['subscribers']} subscriptions to the jobs it completed, receiving "
                f"{num(m['deliveries'])} of {num(m['subscribers'] * m['completed'])} changes"
                if "subscribers" in m
                else ""
            )
            out.append(
                f"- {name}: {m['seconds']:.0f} s of mixed load at {num(m['rate'])} ops/s"
                " (enqueues + completed claim+complete cycles)"
                f"{subscribed}: RSS "
                f"{m['start_mib']:.1f} MiB after warm-up, {m['end_mib']:.1f} MiB at the end, "
                f"peak {m['max_mib']:.1f} MiB: drift {m['drift_pct']:+.1f} %."
            )
    out += ["", "## Notes on this run", "", *[f"- {n}" for n in notes], ""]
    return "\n".join(out)


_SOCKET_FIELDS = ("rss_before_mib", "rss_during_mib", "rss_after_mib", "bystander", "seconds")


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "none"
    return str(value)


def _attacks(attacked: dict[str, Any]) -> list[str]:
    """What an attack costs a bystander: its latency and the server's memory meanwhile."""
    out = [
        "Each attack runs against a fresh server while a bystander keeps sending requests "
        "(`bench/attack_queries.py`: a producer enqueueing one job at a time; "
        "`bench/attack_sockets.py`: `{ __typename }` every 20 ms); the attacks are refused "
        "by the request cost limits, the anonymous rate limit and the transports' timers, "
        "which is what these rows show holding.",
        "",
        "| backend | attack | bystander p50 ms | p99 ms | server RSS MiB (before → peak) "
        "| attacker's requests |",
        "|---|---|---|---|---|---|",
    ]
    for name, a in attacked.items():
        q = a["queries"]
        out.append(
            f"| {name} | none | {q['quiet']['p50_ms']:.1f} | {q['quiet']['p99_ms']:.1f} | | |"
        )
        for attack in ("introspection", "amplification"):
            r = q[attack]
            out.append(
                f"| {name} | {attack} | {r['bystander']['p50_ms']:.1f} | "
                f"{r['bystander']['p99_ms']:.1f} | {r['server_rss_mb']:.0f} → "
                f"{r['server_peak_rss_mb']:.0f} | {num(r['answered'])} answered, "
                f"{num(r['refused'])} refused, {num(r['failed'])} failed; largest answer "
                f"{r['largest_response_kb']:.0f} KB |"
            )
        c = q.get("subscriber_churn")
        if c:
            out.append(
                f"| {name} | subscriber churn | | | {c['rss_before_mib']:.0f} → "
                f"{c['rss_peak_mib']:.0f} (after: {c['rss_after_mib']:.0f}) | {c['rounds']} "
                f"rounds of {c['subscribers']} subscribers receiving {c['events_per_round']} "
                "changes with 60 KB payloads each, then leaving |"
            )
        sockets = a["sockets"]
        for attack, r in sockets.items():
            if not isinstance(r, dict):
                continue
            b = r["bystander"]
            what = "; ".join(
                f"{k.replace('_', ' ')} {_inline(v)}"
                for k, v in r.items()
                if k not in _SOCKET_FIELDS
            )
            out.append(
                f"| {name} | {attack} | {b['p50_ms']:.1f} | {b['p99_ms']:.1f} | "
                f"{r['rss_before_mib']:.0f} → {r['rss_during_mib']:.0f} "
                f"(after: {r['rss_after_mib']:.0f}) | {what} |"
            )
        out.append(
            f"| {name} | server log over the socket attacks | | | | "
            f"{num(sockets['server_log_lines'])} lines, "
            f"{num(sockets['server_log_tracebacks'])} tracebacks |"
        )
    return out


def _subscriptions(subs: dict[str, Any]) -> list[str]:
    first = next(iter(next(iter(subs.values())).values()))
    out = [
        "Every subscriber must receive every change (jobs enqueued at "
        f"{first['rate_per_s']:g}/s); each measurement has its own new connections, on one "
        "server, both selections in every repeat, which goes first alternating; counts are "
        "summed over the repeats, times are medians. Selections: *events* = "
        "`jobStatusChanged(type: "
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
                f"{num(s['subscribers'])} | {num(s['events'])} | "
                f"{num(s['delivered'])}/{num(s['expected'])} | {s['p50_ms']:.1f} | "
                f"{s['p99_ms']:.1f} | {s['max_ms']:.1f} | {num(s['server_us_per_delivery'])} |"
            )
    return out


def _targets() -> list[tuple[str, Any]]:
    def svc(op: str) -> Any:
        return lambda b: (f"{b['service'][op]['ratio']:.2f}x", b["service"][op]["ratio"] >= 0.5)

    return [
        ("service enqueue ≥ 0.5x raw", svc("enqueue")),
        ("service claim+complete ≥ 0.5x raw", svc("cycle")),
        ("HTTP enqueueJob ≥ 0.4x `__typename`",
         lambda b: (f"{b['http']['enqueue']['ratio']:.2f}x", b["http"]["enqueue"]["ratio"] >= 0.4)),
        ("HTTP enqueueJob ≥ 1,500/s",
         lambda b: (num(b["http"]["enqueue"]["rate"]), b["http"]["enqueue"]["rate"] >= 1500)),
        ("HTTP enqueueJob p99 ≤ 50 ms",
         lambda b: (f"{b['http']['enqueue']['p99_ms']:.0f} ms",
                    b["http"]["enqueue"]["p99_ms"] <= 50)),
        ("enqueueJobs ≥ 20,000 jobs/s",
         lambda b: (num(b["http"]["batch"]["rate"]), b["http"]["batch"]["rate"] >= 20_000)),
        ("claim at largest backlog ≤ 1.5x at 1k, same repeat",
         lambda b: (f"{b['backlog']['ratio']:.2f}x", b["backlog"]["ratio"] <= 1.5)),
        ("with limits: claim at largest backlog ≤ 1.5x at 1k, same repeat",
         lambda b: (f"{b['limits']['ratio']:.2f}x", b["limits"]["ratio"] <= 1.5)),
        ("RSS flat ± 10 %",
         lambda b: (f"{b['memory']['drift_pct']:+.1f} %", abs(b["memory"]["drift_pct"]) <= 10)),
        ("workers, 4 per side: ≥ 1.0x huey's consumer (SQLite)",
         lambda b: (f"{b['workers']['ratio']['4']:.2f}x", b["workers"]["ratio"]["4"] >= 1.0)),
        ("workers, 16 per side: ≥ 1.0x huey's consumer (SQLite)",
         lambda b: (f"{b['workers']['ratio']['16']:.2f}x", b["workers"]["ratio"]["16"] >= 1.0)),
        ("enqueue to worker start p50 ≤ 10 ms",
         lambda b: (f"{b['workers']['latency']['p50_ms']:.1f} ms",
                    b["workers"]["latency"]["p50_ms"] <= 10)),
        ("200 waiting claims ≤ 5 % of a core",
         lambda b: (f"{b['workers']['idle']['cpu_pct']:.1f} %",
                    b["workers"]["idle"]["cpu_pct"] <= 5)),
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
