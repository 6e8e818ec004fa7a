"""Which role may do what: the one table the permission classes, the metrics endpoint and the
service's actors all read."""

from __future__ import annotations

import enum


class Role(enum.Enum):
    PRODUCER = "producer"
    WORKER = "worker"
    ADMIN = "admin"
    VIEWER = "viewer"  # reads what an admin reads, changes nothing


class Capability(enum.Enum):
    """What a root field, or an endpoint, needs of its caller's key."""

    ANY = "any live key"  # reads scoped to what the key may see; its own key's details
    ENQUEUE = "enqueue jobs and act on its own"
    WORK = "claim jobs and report on those it holds"
    MANAGE = "change keys, job types and schedules"
    READ_ALL = "read every job, key, schedule and metric"


MAY: dict[Capability, tuple[Role, ...]] = {
    Capability.ANY: tuple(Role),
    Capability.ENQUEUE: (Role.PRODUCER, Role.ADMIN),
    Capability.WORK: (Role.WORKER, Role.ADMIN),
    Capability.MANAGE: (Role.ADMIN,),
    Capability.READ_ALL: (Role.ADMIN, Role.VIEWER),
}


def may(role: Role, capability: Capability) -> bool:
    return role in MAY[capability]


def who_may(capability: Capability) -> str:
    """The keys that may, as a refusal names them: "a producer or admin key"."""
    wanted = " or ".join(r.value for r in MAY[capability])
    return f"{'an' if wanted[:1] in 'aeiou' else 'a'} {wanted} key"
