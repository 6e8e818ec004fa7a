"""The cache of prepared operations: bounded, and holding no document over the limits or
invalid."""

from __future__ import annotations

from queuelog.api.extension import parse_document, validate_document
from queuelog.api.fastpath.prepared import PreparedOperations
from queuelog.api.schema import build_schema
from queuelog.config import Settings
from queuelog.fences.graphql_core import graphql_schema as graphql_schema_of


def _operations(size: int) -> PreparedOperations:
    schema = build_schema(Settings(job_types=("email", "pdf", "sync")))
    limits, graphql_schema = schema.limits, graphql_schema_of(schema)
    return PreparedOperations(
        graphql_schema,
        parse=lambda query: parse_document(query, limits.max_tokens),
        validate=lambda document: validate_document(graphql_schema, document, limits),
        size=size,
    )


def test_the_cache_is_bounded() -> None:
    operations = _operations(size=2)
    first = operations.get("{ viewer { name } }", None)
    assert first is not None
    assert operations.get("{ viewer { name } }", None) is first  # compiled once
    assert operations.get("{ viewer { role } }", None) is not None
    assert operations.get("query Q { viewer { name } }", "Q") is not None
    assert len(operations.cache) == 2
    assert ("{ viewer { name } }", None) not in operations.cache  # the oldest went first
    again = operations.get("{ viewer { name } }", None)
    assert again is not None and again is not first
    assert len(operations.cache) == 2
    assert operations.get("{ __schema { queryType { name } } }", None) is None
    assert ("{ __schema { queryType { name } } }", None) in operations.cache  # remembered
    assert len(operations.cache) == 2
    for i in range(50):
        operations.get(f"{{ a{i}: viewer {{ name }} }}", None)
        assert len(operations.cache) <= 2


def test_documents_over_the_limits_or_invalid_are_not_prepared() -> None:
    operations = _operations(size=16)
    max_tokens = Settings().max_tokens

    def claim(types: int) -> str:  # 16 tokens and one per type
        return "mutation { claimJob(types: [" + '"email" ' * types + "]) { job { id } } }"

    assert operations.get(claim(max_tokens - 16), None) is not None
    assert operations.get(claim(max_tokens - 15), None) is None
    assert operations.get("{ viewer { nme } }", None) is None  # does not validate
    assert operations.get("{ viewer }", None) is None  # does not validate either
    assert operations.get("query($x: Int) { viewer { name } }", None) is None  # unused $x
    assert operations.get("{ viewer { name }", None) is None  # does not parse
    assert operations.get("{" * 10_000 + "}" * 10_000, None) is None  # nested too deeply
    assert operations.get("{ viewer { name } }", "Other") is None  # no such operation
    two = "query A { viewer { name } } query B { viewer { role } }"
    assert operations.get(two, None) is None  # which one?
    assert operations.get(two, "B") is not None
    aliases = "{ " + " ".join(f"a{i}: __typename" for i in range(20)) + " }"
    assert operations.get(aliases, None) is None  # over QUEUELOG_MAX_ALIASES
