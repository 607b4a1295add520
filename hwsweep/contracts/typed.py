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
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
                continue
            raise SpecError(f"{where}: missing")
        values[name] = _value(hints[name], data[name], where)
    return cls(**values)


def _value(hint, value, where: str):
    """Nested records: a dataclass, an optional one (X | None), a list of them (list[X]), or one
    of several told apart by their `name` field (A | B | None with name: Literal["a"] ...)."""
    if dataclasses.is_dataclass(hint):
        return from_dict(hint, value, where)
    args = [a for a in typing.get_args(hint) if a not in (type(None), Ellipsis)]
    if len(args) > 1 and isinstance(value, dict) and all(dataclasses.is_dataclass(a) for a in args):
        return from_dict(_tagged(args, value.get("name"), where), value, where)
    if value is None or len(args) != 1 or not dataclasses.is_dataclass(args[0]):
        return value
    if typing.get_origin(hint) in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise SpecError(f"{where}: expected a list, got {type(value).__name__}")
        return typing.get_origin(hint)(from_dict(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    return from_dict(args[0], value, where)


def _tagged(classes, name, where: str):
    names = {cls: typing.get_args(typing.get_type_hints(cls)["name"]) for cls in classes}
    for cls, allowed in names.items():
        if name in allowed:
            return cls
    raise SpecError(f"{where}.name: {name!r} is not one of {', '.join(n for a in names.values() for n in a)}")


def to_dict(obj) -> dict:
    return dataclasses.asdict(obj)


class Typed:
    """Mixin for frozen dataclasses: `Cls.from_dict(data, path)` with strict keys."""

    @classmethod
    def from_dict(cls, data: dict, path: str = ""):
        return from_dict(cls, data, path or cls.__name__.lower())

    def to_dict(self) -> dict:
        return to_dict(self)
