"""How a config problem is worded: ConfigError, one line naming the field and the fix, and the words of the
schema's errors (a pattern as the rule it states, a YAML boolean that should have been quoted)."""

from __future__ import annotations

import re
import reprlib

import jsonschema

from hwsweep.contracts import secrets


class ConfigError(ValueError):
    """One line naming the field and the fix; whatever secret a value held is masked in it (contracts.secrets)."""

    def __init__(self, message: str = "", *args):
        super().__init__(secrets.redact(str(message)), *args)


SHOWN = reprlib.Repr()  # a value in a message, cut short however much it holds
SHOWN.maxstring = SHOWN.maxother = 40
SHOWN.maxlist = SHOWN.maxdict = 4
SHOWN.maxlevel = 2


def _path(parts) -> str:
    return ".".join(str(p) for p in parts) or "config"


# The words YAML 1.1 (PyYAML) reads as booleans when they are not quoted.
YAML_BOOLEANS = {True: ("true", "yes", "on"), False: ("false", "no", "off")}


def _words(items: list[str], last: str) -> str:
    return f"{', '.join(items[:-1])} {last} {items[-1]}" if len(items) > 1 else "".join(items)


def _pattern_rule(pattern: str) -> str:
    """A simple schema pattern (^[first][rest]{0,n}$ or ^[chars]{m,n}$) as the rule it states: the characters it
    allows (a command's arguments may hold '/' and '.', a name may not), how it starts and how long it may be."""
    m = re.fullmatch(r"\^(?:\[([^\]]+)\])?\[([^\]]+)\]\{(\d+),(\d+)\}\$", pattern)
    if not m:
        return f"match the pattern {pattern} (hwsweep/schemas/config.schema.yaml)"
    first, rest, _, longest = m.groups()

    def others(chars: str) -> list[str]:
        return [f"'{c}'" for c in re.sub(r"A-Z|a-z|0-9", "", chars)]

    letters = "letters" if "A-Z" in rest else "lower-case letters"
    rule = f"use only {_words([letters, 'digits', *others(rest)], 'and')}"
    if first is not None and (others(first) != others(rest) or ("0-9" in first) != ("0-9" in rest)):
        starts = [w for w, c in (("a letter", "a-z"), ("a digit", "0-9")) if c in first] + others(first)
        rule += f", starting with {_words(starts, 'or')}"
    never = ["spaces", "quotes"] + (["'/'"] if "/" not in rest else []) + (["'..'"] if "." not in rest else [])
    return f"{rule}; at most {int(longest) + (first is not None)} characters, no {_words(never + ['shell characters'], 'or')}"


def _fix(err: jsonschema.ValidationError) -> str:
    v, s = err.validator, err.validator_value
    if v == "pattern":
        return _pattern_rule(s)
    if v == "type" and isinstance(err.instance, bool) and "enum" in err.schema:  # a bare off, read as false
        v, s = "enum", err.schema["enum"]
    if v == "type":
        wanted = s if isinstance(s, str) else " or ".join(s)
        value = err.instance
        if "integer" in wanted and isinstance(value, float) and value.is_integer():
            return f"write {int(value)}, an integer without a dot or an exponent"
        if isinstance(value, bool) and "boolean" not in wanted:
            return f"give a value of type {wanted} (YAML 1.1 reads yes/no/on/off unquoted as booleans: quote the word)"
        if value is None:
            return f"give a value of type {wanted} (~, null or nothing is read as null)"
        return f"give a value of type {wanted}"
    if v == "enum":
        bare = [w for w in s if isinstance(err.instance, bool) and str(w).lower() in YAML_BOOLEANS[err.instance]]
        quote = f' (YAML reads a bare {bare[0]} as {str(err.instance).lower()}: write "{bare[0]}")' if bare else ""
        return f"use one of {', '.join(map(str, s))}{quote}"
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


# Words other projects use for a key of ours: an unknown one is answered with ours (model.family -> model.name).
OTHER_WORDS = {"family": "name", "type": "name", "kind": "name"}


def _message(err: jsonschema.ValidationError) -> str:
    where = _path(err.absolute_path)
    if "propertyNames" in err.relative_schema_path or "propertyNames" in err.schema_path:
        return f"{where}: name {err.instance!r} is not allowed; {_fix(err)}"
    if err.validator == "additionalProperties":
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        meant = OTHER_WORDS.get(extra[0])
        if meant in err.schema.get("properties", {}):
            value = SHOWN.repr(err.instance[extra[0]])
            return f"{where}.{extra[0]}: unknown key; the {where.rsplit('.', 1)[-1]}'s {extra[0]} is its {meant}: write {meant}: {value}"
        return f"{where}.{extra[0]}: unknown key; {_fix(err)}"
    if err.validator == "required":
        missing = [k for k in err.validator_value if k not in err.instance]
        return f"{where}.{missing[0]}: missing; add it"
    return f"{where}: {SHOWN.repr(err.instance)} is invalid; {_fix(err)}"  # bounded: never the whole expansion


def _deepest(err: jsonschema.ValidationError) -> jsonschema.ValidationError:
    # For names and nested objects the innermost error says most (e.g. the pattern that failed).
    while err.context:
        err = jsonschema.exceptions.best_match(err.context)
    return err
