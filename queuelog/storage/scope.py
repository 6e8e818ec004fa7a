"""Which rows of `jobs` or `job_events` a read may return: those of one producer, those of
one worker, or all. Who gets which scope is `service.visibility`'s rule; this only turns a
scope into WHERE clauses (both tables name the columns alike)."""

from __future__ import annotations

from typing import NamedTuple

import sqlalchemy as sa


class Scope(NamedTuple):
    producer: str | None = None  # only this producer's rows
    worker: str | None = None  # only the rows this worker holds or last held

    def where(self, table: sa.Table) -> list[sa.ColumnElement[bool]]:
        cond: list[sa.ColumnElement[bool]] = []
        if self.producer is not None:
            cond.append(table.c.producer == self.producer)
        if self.worker is not None:
            cond.append(table.c.worker_id == self.worker)
        return cond


EVERYTHING = Scope()
