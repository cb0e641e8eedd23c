"""ray_cluster.yaml is a real cluster-launcher config: Ray's own validator accepts it."""

from __future__ import annotations

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
