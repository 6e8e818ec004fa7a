"""The GraphiQL page loads only what queuelog ships, byte for byte what the page expects."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest

from queuelog.edge.graphiql import ASSETS_DIR, CDN, PAGE, offline_page


def test_every_file_the_page_loads_is_vendored_with_its_integrity_hash() -> None:
    page = PAGE.read_text()
    cdn = re.escape(CDN)
    loaded = re.findall(rf'(?:src|href)="{cdn}([^"]+)"\s+integrity="sha384-([^"]+)"', page)
    assert len(loaded) == 6
    for path, digest in loaded:
        data = (ASSETS_DIR / path).read_bytes()
        assert base64.b64encode(hashlib.sha384(data).digest()).decode() == digest, path
    assert CDN not in offline_page(page)


@pytest.mark.parametrize(
    "tag",
    [
        '<script src="https://unpkg.com/react@99.0.0/umd/react.production.min.js"></script>',
        '<link rel="stylesheet" href="https://cdn.example.com/x.css" />',
    ],
)
def test_a_page_needing_files_queuelog_does_not_ship_is_refused(tag: str) -> None:
    with pytest.raises(RuntimeError, match=r"vendor-graphiql\.sh"):
        offline_page(f"<html><head>{tag}</head></html>")
