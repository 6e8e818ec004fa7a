"""The benchmark suite still runs end to end (a second per benchmark; no speed asserted),
each backend in a test of its own: under pytest-xdist the two run side by side."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PEER = {"sqlite": "embedded", "postgresql": "server"}


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_bench_smoke_runs_every_benchmark(backend: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--backend", backend, "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,  # generous: a loaded machine runs it several times slower
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "benchmarks.json").read_text())
    assert set(results["backends"]) == {backend}
    got = results["backends"][backend]
    assert got["service"]["enqueue"]["service"] > 0
    assert got["http"]["enqueue"]["rate"] > 0
    assert got["http"]["cycle"]["empty_claims"] == 0
    assert got["http"]["enqueue"]["server_us"] > 0
    assert got["http"]["typename"]["client_cores"] > 0
    assert got["memory"]["start_mib"] > 0
    assert set(got["backlog"]) >= {"100", "1000", "ratio", "other_type"}
    assert got["backlog"]["other_type"]["p50_ms"] > 0
    assert got["subscriptions"] and got["attacks"]["queries"] and got["attacks"]["sockets"]
    workers = got["workers"]
    assert set(workers["throughput"]) == {"1", "4", "16"}
    assert min(workers["throughput"].values()) > 0
    assert workers["latency"]["samples"] > 0
    assert workers["idle"]["waiting_at_end"] == workers["idle"]["claims"]
    dash = got["dashboard"]
    assert dash["admin"]["none"]["first"]["answer"] == 50
    assert dash["admin"]["none"]["count"]["answer"] == dash["jobs"]
    assert dash["stats"]["throughput, all types (admin)"]["answer"] == 1440
    limits = got["limits"]
    assert set(limits) >= {"100", "1000", "ratio", "cost"}
    assert limits["1000"]["with"]["p50_ms"] > 0 and limits["1000"]["without"]["p50_ms"] > 0
    if backend == "sqlite":
        assert set(workers["ratio"]) == {"1", "4", "16"}
        assert results["peers"]["embedded"]["huey_per_job"] > 0
    else:
        assert results["peers"]["server"]["pgqueuer_cycle"] > 0
    best = results["peers"][PEER[backend]]["best"]
    assert best["ratios"]["batches of 100"]["take_per_job"] > 0
    assert best["ratios"]["32 concurrent callers"]["full_per_job"] > 0
    report = (tmp_path / "benchmarks.md").read_text()
    assert "## Targets" in report and "huey" in report
    assert "Claiming another type behind the largest backlog" in report
    assert "load generator cores" in report
    assert "## 8. Workers end to end" in report
    assert "## 9. Claim latency with job-type limits" in report
    assert (tmp_path / "claim-latency.png").read_bytes()[:4] == b"\x89PNG"


def test_a_section_run_alone_replaces_its_own_in_the_report() -> None:
    from bench.__main__ import merge_section
    from bench.report import _reruns

    full = {"backends": {"sqlite": {"workers": {"old": 1}, "http": {"kept": 1}}}}
    alone = {"started": "2026-12-01 22:00 UTC", "backends": {"sqlite": {"workers": {"new": 2}}}}
    merge_section(full, alone)
    merge_section(full, alone)  # the same section again: noted once
    assert full["backends"]["sqlite"] == {"workers": {"new": 2}, "http": {"kept": 1}}
    assert _reruns(full)[-1] == (
        "Run again alone since, on the code of their time: workers on sqlite "
        "(2026-12-01 22:00 UTC)."
    )
