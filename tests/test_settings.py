"""Settings are the one source of defaults (issue 15): every field has a group and help text, the
crawl command's flags are generated from them, and docs/settings.md is the generated table."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from raycrawl.commands import crawl
from raycrawl.policies.filters import build_postfetch, build_prefetch
from raycrawl.policies.politeness import Politeness
from raycrawl.settings import Settings, markdown, setting_fields

DOCS = Path(__file__).resolve().parents[1] / "docs" / "settings.md"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    crawl.add_setting_flags(p)
    return p


def test_every_setting_has_a_group_help_and_a_flag() -> None:
    p = parser()
    dests = {a.dest: a for a in p._actions}
    for f in setting_fields():
        assert f.metadata["group"] and len(f.metadata["help"]) > 10, f.name
        assert f"--{f.name.replace('_', '-')}" in dests[f.name].option_strings


def test_flags_reach_every_kind_of_setting() -> None:
    args = parser().parse_args(["--out", "o", "--host-delay", "1.5", "--max-pages", "7", "--no-near-dup",
                                "--exclude-extensions", "jpg, zip", "--allowed-schemes", "https",
                                "--accept-missing-content-type", "--spam-gate", "g.json"])
    s = Settings().update({f.name: getattr(args, f.name) for f in setting_fields()}, "test")
    assert (s.out, s.host_delay, s.max_pages, s.near_dup) == ("o", 1.5, 7, False)
    assert s.exclude_extensions == ["jpg", "zip"] and s.allowed_schemes == ["https"]
    assert s.accept_missing_content_type is True and s.spam_gate == "g.json"
    # flags not given leave the defaults
    assert s.ip_delay == Settings.ip_delay and s.allowed_content_types == Settings().allowed_content_types


def test_bad_flag_values_are_argparse_errors(capsys) -> None:
    for bad in (["--host-delay", "-1"], ["--max-pages", "x"], ["--host-delay", "nan"]):
        with pytest.raises(SystemExit) as exc:
            parser().parse_args(["--out", "o", *bad])
        assert exc.value.code == 2


def test_filters_and_politeness_take_their_defaults_from_settings() -> None:
    s = Settings()
    assert Politeness() == Politeness.of(s)
    prefetch = build_prefetch(None)
    def deep(n: int) -> str:
        return "http://a.test/" + "/".join(f"s{i}" for i in range(n))

    assert prefetch(deep(s.max_depth)) and not prefetch(deep(s.max_depth + 1))
    assert not prefetch("ftp://a.test/") and not build_prefetch({"allowed_schemes": ["https"]})("http://a.test/")
    changed = dataclasses.replace(s, allowed_schemes=["ftp", "http"])
    assert build_prefetch(changed)("ftp://a.test/x")
    assert build_postfetch(None).explain is not None


def test_docs_table_is_generated_from_settings() -> None:
    assert DOCS.read_text() == markdown(), "docs/settings.md is stale: run `make docs`"
