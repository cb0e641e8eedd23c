"""The table of payloads archived in earlier collections (``--dedup-index``, storage/dedup_index.py).
The crawl that uses it is tested in tests/test_requisites_replay.py (one websim, two crawls)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raycrawl.errors import UserError
from raycrawl.storage.dedup_index import DedupIndex, build

ROOT = Path(__file__).resolve().parents[1]


def test_index_table_keeps_earliest_capture_and_skips_non_captures(tmp_path) -> None:
    cdxj = tmp_path / "a.cdxj"
    cdxj.write_text(
        'test,a)/ 20200101000000 {"url": "http://a.test/", "digest": "sha1:AAAA", "status": "200", "mime": "text/html"}\n'
        'test,a)/ 20190101000000 {"url": "http://a.test/old", "digest": "AAAA", "status": "200", "mime": "text/html"}\n'
        'test,b)/ 20210101000000 {"url": "http://b.test/", "digest": "sha1:BBBB", "mime": "warc/revisit"}\n'
        'test,c)/ 20210101000000 {"url": "http://c.test/", "digest": "sha1:CCCC", "status": "304"}\n'
        'test,d)/ 20210101000000 {"url": "http://d.test/", "status": "200"}\n')
    index = DedupIndex(build([str(cdxj)], tmp_path))
    assert index.earliest(["sha1:AAAA", "sha1:BBBB", "sha1:CCCC", "sha1:ZZZZ"]) == {
        "sha1:AAAA": ("http://a.test/old", "2019-01-01T00:00:00Z")}
    index.close()
    (tmp_path / "bad.cdxj").write_text("x 1 {not json\n")
    with pytest.raises(UserError, match="not a CDXJ line"):
        build([str(tmp_path / "bad.cdxj")], tmp_path / "o")
