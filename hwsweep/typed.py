"""Build frozen dataclasses from plain dicts, failing on unknown or missing keys.

The run spec is read by hand-launched trainers too, so a typo in it must fail loudly
instead of silently falling back to a default."""

from __future__ import annotations

import dataclasses
import typing


class SpecError(ValueError):
    pass


def from_dict(cls, data, path: str = ""):
    if not isinstance(data, dict):
        raise SpecError(f"{path or cls.__name__}: expected a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise SpecError(f"{path + '.' if path else ''}{unknown[0]}: unknown key; allowed: {', '.join(sorted(fields))}")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, f in fields.items():
        where = f"{path}.{name}" if path else name
        if name not in data:
            if f.default is not dataclasses.MISSING:
                continue
            raise SpecError(f"{where}: missing")
        hint = hints[name]
        values[name] = from_dict(hint, data[name], where) if dataclasses.is_dataclass(hint) else data[name]
    return cls(**values)


def to_dict(obj) -> dict:
    return dataclasses.asdict(obj)


class Typed:
    """Mixin for frozen dataclasses: `Cls.from_dict(data, path)` with strict keys."""

    @classmethod
    def from_dict(cls, data: dict, path: str = ""):
        return from_dict(cls, data, path or cls.__name__.lower())
