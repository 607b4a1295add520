"""Build frozen dataclasses from plain dicts, failing on unknown or missing keys.

The run spec is read by hand-launched trainers too, so a typo in it must fail loudly
instead of silently falling back to a default."""

from __future__ import annotations

import copy
import dataclasses
import functools
import typing
import weakref

# Field metadata of a mapping whose order is meaning (a script's flags, passed in the order written). Spec text is
# JSON with sorted keys (one spec, one text, one hash), which would sort it: where its keys are not in sorted
# order it is written as a list of [key, value] pairs, read back as the mapping in that order. A mapping whose
# order sorting keeps stays a mapping, so its text (and hash) is what it was before order was kept.
ORDERED = {"ordered": True}
# Field metadata of a field added after specs were written: left out of the text while empty, so a spec without it
# keeps its text and hash (and reads back with the field's default).
OMITTED_EMPTY = {"omitted_empty": True}


class SpecError(ValueError):
    pass


@functools.cache
def hints_of(cls) -> dict:
    """A record class's field types, resolved once per class (typing.get_type_hints compiles each string annotation
    anew, and every record read asks). Read only."""
    return typing.get_type_hints(cls)


@functools.cache
def fields_of(cls) -> dict:
    """A record class's fields by name, once per class (every record read asks). Read only."""
    return {f.name: f for f in dataclasses.fields(cls)}


def _as_is(hint) -> bool:
    """Whether a value of this field type is taken as it is: no record (dataclass) in it to build."""
    try:
        return _as_is_cached(hint)
    except TypeError:  # an unhashable type hint: asked each time
        return _as_is_cached.__wrapped__(hint)


@functools.cache
def _as_is_cached(hint) -> bool:
    return not dataclasses.is_dataclass(hint) and not any(dataclasses.is_dataclass(a) for a in typing.get_args(hint))


def from_dict(cls, data, path: str = ""):
    if not isinstance(data, dict):
        raise SpecError(f"{path or cls.__name__}: expected a mapping, got {type(data).__name__}")
    fields = fields_of(cls)
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise SpecError(f"{path + '.' if path else ''}{unknown[0]}: unknown key; allowed: {', '.join(sorted(fields))}")
    hints = hints_of(cls)
    values = {}
    for name, f in fields.items():
        if name not in data:
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
                continue
            raise SpecError(f"{path + '.' if path else ''}{name}: missing")
        value = data[name]
        if f.metadata.get("ordered") and isinstance(value, list):
            value = _pairs(value, f"{path}.{name}" if path else name)
        # A plain field's value is kept as it is: most of a record's fields, and most of its reading time.
        values[name] = value if _as_is(hints[name]) else _value(hints[name], value, f"{path}.{name}" if path else name)
    return cls(**values)


def _pairs(value: list, where: str) -> dict:
    """An ordered mapping written as [[key, value], ...], in that order."""
    if not all(isinstance(p, (list, tuple)) and len(p) == 2 and isinstance(p[0], str) for p in value):
        raise SpecError(f"{where}: expected a mapping or a list of [name, value] pairs")
    return dict(value)


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
    names = {cls: typing.get_args(hints_of(cls)["name"]) for cls in classes}
    for cls, allowed in names.items():
        if name in allowed:
            return cls
    raise SpecError(f"{where}.name: {name!r} is not one of {', '.join(n for a in names.values() for n in a)}")


def to_dict(obj) -> dict:
    """A record as plain data (dataclasses.asdict), an ORDERED mapping whose keys sorting would reorder written
    as its list of pairs."""
    return _plain(obj)


# Values that are their own copy: returned as they are (copy.deepcopy's dispatch for each of a spec's thousands of
# leaves was most of a dry run's cost of spec text).
IMMUTABLE = (str, int, float, bool, type(None))


def shared_dict(obj) -> dict:
    """to_dict's data, to be read and never changed (a spec's canonical JSON): each frozen record's data is made once
    and kept while the record lives, so the records many specs hold (a suite cell's recipe, the hardware, the
    trainer) are turned into data once, not once per run (a quarter of the workflow's own share of a 5,000-run dry
    run). Kept beside the records, not on them: their __dict__ is read as their fields elsewhere."""
    return _plain(obj, shared=True)


_SHARED: dict[int, dict] = {}  # id of a live frozen record -> its data (shared_dict)


def _plain(value, shared=False):
    if isinstance(value, IMMUTABLE):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kept = shared and value.__dataclass_params__.frozen
        if kept and id(value) in _SHARED:
            return _SHARED[id(value)]
        out = {}
        for f in dataclasses.fields(value):
            item = _plain(getattr(value, f.name), shared)
            if f.metadata.get("omitted_empty") and not item:
                continue
            if f.metadata.get("ordered") and isinstance(item, dict) and list(item) != sorted(item):
                item = [[k, v] for k, v in item.items()]
            out[f.name] = item
        if kept:
            try:  # dropped with the record, so its id names no other record later
                weakref.finalize(value, _SHARED.pop, id(value), None)
            except TypeError:  # a record without weak references: not kept
                return out
            _SHARED[id(value)] = out
        return out
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v, shared) for v in value)
    if isinstance(value, dict):
        return {_plain(k, shared): _plain(v, shared) for k, v in value.items()}
    return copy.deepcopy(value)


class Typed:
    """Mixin for frozen dataclasses: `Cls.from_dict(data, path)` with strict keys."""

    @classmethod
    def from_dict(cls, data: dict, path: str = ""):
        return from_dict(cls, data, path or cls.__name__.lower())

    def to_dict(self) -> dict:
        return to_dict(self)
