"""The config's `compare`: named pairs of suite/variant, each side a variant of the matrix, over declared metrics."""

from __future__ import annotations

import difflib

from hwsweep.plan.config.wording import SHOWN, ConfigError


def _comparisons(raw: dict, cells, metrics) -> dict:
    """The config's `compare`, checked: both sides name a suite/variant of the matrix and the metrics are declared.
    Both sides always share the baseline (every suite runs it) and the seeds (one list), so they pair."""
    paths = [f"{c.suite}/{c.variant}" for c in cells]
    names = [m.name for m in metrics]
    out = {}
    for name, pair in raw.items():
        for key in ("variant", "reference"):
            if pair[key] not in paths:
                near = difflib.get_close_matches(pair[key], paths, n=1, cutoff=0.5)
                hint = f"did you mean {near[0]}?" if near else f"give suite/variant, e.g. {paths[0]}"
                raise ConfigError(f"compare.{name}.{key}: {SHOWN.repr(pair[key])} is not a suite/variant of this config; "
                                  f"{hint}")  # fmt: skip
        if pair["variant"] == pair["reference"]:
            raise ConfigError(f"compare.{name}.reference: the same as its variant; name another suite/variant")
        for metric in pair.get("metrics", []):
            if metric not in names:
                raise ConfigError(f"compare.{name}.metrics: {metric!r} is not a declared metric; use one of "
                                  f"{', '.join(names)}")  # fmt: skip
        out[name] = {"variant": pair["variant"], "reference": pair["reference"], "metrics": list(pair.get("metrics", names))}
    return out
