"""`python -m bench`: the whole suite on SQLite and PostgreSQL, written to docs/
(benchmarks.json, benchmarks.md, claim-latency.png).

`--smoke` runs every benchmark for a second or so and asserts no speed (the tests run it so
the suite cannot rot). `--soak-seconds` sets the memory soak. `--section NAME` runs that
section alone and writes OUT/bench-NAME.json (no report). `--report-only` runs nothing:
it writes benchmarks.md and the plot again from the benchmarks.json already there.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from bench import (
    attack_queries,
    attack_sockets,
    bench_backlog,
    bench_dashboard,
    bench_http,
    bench_limits,
    bench_peers,
    bench_service,
    bench_subscriptions,
    bench_workers,
    report,
)
from bench.common import BACKENDS, Profile, Server, database_url, median, rss_bytes

NOTES = [
    "The load generator shares the 2 CPUs with the server, and other work ran on the machine "
    "meanwhile: absolute rates move from run to run by a factor of two; ratios much less.",
    "SQLite writes go through one writer thread that commits every write queued meanwhile "
    "in one transaction (group commit): concurrent HTTP writers share one fsync, while the "
    "one-at-a-time service figures pay a thread hop per transaction. The in-process "
    "benchmarks (service, backlog, peers) run on uvloop, the event loop the server runs on.",
    "Every operation the HTTP benchmarks send, `{ __typename }` included, runs as a prepared "
    "operation (compiled once per document; docs/design.md): the ratios compare prepared "
    "against prepared.",
    "Backlog: each size in its own database, the sizes measured interleaved repeat by "
    "repeat; bulk-loaded with raw SQL (executemany / COPY) and topped up before each run, "
    "never ANALYZEd, and claimed with statements prepared on the empty queue, as a burst that "
    "arrives before autovacuum is; each timed claim goes through `JobService.claim` (thread "
    "hop included) and is then completed, untimed.",
]


def _log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


async def _subscriptions(url: str, workdir: Path, profile: Profile) -> dict[str, Any]:
    subscribers = 20 if profile.smoke else 1_000
    return await bench_subscriptions.run(
        url, workdir, subscribers=subscribers, smoke=profile.smoke, repeats=profile.repeats
    )


async def _memory(server: Server, seconds: float) -> dict[str, float]:
    samples: list[tuple[float, int]] = []
    t0 = time.perf_counter()

    def sample() -> None:
        samples.append((time.perf_counter() - t0, rss_bytes(server.pid)))

    load = await bench_http.soak(server, seconds, sample)
    sample()
    warm = [rss for t, rss in samples if t >= seconds * 0.2] or [samples[-1][1]]
    head = warm[: max(1, len(warm) // 10)]
    tail = warm[-max(1, len(warm) // 10) :]
    start, end = median(head), median(tail)
    mib = 1024 * 1024
    return {
        "seconds": seconds,
        "rate": load["rate"],
        "start_mib": start / mib,
        "end_mib": end / mib,
        "max_mib": max(warm) / mib,
        "drift_pct": (end - start) / start * 100,
        "subscribers": load["subscribers"],
        "completed": load["completed"],
        "deliveries": load["deliveries"],
    }


async def run_backend(backend: str, workdir: Path, profile: Profile) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with database_url(backend, workdir) as url:
        _log(f"{backend}: 1. service layer against the raw driver")
        out["service"] = await bench_service.run(url, backend, profile)
    with database_url(backend, workdir) as url, Server(url, workdir) as server:
        _log(f"{backend}: 2-3. over HTTP")
        out["http"] = await bench_http.run(server, profile)
        _log(f"{backend}: memory soak, {profile.soak_seconds:.0f} s")
        out["memory"] = await _memory(server, profile.soak_seconds)
    _log(f"{backend}: 4. claim latency at backlogs {profile.backlogs}, interleaved")
    out["backlog"] = await bench_backlog.run(backend, workdir, profile)
    with database_url(backend, workdir) as url:
        _log(f"{backend}: 5. subscription delivery")
        out["subscriptions"] = await _subscriptions(url, workdir, profile)
    _log(f"{backend}: 7. under attack")
    out["attacks"] = await _attacks(backend, workdir, profile)
    out["workers"] = await _workers(backend, workdir, profile)
    out["limits"] = await _limits(backend, workdir, profile)
    out["dashboard"] = await _dashboard(backend, workdir, profile)
    return out


async def _workers(backend: str, workdir: Path, profile: Profile) -> dict[str, Any]:
    _log(f"{backend}: 8. workers end to end")
    return await bench_workers.run(backend, workdir, profile.smoke)


async def _limits(backend: str, workdir: Path, profile: Profile) -> dict[str, Any]:
    _log(f"{backend}: 9. claim latency with job-type limits")
    return await bench_limits.run(backend, workdir, profile)


async def _dashboard(backend: str, workdir: Path, profile: Profile) -> dict[str, Any]:
    size, repeats = (2_000, 1) if profile.smoke else (1_000_000, 5)
    _log(f"{backend}: 10. dashboard queries at {size:,} jobs")
    return await bench_dashboard.run(backend, workdir, size, repeats)


# What `--section` runs alone, by name: each backend's part only, no peers, no report.
SECTIONS = {"workers": _workers, "limits": _limits, "dashboard": _dashboard}


async def _attacks(backend: str, workdir: Path, profile: Profile) -> dict[str, Any]:
    """The costly-query and socket attacks, each against a fresh server with a bystander."""
    seconds, scale, duration = (0.5, 0.01, 0.1) if profile.smoke else (8.0, 1.0, 1.0)
    queries = await attack_queries.run(backend, seconds)
    with database_url(backend, workdir) as url:
        sockets = await attack_sockets.run(url, workdir, scale, duration)
    return {"queries": queries, "sockets": sockets}


async def run_all(
    backends: list[str], workdir: Path, profile: Profile, section: str | None = None
) -> dict[str, Any]:
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M %Z"),
        "repeats": profile.repeats,
        "backends": {},
        "peers": {},
    }
    t0 = time.perf_counter()
    for backend in backends:
        run = (backend, workdir, profile)
        if section is not None:
            results["backends"][backend] = {section: await SECTIONS[section](*run)}
        else:
            results["backends"][backend] = await run_backend(backend, workdir, profile)
    if section is not None:
        results["elapsed_s"] = time.perf_counter() - t0
        return results
    _log("6. peers: huey (SQLite), PgQueuer (PostgreSQL)")
    if "sqlite" in backends:
        with database_url("sqlite", workdir) as url:
            results["peers"]["embedded"] = await bench_peers.embedded(url, workdir, profile)
    if "postgresql" in backends:
        pg = ("postgresql", workdir)
        with database_url(*pg) as ours, database_url(*pg) as peer:
            results["peers"]["server"] = await bench_peers.server(ours, peer, profile)
    results["elapsed_s"] = time.perf_counter() - t0
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--smoke", action="store_true", help="a second per benchmark; no report")
    p.add_argument("--soak-seconds", type=float, default=60.0)
    p.add_argument("--backend", action="append", choices=BACKENDS, help="default: both")
    p.add_argument("--out", type=Path, default=Path("docs"), help="where the report goes")
    p.add_argument(
        "--report-only", action="store_true", help="rewrite the report from OUT/benchmarks.json"
    )
    p.add_argument(
        "--section", choices=sorted(SECTIONS), help="run only this; write OUT/bench-SECTION.json"
    )
    p.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        default=[],
        help="with --report-only: sections run alone (bench-SECTION.json) replace theirs",
    )
    args = p.parse_args(argv)
    if args.report_only:
        results = json.loads((args.out / "benchmarks.json").read_text())
        if args.merge:
            for path in args.merge:
                merge_section(results, json.loads(path.read_text()))
            (args.out / "benchmarks.json").write_text(json.dumps(results, indent=1, default=str))
        write_report(results, args.out)
        return 0
    profile = Profile.quick() if args.smoke else Profile.full(args.soak_seconds)
    backends = args.backend or list(BACKENDS)
    # The in-process benchmarks run on the event loop the server runs on (uvicorn picks
    # uvloop, which `uvicorn[standard]` installs).
    with (
        tempfile.TemporaryDirectory(prefix="queuelog-bench-") as tmp,
        asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
    ):
        results = runner.run(run_all(backends, Path(tmp), profile, args.section))
    if args.section is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"bench-{args.section}.json").write_text(json.dumps(results, indent=1))
        return 0
    command = "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv)
    results["command"] = command.strip()
    results["machine"] = report.machine()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "benchmarks.json").write_text(json.dumps(results, indent=1, default=str))
    write_report(results, args.out)
    _log(f"wrote {args.out / 'benchmarks.md'} in {results['elapsed_s'] / 60:.1f} min")
    return 0


def merge_section(results: dict[str, Any], section: dict[str, Any]) -> None:
    """Put the results of a section run alone (`--section`) in place of that section's in
    a full run's, and note when it ran: the report says which sections are from later."""
    for backend, sections in section["backends"].items():
        for name, value in sections.items():
            results["backends"].setdefault(backend, {})[name] = value
            rerun = [r for r in results.get("rerun", ()) if r[:2] != [name, backend]]
            results["rerun"] = [*rerun, [name, backend, section["started"]]]


def write_report(results: dict[str, Any], out: Path) -> None:
    """benchmarks.md and the claim-latency plot, from one run's results."""
    command = results.get("command", "python -m bench")
    (out / "benchmarks.md").write_text(report.markdown(results, command, NOTES))
    report.plot(results, out / "claim-latency.png")


if __name__ == "__main__":
    sys.exit(main())
