"""What the scripts monkeypatch in: methods that raise or return, and `of` classmethods
building their objects with some attributes changed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def raises(exc: BaseException) -> Callable[..., Any]:
    async def method(*args: Any, **kwargs: Any) -> Any:
        raise exc

    return method


def sync_raises(exc: BaseException) -> Callable[..., Any]:
    def method(*args: Any, **kwargs: Any) -> Any:
        raise exc

    return method


def returns(value: Any) -> Callable[..., Any]:
    async def method(*args: Any, **kwargs: Any) -> Any:
        return value

    return method


@dataclass(frozen=True)
class Per:
    """A value computed from the object being built."""

    compute: Callable[[Any], Any]


def built_with(cls: Any, **changes: Any) -> Any:
    """`cls.of` (a classmethod) building its object as before, then changing `changes`."""
    original = cls.of

    def of(_: Any, *args: Any) -> Any:
        made = original(*args)
        for name, value in changes.items():
            setattr(made, name, value.compute(made) if isinstance(value, Per) else value)
        return made

    return classmethod(of)
