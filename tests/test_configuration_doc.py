"""docs/configuration.md: every setting with its default and the values it accepts, as
config.py defines them, every key of the TOML file, and links that lead somewhere."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from annotated_types import Ge, Gt, Le
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from queuelog.config import ScheduleConfig, Settings, TypeDefaults

ROOT = Path(__file__).resolve().parent.parent
DOC_PATH = ROOT / "docs" / "configuration.md"
DOC = DOC_PATH.read_text()


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _default(default: object) -> str:
    """A default as the reference writes it."""
    if default is None or default == ():
        return "—"
    if isinstance(default, bool):
        return "`true`" if default else "`false`"
    if isinstance(default, tuple):
        return "`" + ",".join(str(v) for v in default) + "`"
    if isinstance(default, float):
        return f"`{_number(default)}`"
    return f"`{default}`"


def _accepts(field: FieldInfo) -> str | None:
    """The values a field accepts as the reference writes them; None where the reference
    says it in words (text, paths, lists)."""
    args = [a for a in typing.get_args(field.annotation) if a is not type(None)]
    annotation = args[0] if typing.get_origin(field.annotation) is typing.Union else None
    annotation = annotation or field.annotation
    if annotation is bool:
        return "`true`, `false`"
    if typing.get_origin(annotation) is typing.Literal:
        return ", ".join(f"`{v}`" for v in typing.get_args(annotation))
    bounds = {type(m): m for m in field.metadata}
    low, high = bounds.get(Ge), bounds.get(Le)
    above = bounds.get(Gt)
    if low is not None and high is not None:
        return f"{_number(low.ge)} to {_number(high.le)}"
    if above is not None and high is not None:
        return f"> {_number(above.gt)}, ≤ {_number(high.le)}"
    if low is not None:
        return f"≥ {_number(low.ge)}"
    if above is not None:
        return f"> {_number(above.gt)}"
    return None


def _rows(first: str) -> dict[str, list[str]]:
    """The table rows of the reference whose first cell matches `first`, by that name."""
    found = re.findall(rf"^\| `({first})` \| (.*) \|$", DOC, re.M)
    return {name: [cell.strip() for cell in rest.split(" | ")] for name, rest in found}


def test_every_setting_is_documented_with_its_default_and_what_it_accepts() -> None:
    rows = _rows(r"QUEUELOG_\w+")
    for name, field in Settings.model_fields.items():
        variable = f"QUEUELOG_{name.upper()}"
        assert variable in rows, f"{variable} is missing from docs/configuration.md"
        default, accepts, meaning = rows[variable]
        assert default == _default(field.default), variable
        expected = _accepts(field)
        assert expected is None or accepts == expected, (variable, accepts, expected)
        assert meaning, variable


def _toml_keys(model: type[BaseModel], table: str) -> None:
    """The first table after the paragraph on `[table.NAME]` lists every key of `model`."""
    after = DOC.split(f"`[{table}.NAME]`:", 1)[1]
    first_table = re.search(r"(?:^\|.*\n)+", after, re.M)
    assert first_table is not None, table
    rows = dict(re.findall(r"^\| `(\w+)` \| (.*) \|$", first_table.group(0), re.M))
    for name, field in model.model_fields.items():
        assert name in rows, f"[{table}.NAME] {name} is missing from docs/configuration.md"
        accepts = rows[name].split(" | ")[1]
        expected = _accepts(field)
        assert expected is None or accepts == expected, (table, name, accepts, expected)


def test_every_key_of_the_toml_file_is_documented() -> None:
    _toml_keys(TypeDefaults, "types")
    _toml_keys(ScheduleConfig, "schedules")


def _anchors(path: Path) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", path.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}


def test_its_links_lead_to_files_and_headings_of_the_repository() -> None:
    for target in re.findall(r"\]\(([^)\s]+)\)", DOC):
        file, _, anchor = target.partition("#")
        path = (DOC_PATH.parent / file).resolve() if file else DOC_PATH
        assert path.is_relative_to(ROOT) and path.exists(), target
        assert not anchor or anchor in _anchors(path), target
