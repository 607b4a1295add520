"""The config's `tracking`: the trackers a run feeds, defaults filled and checked."""

from __future__ import annotations

from hwsweep.contracts.tracking import TrackingConfig, config_problem
from hwsweep.plan.config.schema import _fill_defaults
from hwsweep.plan.config.wording import ConfigError


def _tracking(raw, schema: dict) -> TrackingConfig:
    """The config's `tracking` (a list of tracker names, or the full mapping), defaults filled and checked."""
    raw = {"backends": raw} if isinstance(raw, list) else raw
    branch = next(b for b in schema["properties"]["tracking"]["anyOf"] if b["type"] == "object")
    config = TrackingConfig.from_dict(_fill_defaults(branch, raw, schema), "tracking")
    problem = config_problem(config)
    if problem:
        raise ConfigError(problem)
    return config
