"""Validate a raw config (the dict snakemake loaded) and resolve it into a Matrix.

Every problem becomes one ConfigError whose message is a single line naming the field and
the fix, raised before any job is scheduled."""

from __future__ import annotations

import copy
import difflib
import itertools
from functools import lru_cache
from pathlib import Path

import jsonschema
import yaml

from hwsweep.matrix import Cell, Matrix
from hwsweep import catalog
from hwsweep.plan import Advisor, Hardware, PlanError, make_plan
from hwsweep.recipe import Recipe
from hwsweep.typed import SpecError

SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    pass


@lru_cache(maxsize=None)
def load_schema(path: str = str(SCHEMA_PATH)) -> dict:
    return yaml.safe_load(Path(path).read_text())


def _path(parts) -> str:
    return ".".join(str(p) for p in parts) or "config"


def _fix(err: jsonschema.ValidationError) -> str:
    v, s = err.validator, err.validator_value
    if v == "pattern":
        return "use only letters, digits, '_' and '-' (no spaces, '/', '..' or shell characters)"
    if v == "type":
        return f"give a value of type {s if isinstance(s, str) else ' or '.join(s)}"
    if v == "enum":
        return f"use one of {', '.join(map(str, s))}"
    if v in ("minimum", "exclusiveMinimum"):
        return f"use a value {'>=' if v == 'minimum' else '>'} {s}"
    if v in ("maximum", "exclusiveMaximum"):
        return f"use a value {'<=' if v == 'maximum' else '<'} {s}"
    if v == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        return f"remove it{'; allowed keys: ' + ', '.join(allowed) if allowed else ''}"
    if v == "required":
        return "add it"
    if v in ("minItems", "minProperties"):
        return f"give at least {s} entr{'y' if s == 1 else 'ies'}"
    if v in ("maxItems", "maxProperties", "maxLength"):
        return f"give at most {s}"
    if v == "uniqueItems":
        return "remove the duplicate"
    if v == "anyOf":
        return "use a number, a boolean or a simple name"
    return "see hwsweep/schemas/config.schema.yaml"


def _message(err: jsonschema.ValidationError) -> str:
    where = _path(err.absolute_path)
    if "propertyNames" in err.relative_schema_path or "propertyNames" in err.schema_path:
        return f"{where}: name {err.instance!r} is not allowed; {_fix(err)}"
    if err.validator == "additionalProperties":
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        return f"{where}.{extra[0]}: unknown key; {_fix(err)}"
    if err.validator == "required":
        missing = [k for k in err.validator_value if k not in err.instance]
        return f"{where}.{missing[0]}: missing; add it"
    shown = repr(err.instance)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return f"{where}: {shown} is invalid; {_fix(err)}"


def _deepest(err: jsonschema.ValidationError) -> jsonschema.ValidationError:
    # For names and nested objects the innermost error says most (e.g. the pattern that failed).
    while err.context:
        err = jsonschema.exceptions.best_match(err.context)
    return err


def _fill_defaults(schema: dict, instance: dict, root: dict) -> dict:
    """Fill schema defaults into `instance` (recursively through nested objects)."""
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    out = dict(instance)
    for key, sub in schema.get("properties", {}).items():
        if "$ref" in sub:
            sub = {**root["$defs"][sub["$ref"].rsplit("/", 1)[1]], **{k: v for k, v in sub.items() if k != "$ref"}}
        if key not in out and "default" in sub:
            out[key] = copy.deepcopy(sub["default"])
        elif key not in out and "properties" in sub:
            out[key] = {}  # a nested object left out entirely still gets its defaults
        if isinstance(out.get(key), dict) and sub.get("type") == "object":
            out[key] = _fill_defaults(sub, out[key], root)
    return out


def _merge(base: dict, override: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in override.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def _set_dotted(d: dict, dotted: str, value) -> dict:
    out = copy.deepcopy(d)
    node = out
    *parents, leaf = dotted.split(".")
    for p in parents:
        node = node[p]
    node[leaf] = value
    return out


def _leaf_keys(schema: dict, root: dict, prefix: str = "") -> set[str]:
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    keys = set()
    for k, sub in schema.get("properties", {}).items():
        name = f"{prefix}{k}"
        keys |= _leaf_keys(sub, root, name + ".") if sub.get("type") == "object" else {name}
    return keys


def _variant_name(values: dict) -> str:
    if not values:
        return "default"
    return "_".join(f"{k.rsplit('.', 1)[1] if '.' in k else k}-{str(v).lower()}" for k, v in values.items())


def _check_recipe(recipe: dict, where: str, schema: dict, sweep: dict | None = None) -> Recipe:
    err = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema["$defs"]["recipe"] | {"$defs": schema["$defs"]}).iter_errors(recipe)
    )
    if err is not None:
        err = _deepest(err)
        key = _path(err.absolute_path)
        if sweep and key in sweep:  # name the sweep entry the user wrote, not the merged recipe
            raise ConfigError(f"{where}.sweep.{key}: {err.instance!r} is invalid; {_fix(err)}")
        raise ConfigError(f"{where}.{_message(err)}")
    r = Recipe.from_dict(recipe, where)
    if r.schedule.warmup_steps >= r.schedule.steps:
        raise ConfigError(
            f"{where}.schedule.warmup_steps: {r.schedule.warmup_steps} must be below steps {r.schedule.steps}; lower it"
        )
    if r.model.width % r.model.heads:
        raise ConfigError(
            f"{where}.model.width: {r.model.width} is not divisible by heads {r.model.heads}; use a multiple of heads"
        )
    if r.lr_scaling != "none" and r.batch_policy == "locked":
        raise ConfigError(
            f"{where}.lr_scaling: {r.lr_scaling} only applies with batch_policy: grow; set lr_scaling: none or batch_policy: grow"
        )
    if r.tf32 and r.reproducibility != "comparable":
        raise ConfigError(
            f"{where}.tf32: true conflicts with reproducibility {r.reproducibility!r}; "
            "set tf32: false or reproducibility: comparable"
        )
    return r


