"""A config file read into a dict: the file's size, encoding and YAML checked, its event stream bounded (depth,
aliases, values) before PyYAML builds anything from it; each problem one line naming the file and the fix."""

from __future__ import annotations

import re
import stat
import sys
from pathlib import Path

import yaml

from hwsweep.plan.config.limits import MAX_BYTES, MAX_DEPTH, MAX_VALUES
from hwsweep.plan.config.wording import ConfigError

# libyaml's parser where PyYAML was built with it (a C state machine: no recursion, 20 x faster than PyYAML's own;
# the schema alone took 0.13 CPU-s of every snakemake start with PyYAML's).
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

DEFAULT_CONFIG = Path("config/config.yaml")  # where the workflow and the hwsweep commands look without --configfile


class _Refused(Exception):
    """Raised where a document goes past a bound: (mark, what is wrong and the fix)."""


# YAML 1.1's numbers that YAML 1.2, JSON and people read otherwise (PyYAML reads 1.1): digits joined by ':' are base
# 60 (a seed 1:30 is 90), a leading 0 makes an octal (010 is 8), 0x and 0b prefixes and '_' between digits are
# read too (0x1F is 31, 1_000 is 1000). Refused unquoted, with what was read.
TRAPS = ((re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?"), "digits joined by ':' as base 60"),
         (re.compile(r"[-+]?0[0-7_]+"), "a leading 0 as octal"),
         (re.compile(r"[-+]?0x[0-9a-fA-F_]+"), "0x as hexadecimal"),
         (re.compile(r"[-+]?0b[01_]+"), "0b as binary"),
         (re.compile(r"[-+]?(?:[0-9][0-9_]*_[0-9_]*(?:\.[0-9_]*)?|[0-9]+\.[0-9]*_[0-9_]*)"), "'_' between digits as nothing"))  # fmt: skip
# Numbers YAML 1.2 reads that YAML 1.1 reads as text: an exponent without a dot (1e3) and a 0o prefix.
AS_TEXT = ((re.compile(r"[-+]?(?:[0-9]+|[0-9]*\.[0-9]+)[eE][-+]?[0-9]+"), "an exponent only after a dot, 1.0e+3"),
           (re.compile(r"[-+]?0o[0-7]+"), "no 0o prefix"))  # fmt: skip
# The tags a safe load makes plain values of; any other (!!python/object, !!binary, !!set, !custom) is refused.
PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map")}
_RESOLVER = yaml.resolver.Resolver()


def _number(text: str):
    """The number a text says, as YAML 1.2 and Python read it, written plainly (1000, 31, 0.001)."""
    value = float(text) if re.search(r"[eE.]", text) else int(text.replace("_", ""), 0)
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _trap(event) -> str | None:
    """Why an unquoted scalar is read as another value than it shows (the fix included), or None."""
    if event.tag and event.tag not in PLAIN_TAGS and event.tag != "!":
        return (f"tag {event.tag.replace('tag:yaml.org,2002:', '!!')} is not read (a config is read with YAML's safe "
                "loader, which makes no objects); remove the tag and write the value plainly")  # fmt: skip
    if not isinstance(event, yaml.ScalarEvent) or event.style or not event.implicit[0] or event.tag:
        return None
    for pattern, how in TRAPS:
        if pattern.fullmatch(event.value):
            read = yaml.safe_load(event.value)
            return (f"{event.value} is read as {read} (YAML 1.1 reads {how}); write {read} if that is meant, "
                    f"else the number without it, or quote it ('{event.value}') for text")  # fmt: skip
    text = _RESOLVER.resolve(yaml.ScalarNode, event.value, (True, False)) == "tag:yaml.org,2002:str"
    for pattern, how in AS_TEXT if text else ():
        if pattern.fullmatch(event.value):
            return (f"{event.value} is read as the text {event.value!r} (YAML 1.1 reads {how}); write "
                    f"{_number(event.value)} for the number, or quote it for text")  # fmt: skip
    return None


def _key_trap(event) -> str | None:
    """Why an unquoted mapping key is not the name it shows (on, no, y, null, ~), or None."""
    if not isinstance(event, yaml.ScalarEvent) or event.style or event.tag:
        return None
    kind = _RESOLVER.resolve(yaml.ScalarNode, event.value, (True, False))
    if kind in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:null"):
        read = yaml.safe_load(event.value)
        what = "yes/no/on/off/true/false as booleans" if kind.endswith("bool") else "~, null and nothing as null"
        return (f"key {event.value or '(empty)'} is read as {read} (YAML 1.1 reads {what}), not as a name; quote it "
                f"('{event.value}')")  # fmt: skip
    return None


def _check_events(text: str) -> None:
    """The document's bounds, checked on its event stream before anything is built from it: nesting deeper than
    MAX_DEPTH (PyYAML's composer recurses once per level), an alias inside its own anchor (a value that contains
    itself, which every later walk would follow forever) and more than MAX_VALUES nodes once aliases are expanded
    (an alias bomb: the count of an anchor's subtree is added for each of its aliases)."""
    # open: [anchor, count at its start, children so far or None for a sequence, {key: line} of a mapping];
    # sizes: anchor -> values under it. A mapping's keys are not counted (every other child): the count is
    # check_document's, values only. A key given twice in one mapping is refused: YAML keeps the last silently.
    open_nodes, sizes, count = [], {}, 0
    for event in yaml.parse(text, Loader=LOADER):
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, start, _, _ = open_nodes.pop()
            if anchor:
                sizes[anchor] = count - start + 1
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue  # stream and document events
        parent = open_nodes[-1] if open_nodes else None
        key = parent is not None and parent[2] is not None and parent[2] % 2 == 0
        if parent is not None and parent[2] is not None:
            parent[2] += 1
        if isinstance(event, yaml.AliasEvent):
            if any(node[0] == event.anchor for node in open_nodes):
                raise _Refused(event.start_mark, f"alias *{event.anchor} is used inside its own anchor "
                               f"&{event.anchor}, a value that contains itself; write the value out without the alias")  # fmt: skip
            count += 0 if key else sizes.get(event.anchor, 0)  # an undefined alias is the YAML error the load names
        elif isinstance(event, yaml.ScalarEvent) or (event.tag and (why := _trap(event))):
            if not isinstance(event, yaml.ScalarEvent):
                raise _Refused(event.start_mark, why)
            count += 0 if key else 1
            if event.anchor:
                sizes[event.anchor] = 1
            if key and (why := _key_trap(event)) is not None:
                raise _Refused(event.start_mark, why)
            if key:
                here = (event.start_mark.line + 1, event.start_mark.column + 1)
                first = parent[3].setdefault(event.value, here)
                if first != here:
                    raise _Refused(event.start_mark, f"key {event.value!r} is given twice in one mapping (first at "
                                   f"line {first[0]}, column {first[1]}); YAML keeps only the last, silently: remove "
                                   "one")  # fmt: skip
            elif (why := _trap(event)) is not None:
                raise _Refused(event.start_mark, why)
        else:  # a collection starts
            count += 1
            if len(open_nodes) >= MAX_DEPTH:
                raise _Refused(event.start_mark, f"nested more than {MAX_DEPTH} levels deep; a config's values are a "
                               "few levels deep at most: remove the extra nesting")  # fmt: skip
            mapping = isinstance(event, yaml.MappingStartEvent)
            open_nodes.append([event.anchor, count, 0 if mapping else None, {} if mapping else None])
        if count > MAX_VALUES:
            raise _Refused(event.start_mark, f"more than {MAX_VALUES:,} values once its YAML aliases (*name) are "
                           "expanded; write the values out, or repeat fewer of them")  # fmt: skip


def _special(path: Path) -> str | None:
    """What a path that is not a regular file (or a folder, said by open) is: a FIFO, a device, a socket; None."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # missing or unreadable: open says which
    kinds = {stat.S_ISFIFO: "FIFO (named pipe)", stat.S_ISCHR: "character device", stat.S_ISBLK: "block device",
             stat.S_ISSOCK: "socket"}  # fmt: skip
    return next((name for test, name in kinds.items() if test(mode)), None)


def load_file(path: Path | str) -> dict:
    """A config file as a dict; ConfigError with one line naming the file and the fix when it is
    missing, unreadable, a directory, not UTF-8, too large, not YAML, nested too deep, holds a value that
    contains itself or a number Python cannot read, or is not a mapping."""
    path = Path(path)
    try:
        kind = _special(path)
        if kind:  # opened for reading, a FIFO without a writer would block: refused before it is opened
            raise ConfigError(f"{path}: is a {kind}, not a config file; pass the YAML file itself")
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_BYTES:,} bytes; a config holds settings, not data: "
                              "pass the config file itself")  # fmt: skip
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found; pass an existing file with --configfile") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file; pass the YAML file itself") from None
    except PermissionError:
        raise ConfigError(f"{path}: cannot be read (permission denied); make it readable (chmod +r)") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}); save the file as UTF-8") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e.strerror}); pass a readable YAML file") from None
    try:
        _check_events(text)
        raw = yaml.load(text, Loader=LOADER)  # noqa: S506 - a safe loader
    except _Refused as e:
        mark, what = e.args
        raise ConfigError(f"{path}: line {mark.line + 1}, column {mark.column + 1}: {what}") from None
    except yaml.YAMLError as e:
        if LOADER is not yaml.SafeLoader:  # PyYAML's own parser names the problem better ("found character '\t'")
            try:
                for _ in yaml.parse(text, Loader=yaml.SafeLoader):
                    pass
            except yaml.YAMLError as own:
                e = own
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = " ".join(str(getattr(e, "problem", None) or "not valid YAML").split())
        if "'\\t'" in what:  # PyYAML's words for a tab
            raise ConfigError(f"{path}: {where}a tab; YAML indents with spaces only: replace the tab by spaces") from None
        raise ConfigError(f"{path}: {where}{what}; fix the YAML syntax there") from None
    except ValueError as e:  # a value Python refuses to make, e.g. an integer of more than 4300 digits
        what = " ".join(re.split(r"[:;]", str(e))[0].split())[:120]  # its first clause: the rest names Python's fix
        raise ConfigError(f"{path}: {what}; give a shorter value") from None
    if raw is None:
        raise ConfigError(f"{path}: is empty (nothing but comments or blanks); write the config's keys: recipe, suites, "
                          "seeds, hardware, baseline")  # fmt: skip
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level is {type(raw).__name__}, not a mapping; start with keys like recipe:")
    return raw


def parse_override(entry: str) -> tuple[str, object]:
    """A `snakemake --config KEY=VALUE` entry with VALUE read as a config file's YAML is (snakemake reads a list's
    or mapping's items as strings: seeds=[0,1] would be ['0', '1']); ConfigError naming the entry otherwise."""
    key, _, text = entry.partition("=")
    try:
        _check_events(text)
        return key, yaml.load(text, Loader=LOADER)  # noqa: S506 - a safe loader
    except _Refused as e:
        raise ConfigError(f"--config {key}=...: {e.args[1]}") from None
    except (yaml.YAMLError, ValueError) as e:
        what = " ".join(str(getattr(e, "problem", None) or "not valid YAML").split())
        raise ConfigError(f"--config {key}=...: {what}; write the value as in the config file, e.g. "
                          f"{key}=[0, 1] or {key}='{{a: 1}}'") from None  # fmt: skip


def load_or_exit(path: Path | str) -> dict:
    """For the hwsweep commands: the config file as a dict, or the one-line error and exit non-zero."""
    try:
        return load_file(path)
    except ConfigError as e:
        sys.exit(f"hwsweep config error: {e}")
