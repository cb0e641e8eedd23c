"""ray_cluster.yaml is a real cluster-launcher config: Ray's own validator accepts it."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_ray_cluster_yaml_passes_rays_validator():
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load((ROOT / "ray_cluster.yaml").read_text())
    validate_config(prepare_config(config))
    types = config["available_node_types"]
    assert types[config["head_node_type"]]["resources"] == {"CPU": 0}, "the head must not run crawl agents"
    workers = [t for name, t in types.items() if name != config["head_node_type"]]
    assert any(t["node_config"].get("InstanceMarketOptions", {}).get("MarketType") == "spot" for t in workers)
    assert all(t["resources"].get("agent") == 1 for t in workers)
    assert config["idle_timeout_minutes"] > 0


def test_validator_rejects_a_broken_config():
    import jsonschema
    import pytest
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load((ROOT / "ray_cluster.yaml").read_text())
    config["available_node_types"]["agent_spot"]["min_workers"] = "several"
    with pytest.raises(jsonschema.ValidationError):
        validate_config(prepare_config(config))


def test_an_agent_nodes_ray_runs_as_a_service_that_drains_on_sigterm(tmp_path):
    """The worker start commands, run as Ray's launcher runs them (its own functions add the head's
    address and the node type's resources), start ``ray start --block`` as a systemd service that
    stops with SIGTERM to that process alone (``KillMode=mixed``: Ray drains the node first,
    tests/test_machines.py) and keeps the node's resources. ``sudo``, ``systemctl``,
    ``systemd-run`` and ``ray`` are stand-ins that record their arguments: no systemd here."""
    import json
    import os
    import subprocess

    from ray.autoscaler._private.command_runner import _with_environment_variables
    from ray.autoscaler._private.util import with_head_node_ip

    config = yaml.safe_load((ROOT / "ray_cluster.yaml").read_text())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = 'import json, os, sys\nopen(os.environ["CALLS"], "a").write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\\n")\n'
    for name in ("systemctl", "systemd-run", "ray"):
        (bin_dir / name).write_text(f"#!{sys.executable}\n{record}")
        (bin_dir / name).chmod(0o755)
    (bin_dir / "sudo").write_text('#!/bin/sh\nexec "$@"\n')
    (bin_dir / "sudo").chmod(0o755)
    resources = config["available_node_types"]["agent_spot"]["resources"]
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(tmp_path / "calls")}
    for cmd in with_head_node_ip(config["worker_start_ray_commands"], head_ip="10.0.0.9"):
        done = subprocess.run(["bash", "-c", _with_environment_variables(cmd, {"RAY_OVERRIDE_RESOURCES": resources})],
                              env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in (tmp_path / "calls").read_text().splitlines()]
    [run] = [c for c in calls if c[0] == "systemd-run"]
    start = next(i for i, a in enumerate(run) if i and not a.startswith("--"))
    options, command = run[1:start], run[start:]
    assert command[0] == str(bin_dir / "ray") and command[1:4] == ["start", "--block", "--address=10.0.0.9:6380"], command
    assert "--property=KillMode=mixed" in options, options
    setenv = dict(o.removeprefix("--setenv=").split("=", 1) for o in options if o.startswith("--setenv="))
    assert json.loads(setenv["RAY_OVERRIDE_RESOURCES"]) == resources, setenv
    assert setenv["RAY_AUTH_MODE"] == "token"
    assert not [c for c in calls if c[0] == "ray" and c[1:2] == ["start"]], "ray started outside the service"
