"""Section 10 of docs/benchmarks.md and its rows of the Targets table: the dashboard's
queries against a million jobs (bench/bench_dashboard.py)."""

from __future__ import annotations

from typing import Any

from bench.bench_dashboard import INDEXED
from bench.report_peers import num

TARGET_MS = 50.0  # an indexed filter's page; job counts
THROUGHPUT_TARGET_MS = 200.0


def _indexed(name: str) -> bool:
    """Whether a filter's conditions are all indexed ones (payloadContains may scan)."""
    parts = [p.split(" (")[0] for p in name.split(" + ")]
    return all(p in INDEXED for p in parts)


def _worst_page(d: dict[str, Any]) -> tuple[float, str]:
    return max(
        (r[page]["p50_ms"], f"{who} {name}, {page}")
        for who in ("admin", "producer")
        for name, r in d[who].items()
        if _indexed(name)
        for page in ("first", "later")
    )


def _worst(d: dict[str, Any], stem: str) -> tuple[float, str]:
    return max((r["p50_ms"], name) for name, r in d["stats"].items() if name.startswith(stem))


def dashboard_targets() -> list[tuple[str, Any]]:
    def page(b: dict[str, Any]) -> tuple[str, bool]:
        ms, where = _worst_page(b["dashboard"])
        return f"{ms:.0f} ms ({where})", ms <= TARGET_MS

    def throughput(b: dict[str, Any]) -> tuple[str, bool]:
        ms, _ = _worst(b["dashboard"], "throughput")
        return f"{ms:.0f} ms", ms <= THROUGHPUT_TARGET_MS

    def counts(b: dict[str, Any]) -> tuple[str, bool]:
        # jobTypes where the server has it, else queueStats: both read the job counts.
        stats = b["dashboard"]["stats"]
        stem = "jobTypes" if any(q.startswith("jobTypes") for q in stats) else "queueStats"
        ms, _ = _worst(b["dashboard"], stem)
        return f"{ms:.0f} ms ({stem})", ms <= TARGET_MS

    return [
        ("dashboard: each indexed filter's page at 1M jobs ≤ 50 ms (worst p50)", page),
        ("dashboard: throughput, a day of 1-minute buckets at 1M events ≤ 200 ms", throughput),
        ("dashboard: job type counts at 1M jobs ≤ 50 ms", counts),
    ]


def dashboard_section(dash: dict[str, Any]) -> list[str]:
    first = next(iter(dash.values()))
    out = [
        f"{num(first['jobs'])} jobs and {num(first['events'])} events over a day, bulk-loaded "
        "and ANALYZEd (bench/bench_dashboard.py); each query through a live server over "
        f"HTTP, once untimed, then {first['repeats']} times: p50 (max) in ms. *first*: the "
        "first page of 50, without `totalCount`; *later*: four pages on, by `endCursor`; "
        "*count*: `totalCount` alone, read from the job counts when the filter names only "
        "statuses, types and a producer, else a count of every matching row. Marked *scan*: "
        "payloadContains, which may read every job the other conditions leave (on SQLite "
        "always; on PostgreSQL its GIN index serves it).",
        "",
        "| backend | as | filter | matches | first | later | count |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, d in dash.items():
        for who in ("admin", "producer"):
            for flt, r in d[who].items():
                scan = "" if _indexed(flt) or flt == "none" else " *scan*"
                cells = [f"{r[k]['p50_ms']:.1f} ({r[k]['max_ms']:.0f})" for k in ("first", "later")]
                count = f"{r['count']['p50_ms']:.1f} ({r['count']['max_ms']:.0f})"
                out.append(
                    f"| {name} | {who} | {flt}{scan} | {num(r['count']['answer'])} | "
                    f"{' | '.join(cells)} | {count} |"
                )
    out += ["", "| backend | query | p50 ms | max ms |", "|---|---|---|---|"]
    for name, d in dash.items():
        out += [
            f"| {name} | {q} | {r['p50_ms']:.1f} | {r['max_ms']:.1f} |"
            for q, r in d["stats"].items()
        ]
    out += [""]
    out += [f"- {name}: bulk load {d['load_s']:.0f} s" for name, d in dash.items()]
    return out
