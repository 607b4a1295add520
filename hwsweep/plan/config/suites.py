"""A suite's variants: its overrides merged into the recipe, its sweep's axes (keys swept alone or together), each
combination's dotted keys set and its variant's name; the suite names the workflow keeps for itself."""

from __future__ import annotations

import copy

from hwsweep.plan.config.wording import ConfigError

# Suite names taken by the workflow itself: results/partial/ is the status rule's folder (a suite of
# that name collides with it); the rule names are kept free so a suite never reads like a workflow target.
RESERVED_SUITES = ("partial", "all", "plan", "spec", "train", "evaluate", "combine", "status", "report")


def _merge(base: dict, override: dict) -> dict:
    """Nested override; a section whose override names another kind (model.name, task.name)
    is replaced, not merged: another family's keys do not carry over."""
    out = copy.deepcopy(base)
    for k, v in override.items():
        nested = isinstance(v, dict) and isinstance(out.get(k), dict)
        same_kind = nested and v.get("name", out[k].get("name")) == out[k].get("name")
        out[k] = _merge(out[k], v) if same_kind else copy.deepcopy(v)
    return out


def _set_dotted(d: dict, dotted: str, value) -> dict:
    out = copy.deepcopy(d)
    node = out
    *parents, leaf = dotted.split(".")
    for p in parents:
        node = node[p]
    node[leaf] = value
    return out


def _leaf_keys(recipe: dict, prefix: str = "") -> set[str]:
    """Dotted keys of a resolved recipe (its model family's and task's own keys included)."""
    keys = set()
    for k, v in recipe.items():
        keys |= _leaf_keys(v, f"{prefix}{k}.") if isinstance(v, dict) and k != "args" else {f"{prefix}{k}"}
    return keys


def _sweep_axes(sweep: dict, where: str) -> list[list[dict]]:
    """Each sweep entry as its list of choices {key: value}; an entry naming several keys,
    'model.h_cycles,model.l_cycles': [[1, 1], [2, 2]], sweeps them together (no cross product)."""
    axes = []
    for entry, choices in sweep.items():
        keys = entry.split(",")
        for choice in choices:
            if len(keys) > 1 and not (isinstance(choice, list) and len(choice) == len(keys)):
                raise ConfigError(f"{where}.sweep.{entry}: {choice!r} is not a list of {len(keys)} values; "
                                  f"give one value per key, e.g. {[1] * len(keys)}")  # fmt: skip
            if len(keys) == 1 and isinstance(choice, list):
                raise ConfigError(f"{where}.sweep.{entry}: {choice!r} is a list; give single values, or name "
                                  "several keys separated by ',' to sweep them together")  # fmt: skip
        axes.append([dict(zip(keys, c if len(keys) > 1 else [c])) for c in choices])
    return axes


def _variant_name(values: dict) -> str:
    if not values:
        return "default"
    return "_".join(f"{k.rsplit('.', 1)[1] if '.' in k else k}-{str(v).lower()}" for k, v in values.items())
