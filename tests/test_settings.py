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
from raycrawl.settings import Settings, default_of, markdown, sample_config, setting_fields

DOCS = Path(__file__).resolve().parents[1] / "docs" / "settings.md"
SAMPLE = DOCS.with_name("sample-config.toml")


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
    assert SAMPLE.read_text() == sample_config(), "docs/sample-config.toml is stale: run `make docs`"


def _other_value(f: dataclasses.Field):
    """A valid value unlike the default, from the field's type alone, with its -s spelling."""
    kind, default = str(f.type), default_of(f)
    special = {"resolve": None, "dns_server": ("127.0.0.1:5353", "127.0.0.1:5353"),
               "allow_networks": ("127.0.0.0/8", "127.0.0.0/8"), "focus": None, "spam_gate": None, "dedup_index": None, "requisite_hops": (1, "1"),
               "robots_ttl": (60.0, "60"), "seeds": ("s.txt", "s.txt"), "redis_url": ("redis://127.0.0.1:1/0",) * 2,
               "address": ("127.0.0.1:6379", "127.0.0.1:6379"), "out_store": ("s3://crawls/run", "s3://crawls/run"),
               "agent_dir": None, "stages": (["sitemaps=off", "scope=150"], "sitemaps=off, scope=150"),
               "proxy": ("socks5://127.0.0.1:1080", "socks5://127.0.0.1:1080"), "proxy_credentials_file": None,
               "session_file": None,
               "proxy_rules": (["direct x", "http://127.0.0.1:3128 y"], "direct x, http://127.0.0.1:3128 y")}
    if f.name in special:
        return special[f.name]
    if kind.startswith("bool"):
        return (not default, "off" if default else "on")
    if kind.startswith("int"):
        return (default + 3, str(default + 3))
    if kind.startswith("float"):
        return (default + 0.25, str(default + 0.25))
    if kind.startswith("list"):
        return (["x", "y"], "x, y")
    return ("zz", "zz")


def test_dash_s_reaches_every_setting_and_settings_says_where_values_came_from(tmp_path, capsys) -> None:
    """`-s KEY=VALUE` sets every setting (each typed from its field; checked through `raycrawl
    settings --json`, which resolves as `crawl` does); flags beat -s, -s beats the config file;
    bad keys and values are one-line errors."""
    import json

    from raycrawl.cli import main

    config = tmp_path / "c.toml"
    config.write_text("[crawl]\nhost_delay = 9.0\nip_delay = 0.75\n")
    checked = 0
    for f in setting_fields():
        other = _other_value(f)
        if other is None:  # settings naming files that must exist (checked by validate)
            continue
        value, spelled = other
        assert main(["settings", "--json", "-s", f"{f.name}={spelled}"]) == 0
        got = json.loads(capsys.readouterr().out)[f.name]
        assert got == {"value": value, "source": f"-s {f.name}={spelled}"}, f.name
        checked += 1
    assert checked >= len(setting_fields()) - 7  # (the six that name files that must exist, and agent_dir)
    # agent_dir only with out_store (the store is where agents without a shared out meet)
    assert main(["settings", "--json", "-s", "agent_dir=zz", "-s", "out_store=s3://crawls/run"]) == 0
    assert json.loads(capsys.readouterr().out)["agent_dir"]["value"] == "zz"
    assert main(["settings", "-s", "agent_dir=zz"]) == 2
    assert "agent_dir needs out_store" in capsys.readouterr().err
    assert main(["settings", "--json", "--config", str(config), "-s", "host_delay=2", "--host-delay", "3",
                 "-s", "max_pages=5"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["host_delay"] == {"value": 3.0, "source": "--host-delay"}
    assert got["ip_delay"] == {"value": 0.75, "source": f"config {config}"}
    assert got["max_pages"] == {"value": 5, "source": "-s max_pages=5"}
    assert got["batch"]["source"] == "default"
    for bad in (["-s", "nope=1"], ["-s", "max_pages=abc"], ["-s", "near_dup=maybe"], ["-s", "host_delay"]):
        assert main(["settings", *bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "error" in err, err
    assert main(["settings", "--sample"]) == 0
    assert capsys.readouterr().out == sample_config()


def test_version_and_logging_options_after_the_subcommand(tmp_path, capsys) -> None:
    from raycrawl import __version__
    from raycrawl.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out == f"raycrawl {__version__}\n"
    log = tmp_path / "run.log"
    # after a sub-command (and a nested one) as before it: -vv makes the debug log reach the file
    assert main(["settings", "-vv", "--log-file", str(log), "-s", "max_pages=2"]) == 0
    assert main(["url", "http://a.test/", "x", "-v"]) == 0
    assert main(["warc", "index", str(tmp_path / "none"), "-v"]) == 2
    import logging

    logging.getLogger("raycrawl.test").debug("written at debug level")
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, logging.FileHandler)]:
        root.removeHandler(handler)
        handler.close()
    root.setLevel(logging.WARNING)
    assert "written at debug level" in log.read_text()


def test_spam_gate_from_the_environment_is_a_setting(monkeypatch) -> None:
    """$RAYCRAWL_SPAM_GATE fills an unset spam_gate in the settings the driver builds — the actors
    of a cluster the crawl joins do not share the driver's environment — and never overrides one
    that is set."""
    from raycrawl.settings import build_settings, settings_sources

    monkeypatch.setenv("RAYCRAWL_SPAM_GATE", "/models/gate.json")
    s = build_settings()
    assert s.spam_gate == "/models/gate.json"
    assert settings_sources(s)["spam_gate"] == "$RAYCRAWL_SPAM_GATE"
    assert build_settings(spam_gate="/other.json").spam_gate == "/other.json"
    monkeypatch.delenv("RAYCRAWL_SPAM_GATE")
    assert build_settings().spam_gate is None
