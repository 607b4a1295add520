"""The config schema (hwsweep/schemas/config.schema.yaml): loaded once, its Validator (ECMA patterns, integers that
are ints), a subschema's local $ref resolved and its defaults filled into a config's section."""

from __future__ import annotations

import copy
import re
from functools import lru_cache
from pathlib import Path

import jsonschema
import yaml

from hwsweep.plan.config.loading import LOADER

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"  # beside the package: users read it


@lru_cache(maxsize=None)
def _ecma(pattern: str) -> re.Pattern:
    # A schema pattern is an ECMA-262 regex, whose final $ is the end of the text; Python's $ also matches
    # before a final newline, which let 'cpu1\n' pass as a name.
    return re.compile(re.sub(r"(?<!\\)\$$", r"\\Z", pattern))


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not _ecma(pattern).search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


# JSON Schema counts 32.0 as an integer; a float where a count belongs would plan fine and crash
# inside torchrun (or name a folder seed1.0), so integers must be ints.
Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    validators={"pattern": _pattern},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda checker, value: isinstance(value, int) and not isinstance(value, bool)
    ),
)


@lru_cache(maxsize=None)
def load_schema(path: str = str(SCHEMA_PATH)) -> dict:
    return yaml.load(Path(path).read_text(), Loader=LOADER)  # noqa: S506 - a safe loader


def _deref(schema: dict, root: dict) -> dict:
    """A subschema with its $ref (a local JSON pointer) resolved; its own keys win."""
    if "$ref" not in schema:
        return schema
    target = root
    for part in schema["$ref"].lstrip("#/").split("/"):
        target = target[part]
    return {**_deref(target, root), **{k: v for k, v in schema.items() if k != "$ref"}}


def _fill_defaults(schema: dict, instance: dict, root: dict) -> dict:
    """Fill schema defaults into `instance` (recursively through nested objects)."""
    schema = _deref(schema, root)
    out = dict(instance)
    # A branch (if name is ..., then ...) first, so a model family's own defaults win over the general ones (hrm:
    # the original's optimizer and schedule), and again after, for a branch whose `if` holds only once the general
    # defaults are in (a model left without a name is the default family); filling only fills what is missing.
    out = _fill_branches(schema, out, root)
    for key, sub in schema.get("properties", {}).items():
        sub = _deref(sub, root)
        if key not in out and "default" in sub:
            out[key] = copy.deepcopy(sub["default"])
        elif key not in out and "properties" in sub:
            out[key] = {}  # a nested object left out entirely still gets its defaults
        if isinstance(out.get(key), dict) and sub.get("type") == "object":
            out[key] = _fill_defaults(sub, out[key], root)
    return _fill_branches(schema, out, root)


def _fill_branches(schema: dict, out: dict, root: dict) -> dict:
    for branch in schema.get("allOf", []):  # a model family's or task's own keys: if name is ..., then ...
        if "if" in branch and Validator(branch["if"]).is_valid(out):
            out = _fill_defaults(branch["then"], out, root)
    return out


def family_defaults(schema: dict) -> dict[tuple[str, ...], dict[str, object]]:
    """The recipe keys a model family gives defaults of its own: {(section, key): {family: default}}."""
    out: dict = {}
    for branch in schema["$defs"]["recipe"].get("allOf", []):
        family = branch["if"]["properties"]["model"]["properties"]["name"].get("const")
        for section, sub in branch["then"].get("properties", {}).items():
            for key, value in sub.get("properties", {}).items():
                if "default" in value and family:
                    out.setdefault((section, key), {})[family] = value["default"]
    return out


def _section_defaults(raw: dict, key: str, schema: dict) -> dict:
    """A top-level section of the config (advisor, statistics, ...) with its defaults; {} where it is left out."""
    return _fill_defaults(schema["properties"][key], raw.get(key, {}), schema)
