"""Which outcome fields of one document run together: consecutive commuting fields that
change different jobs, the job read as the resolvers read an id."""

from __future__ import annotations

from queuelog.api.fastpath.prepared import _independent_arguments
from queuelog.api.schema import build_schema
from queuelog.config import Settings

SCHEMA = build_schema(Settings(job_types=("email",)))


def runs(document: str) -> list[tuple[list[str], bool]]:
    """Each run's field keys, and whether they may run together."""
    assert SCHEMA.prepared is not None
    prepared = SCHEMA.prepared.get(document, None)
    assert prepared is not None
    return [
        ([r.key for r in run], _independent_arguments(run, prepared.commuting, {}) is not None)
        for run in prepared.runs
    ]


def field(key: str, name: str, job: str) -> str:
    args = f'id: "{job}"' + (', error: "e"' if name == "failJob" else "")
    return f"{key}: {name}({args}) {{ job {{ id }} }}"


def test_outcomes_of_different_jobs_run_together() -> None:
    doc = " ".join(
        [
            field("a", "completeJob", "1"),
            field("b", "failJob", "2"),
            field("c", "heartbeatJob", "3"),
        ]
    )
    assert runs(f"mutation {{ {doc} }}") == [(["a", "b", "c"], True)]


def test_one_job_named_twice_runs_in_order_however_its_id_is_written() -> None:
    for second in ("1", "01", "001"):
        doc = f"{field('a', 'completeJob', '1')} {field('b', 'failJob', second)}"
        assert runs(f"mutation {{ {doc} }}") == [(["a", "b"], False)]


def test_an_id_that_names_no_job_runs_in_order() -> None:
    doc = f"{field('a', 'completeJob', '1')} {field('b', 'completeJob', 'x')}"
    assert runs(f"mutation {{ {doc} }}") == [(["a", "b"], False)]


def test_other_fields_break_a_run() -> None:
    doc = " ".join(
        [
            field("a", "completeJob", "1"),
            "c: claimJobs(limit: 2) { jobs { id } }",
            field("b", "completeJob", "2"),
            field("d", "completeJob", "3"),
            "__typename",
        ]
    )
    assert runs(f"mutation {{ {doc} }}") == [
        (["a"], False),
        (["c"], False),
        (["b", "d"], True),
        (["__typename"], False),
    ]