def resolve(raw: dict, schema: dict | None = None) -> Matrix:
    """Validate `raw` and expand it; raises ConfigError with a one-line message."""
    schema = schema or load_schema()
    validator = jsonschema.Draft202012Validator(schema)
    err = jsonschema.exceptions.best_match(validator.iter_errors(raw))
    if err is not None:
        raise ConfigError(_message(_deepest(err)))

    base = _fill_defaults(schema["properties"]["recipe"], raw.get("recipe", {}), schema)
    _check_recipe(base, "recipe", schema)

    hardware = {}
    for name, entry in raw["hardware"].items():
        entry = _fill_defaults(schema["$defs"]["hardware"], entry, schema)
        entry.setdefault("cpus_per_task", entry["devices_per_node"])
        hardware[name] = Hardware.from_dict(entry, f"hardware.{name}")
        if hardware[name].gres and hardware[name].gpu_model:
            raise ConfigError(
                f"hardware.{name}.gpu_model: give either gres or gpu_model (with the GPU count taken from the devices), not both"
            )
        if hardware[name].device_memory_gb is None:
            raise ConfigError(
                f"hardware.{name}.gpu_type: {entry['gpu_type']!r} is not in the catalog; use one of "
                f"{', '.join(catalog.catalog())} or give memory_gb"
            )
    advisor = Advisor(**_fill_defaults(schema["properties"]["advisor"], raw.get("advisor", {}), schema))
    statistics = _fill_defaults(schema["properties"]["statistics"], raw.get("statistics", {}), schema)
    if raw["baseline"] not in hardware:
        raise ConfigError(
            f"baseline: {raw['baseline']!r} is not a hardware name; use one of {', '.join(hardware)}"
        )

    leaves = _leaf_keys(schema["$defs"]["recipe"], schema)
    cells = []
    for suite, body in raw["suites"].items():
        where = f"suites.{suite}"
        names = body.get("hardware", list(hardware))
        for hw in names:
            if hw not in hardware:
                raise ConfigError(
                    f"{where}.hardware: {hw!r} is not defined under hardware; add it there or use one of {', '.join(hardware)}"
                )
        if raw["baseline"] not in names:
            raise ConfigError(
                f"{where}.hardware: the baseline {raw['baseline']!r} is missing; add it so speedups have a reference"
            )
        recipe = _merge(base, body.get("overrides", {}))
        sweep = body.get("sweep", {})
        for key in sweep:
            if key not in leaves:
                near = difflib.get_close_matches(key, sorted(leaves), n=3, cutoff=0.5)
                hint = f"did you mean {' or '.join(near)}?" if near else "see recipe keys in hwsweep/schemas/config.schema.yaml"
                raise ConfigError(f"{where}.sweep.{key}: not a recipe key; {hint}")
        seen = {}
        for combo in itertools.product(*sweep.values()):
            values = dict(zip(sweep, combo))
            variant_recipe = recipe
            for key, value in values.items():
                variant_recipe = _set_dotted(variant_recipe, key, value)
            variant = _variant_name(values)
            if variant in seen:
                raise ConfigError(
                    f"{where}.sweep: values {seen[variant]} and {values} both name variant {variant!r}; make them distinct"
                )
            seen[variant] = values
            typed = _check_recipe(variant_recipe, where, schema, sweep)
            for hw in names:
                try:
                    make_plan(typed, hardware[hw], advisor, context=f" (suite {suite}, variant {variant}, hardware {hw})")
                except PlanError as e:
                    raise ConfigError(str(e)) from None
            cells.append(Cell(suite=suite, variant=variant, recipe=typed, sweep_values=values, hardware=tuple(names)))
    return Matrix(
        cells=tuple(cells),
        seeds=tuple(raw["seeds"]),
        hardware=hardware,
        baseline=raw["baseline"],
        advisor=advisor,
        statistics=statistics,
        keep_checkpoints=raw.get("keep_checkpoints", True),
        warnings=_cross_hardware_warnings(cells, hardware, raw["baseline"]),
    )


def _cross_hardware_warnings(cells, hardware, baseline) -> tuple[str, ...]:
    """A change of device type is where precision silently drifts: say it is locked."""
    out = []
    for cell in cells:
        base = hardware[baseline].gpu_type
        for hw in cell.hardware:
            if hardware[hw].gpu_type != base:
                r = cell.recipe
                out.append(
                    f"suite {cell.suite} [{cell.variant}]: {hw} ({hardware[hw].gpu_type}) vs baseline {baseline} ({base}): "
                    f"lock precision: {r.precision}, tf32 {str(r.tf32).lower()} on both"
                )
    return tuple(dict.fromkeys(out))


def resolve_or_exit(raw: dict) -> Matrix:
    """For the Snakefile: print the one-line error and exit non-zero, no traceback."""
    import sys

    try:
        return resolve(raw)
    except (ConfigError, SpecError) as e:
        print(f"hwsweep config error: {e}", file=sys.stderr)
        sys.exit(1)
