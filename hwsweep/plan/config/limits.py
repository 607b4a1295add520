"""How much one config may hold (values, nesting, text, bytes, runs) and the check of a loaded config against
those bounds: an alias bomb, a value that contains itself or a non-finite number is refused before anything walks it."""

from __future__ import annotations

import math

from hwsweep.plan.config.wording import SHOWN, ConfigError, _path

# A config's values counted as a walk meets them (an alias counted where it is used): above this it is an
# alias bomb or a mistake, refused before anything walks it (validation, its messages, the planner). Twice the
# schema's longest list (10,000 seeds); low enough that validating what passes takes well under a second.
MAX_VALUES = 20_000
# Nesting levels of a config's values (the schema's deepest is 6, a sweep's list of lists) and the characters of
# all its text: far above any config, and low enough that a hostile one is refused in well under a second.
MAX_DEPTH = 32
MAX_TEXT = 1_000_000
# A config file's size: the same bound on the bytes, checked before YAML reads them.
MAX_BYTES = 1_000_000
# Runs one config may plan: far above any sweep one machine or cluster finishes.
MAX_RUNS = 10_000


def _where(entry) -> str:
    """The dotted path of a walked node: entries are (node, parent entry, key, depth)."""
    parts = []
    while entry[1] is not None:
        parts.append(entry[2])
        entry = entry[1]
    return _path(reversed(parts))


def check_document(raw) -> None:
    """A config as loaded from YAML: bounded (MAX_VALUES values, MAX_DEPTH levels, MAX_TEXT characters), free of
    values that contain themselves (an alias inside its own anchor), and every number in it finite. YAML's .nan
    and .inf pass every minimum and maximum of the schema, then crash training or poison the statistics.
    Linear in the values walked: a node keeps its parent, so its path is only spelled out for a message."""
    stack, seen, text = [(raw, None, None, 0)], 0, 0
    while stack:
        entry = stack.pop()
        node, _, _, depth = entry
        seen += 1
        if seen > MAX_VALUES:
            raise ConfigError(f"config: more than {MAX_VALUES:,} values once its YAML aliases (*name) are expanded; "
                              "write the values out, or repeat fewer of them")  # fmt: skip
        if isinstance(node, float) and not math.isfinite(node):
            raise ConfigError(f"{_where(entry)}: {node} is not a finite number; give a number")
        if isinstance(node, (str, bytes)):
            text += len(node)
            if text > MAX_TEXT:
                raise ConfigError(f"{_where(entry)}: the config's text passes {MAX_TEXT:,} characters here; "
                                  "a config holds settings, not data: shorten the long values")  # fmt: skip
        if not isinstance(node, (dict, list)):
            continue
        if len(node) > MAX_VALUES:
            raise ConfigError(f"{_where(entry)}: {len(node):,} entries, more than the {MAX_VALUES:,} values a config "
                              "may hold; give fewer")  # fmt: skip
        if depth >= MAX_DEPTH:
            anchor, up = None, entry[1]
            while up is not None:  # the outermost place the value appears: where its anchor is
                anchor, up = up if up[0] is node else anchor, up[1]
            if anchor is not None:
                raise ConfigError(f"{_where(anchor)}: the value contains itself (a YAML alias *name used inside its "
                                  "own anchor &name); write the value out without the alias")  # fmt: skip
            raise ConfigError(f"{SHOWN.repr(_where(entry))[1:-1]}: nested more than {MAX_DEPTH} levels deep; a "
                              "config's values are a few levels deep at most: remove the extra nesting")  # fmt: skip
        items = node.items() if isinstance(node, dict) else enumerate(node)
        stack += [(value, entry, key, depth + 1) for key, value in reversed(list(items))]


def sweep_entries(sweep: dict, prefix: str = "") -> dict:
    """A suite's sweep with its nested mappings as dotted keys ({args: {model.lr: [...]}} is {args.model.lr: [...]}):
    the key -> values lists its variants are made from."""
    out = {}
    for key, choices in sweep.items():
        out |= sweep_entries(choices, f"{prefix}{key}.") if isinstance(choices, dict) else {f"{prefix}{key}": choices}
    return out


def _run_count(raw: dict) -> int:
    """Runs the (schema-valid) config plans, counted before any variant is made: a sweep's variants are the
    product of its value lists."""
    total = 0
    for body in raw["suites"].values():
        variants = math.prod(len(choices) for choices in sweep_entries(body.get("sweep", {})).values())
        total += variants * len(body.get("hardware", raw["hardware"])) * len(raw["seeds"])
    return total


def _check_run_count(raw: dict) -> None:
    runs = _run_count(raw)
    if runs > MAX_RUNS:
        raise ConfigError(f"suites: the matrix has {runs:,} runs (suites x sweep values x hardware x seeds), more "
                          f"than the {MAX_RUNS:,} one config may plan; use fewer seeds, sweep values or hardware")  # fmt: skip
