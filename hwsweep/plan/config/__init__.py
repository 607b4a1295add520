"""Validate a raw config (the dict snakemake loaded) and resolve it into a Matrix.

Every problem becomes one ConfigError whose message is a single line naming the field and
the fix, raised before any job is scheduled. The package holds one concept a module: `loading` (a config file
read and its YAML bounded), `limits` (how much a config may hold), `schema` (the schema, its Validator, $ref and
defaults), `wording` (ConfigError and the words of each message), `recipe`, `command` (the trainer and
evaluation), `metrics` (metrics and targets), `hardware`, `suites` (a suite's sweep and variants), `tracking`,
`compare`, `warnings`, and `resolve`, which runs them in order. The names callers import are here."""

from hwsweep.plan.config.limits import MAX_BYTES, MAX_DEPTH, MAX_RUNS, MAX_TEXT, MAX_VALUES, check_document
from hwsweep.plan.config.loading import DEFAULT_CONFIG, LOADER, load_file, load_or_exit, parse_override
from hwsweep.plan.config.resolve import resolve, resolve_or_exit
from hwsweep.plan.config.schema import SCHEMA_PATH, Validator, load_schema
from hwsweep.plan.config.suites import RESERVED_SUITES
from hwsweep.plan.config.wording import ConfigError

__all__ = [
    "DEFAULT_CONFIG",
    "LOADER",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_RUNS",
    "MAX_TEXT",
    "MAX_VALUES",
    "RESERVED_SUITES",
    "SCHEMA_PATH",
    "ConfigError",
    "Validator",
    "check_document",
    "load_file",
    "load_or_exit",
    "load_schema",
    "parse_override",
    "resolve",
    "resolve_or_exit",
]
