"""The docs site's generated pages: the configuration reference from hwsweep/schemas/config.schema.yaml (its
descriptions and examples are the single source), the CLI reference from the argparse help `hwsweep` prints, and
the runtime API reference from hwsweep.runtime's docstrings. mkdocs builds them on every build (tools/mkdocs_hooks.py),
so none is a stored copy that can drift; tests/docs/test_docs.py checks every key has a description and an example,
and that every example, merged into config/config.yaml, validates against the schema."""

from __future__ import annotations

import contextlib
import copy
import inspect
import io
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "hwsweep/schemas/config.schema.yaml"
# The shipped configs an example is merged into: it must validate in one (a puzzle family's keys need a puzzle task).
BASE_CONFIGS = (REPO / "config/config.yaml", REPO / "config/hrm_cpu.yaml")
# A marker on the line before a docs block (tests/docs_blocks.py says what each means; mkdocs_hooks.py shows some).
MARKER = re.compile(r"^<!-- (not-run|parse-only|file|yaml-under|stands-in|invalid): (.+?) -->$")
# The name an example gives an entry of a named map (suites, hardware, metrics, compare): the config's own names
# where it has them, so an example reads like the config it goes into.
ENTRY_NAMES = {"suites": "width", "hardware": "gpu4", "metrics": "val_acc", "compare": "hrm_vs_transformer",
               "mfu": "H100-80GB"}  # fmt: skip


@dataclass
class Key:
    """One configuration key as a user writes it: `path` is its place in the config (`hardware.<name>.nodes`;
    `[]` an item of a list; a task's or model family's own key carries that `variant`, e.g. recipe.task sudoku)."""

    path: tuple[str, ...]
    schema: dict
    section: bool = False  # holds keys of its own (documented below it)
    variant: tuple[tuple[str, ...], str] | None = None
    same_as: str | None = None  # the same schema is documented under this key already
    needs: tuple[str, ...] = ()  # keys its mapping must then also have (evaluation's command)
    children: list["Key"] = field(default_factory=list)

    @property
    def name(self) -> str:
        return ".".join(self.path).replace(".[]", "[]")


def deref(schema: dict, root: dict) -> dict:
    """A subschema with its local $ref resolved (its own keys win), as hwsweep.plan.config.schema reads it."""
    from hwsweep.plan.config.schema import _deref

    return _deref(schema, root)


def _object_branches(s: dict, root: dict) -> list[dict]:
    """The mapping forms of a key that may take several (tracking: a list or a mapping; evaluation)."""
    return [b for b in (deref(b, root) for b in s.get("anyOf", []) + s.get("oneOf", [])) if "properties" in b]


def walk(schema: dict | None = None) -> list[Key]:
    """Every key of the configuration, in the schema's order, nested as the config is."""
    root = schema or yaml.safe_load(SCHEMA.read_text())
    seen: dict[str, str] = {}  # a $ref already documented as a section -> where

    def visit(sub: dict, path: tuple[str, ...], variant=None) -> Key:
        ref = sub.get("$ref")
        s = deref(sub, root)
        key = Key(path, s, variant=variant)
        if ref in seen and ("properties" in deref({"$ref": ref}, root) or "items" in s):
            key.same_as = seen[ref]
            return key
        children: list[Key] = []
        for name, child in s.get("properties", {}).items():
            children.append(visit(child, path + (name,), variant))
        for branch in s.get("allOf", []):  # a task's or model family's own keys: if name is X, then $defs/.../X
            then = branch.get("then", {})
            if "$ref" not in then:
                continue
            kind = branch["if"]["properties"]["name"]["const"]
            for name, child in deref(then, root)["properties"].items():
                if name != "name":
                    children.append(visit(child, path + (name,), (path, kind)))
        for b in _object_branches(s, root):
            for name, child in b["properties"].items():
                children.append(visit(child, path + (name,), variant))
                children[-1].needs = tuple(r for r in b.get("required", []) if r != name)
        extra = s.get("additionalProperties")
        if isinstance(extra, dict) and "properties" in deref(extra, root):
            children += [visit(extra, path + ("<name>",), variant)]
        items = s.get("items")
        if s.get("type") == "array" and isinstance(items, dict) and "properties" in deref(items, root):
            children += [visit(c, path + ("[]", n), variant) for n, c in deref(items, root)["properties"].items()]
        key.children = children
        key.section = bool(children)
        if ref and key.section:
            seen.setdefault(ref, ".".join(path))
        return key

    top = visit(root, ())
    return top.children


def flat(keys: list[Key]) -> list[Key]:
    out = []
    for k in keys:
        out.append(k)
        out += flat(k.children)
    return out


def example_of(key: Key):
    """The key's example: the schema's first `examples` entry, or None where it has none."""
    examples = key.schema.get("examples")
    return copy.deepcopy(examples[0]) if examples else None


def problems(keys: list[Key]) -> list[str]:
    """What a key lacks: every key needs a description, and every key a user sets directly (not a section that
    only holds other keys, whose example is its keys') needs an example."""
    out = []
    for k in flat(keys):
        if not str(k.schema.get("description", "")).strip():
            out.append(f"{k.name}: no description in {SCHEMA.relative_to(REPO)}")
        if not k.section and not k.same_as and not k.schema.get("examples"):
            out.append(f"{k.name}: no examples in {SCHEMA.relative_to(REPO)}")
    return out


def _entry_required(key: Key, entry: tuple[str, ...], keys: list[Key]) -> dict:
    """An entry of a named map or an item of a list made valid on its own: its required keys at their examples."""
    by_path = {k.path: k for k in flat(keys)}
    if entry[-1] == "<name>":
        required = by_path[entry].schema.get("required", [])
    else:  # a list's item: the list's items schema
        required = by_path[entry[:-1]].schema["items"].get("required", [])
    return {name: example_of(by_path[entry + (name,)]) for name in required if name != key.path[-1]}


def fragment(key: Key, value, keys: list[Key]) -> dict:
    """The smallest config fragment that sets `key` to `value`: a named entry gets a name (ENTRY_NAMES) and its
    required keys, a list one item; a task's or model family's own key comes with its name."""
    out: dict = {}
    node = out
    path = key.path
    for i, part in enumerate(path):
        if part in ("<name>", "[]"):
            continue
        if i == len(path) - 1:
            by_path = {k.path: k for k in flat(keys)}
            node.update({need: example_of(by_path[path[:-1] + (need,)]) for need in key.needs})
            node[part] = value
            break
        nxt = path[i + 1]
        if nxt == "<name>":
            entry = _entry_required(key, path[: i + 2], keys)
            node[part] = {ENTRY_NAMES.get(part, "example"): entry}
            node = entry
        elif nxt == "[]":
            item = _entry_required(key, path[: i + 2], keys)
            node[part] = [item]
            node = item
        else:
            node = node.setdefault(part, {})
            if key.variant and path[: i + 1] == key.variant[0]:
                node["name"] = key.variant[1]
    return out


def validate_examples(keys: list[Key] | None = None, schema: dict | None = None) -> list[str]:
    """Every example, as the fragment that sets it merged into a shipped config (BASE_CONFIGS), checked against the
    schema with hwsweep's own validator: the errors, one line per key."""
    from hwsweep.plan.config import Validator
    from hwsweep.plan.config.suites import _merge

    root = schema or yaml.safe_load(SCHEMA.read_text())
    keys = keys or walk(root)
    bases = [yaml.safe_load(path.read_text()) for path in BASE_CONFIGS]
    validator = Validator(root)

    def errors(frags: list[dict]) -> list:
        """The first base's errors with every fragment merged in, or none where any base takes them."""
        found = []
        for base in bases:
            config = base
            for frag in frags:
                config = _merge(config, frag)
            found.append(sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path)))
        return [] if not all(found) else found[0]

    # Examples that can stand in one config are validated together (a task's or model family's own keys with its
    # other keys; a section's whole-section example alone); a group that fails is validated key by key, to name it.
    groups: dict = {}
    for k in flat(keys):
        value = example_of(k)
        if k.same_as or value is None:
            continue
        groups.setdefault(("section", k.name) if k.section else k.variant, []).append((k, fragment(k, value, keys)))
    def failing(members: list) -> list[str]:  # halved until each failing example is named alone
        found = errors([frag for _, frag in members])
        if not found:
            return []
        if len(members) == 1:
            k = members[0][0]
            return [f"{k.name}: example {example_of(k)!r} does not validate: {found[0].message}"]
        half = len(members) // 2
        named = failing(members[:half]) + failing(members[half:])
        return named or [f"{', '.join(k.name for k, _ in members)}: their examples do not validate together: "
                         f"{found[0].message}"]  # fmt: skip

    return [line for members in groups.values() for line in failing(members)]


# ---- rendering ----


def _type(s: dict) -> str:
    if "const" in s:
        return f"`{s['const']}`"
    t = s.get("type")
    if isinstance(t, list):
        return " or ".join(t)
    if t:
        if t == "array" and isinstance(s.get("items"), dict) and s["items"].get("type"):
            return f"list of {s['items']['type']}"
        if t == "object" and isinstance(s.get("additionalProperties"), dict) and "properties" not in s:
            return "mapping"
        return t
    forms = [b.get("type") or (f"`{b['const']}`" if "const" in b else None) for b in s.get("anyOf", [])]
    return " or ".join(str(f) for f in forms if f) or "any"


def _allowed(s: dict) -> str:
    if "enum" in s:
        return ", ".join(f"`{v}`" for v in s["enum"])
    bounds = []
    for word, key in (("≥", "minimum"), (">", "exclusiveMinimum"), ("≤", "maximum"), ("<", "exclusiveMaximum")):
        if key in s:
            bounds.append(f"{word} {s[key]}")
    for word, key in (("at least", "minItems"), ("at most", "maxItems")):
        if key in s:
            bounds.append(f"{word} {s[key]} items")
    if "pattern" in s:
        bounds.append(f"matches `{s['pattern']}`")
    for b in s.get("anyOf", []):
        if "const" in b:
            bounds.append(f"`{b['const']}`")
        elif "enum" in b:
            bounds.append(", ".join(f"`{v}`" for v in b["enum"]))
    return "; ".join(bounds)


def _yaml(d) -> str:
    return yaml.safe_dump(d, sort_keys=False, default_flow_style=None, allow_unicode=True, width=100).rstrip()


def _anchor(name: str, variant: str | None = None) -> str:
    """The heading's id (set explicitly: keys hold '<', '>' and '.', which toc's slugs drop)."""
    return re.sub(r"[^a-z0-9_]+", "-", f"{name} {variant or ''}".lower()).strip("-")


def config_reference() -> str:
    root = yaml.safe_load(SCHEMA.read_text())
    keys = walk(root)
    lines = [
        "# Configuration reference",
        "",
        "Generated on every build from `hwsweep/schemas/config.schema.yaml`, the file hwsweep validates a config "
        "against: its descriptions are the only copy of what a key means. Every example below is the smallest "
        "fragment that sets the key; merged into `config/config.yaml` (a puzzle family's keys: `config/hrm_cpu.yaml`) "
        "it validates (the tests check each). "
        "A `<name>` is an entry's name, which you choose (letters, digits, `_` and `-`).",
        "",
        "Check a config of your own before anything runs: `hwsweep plan --configfile my.yaml` names a wrong key "
        "or value in one line, with the fix.",
        "",
        "Sections: " + ", ".join(f"[`{k.name}`](#{_anchor(k.name)})" for k in keys) + ".",
        "",
    ]
    required = set(root.get("required", []))
    from hwsweep.plan.config.schema import family_defaults

    families = {("recipe", *where): by_family for where, by_family in family_defaults(root).items()}
    for top in keys:
        lines += [f"## `{top.name}` {{#{_anchor(top.name)}}}", ""]
        lines += _entry(top, keys, heading=False, required=top.path[0] in required, families=families)
        for k in flat(top.children):
            variant = k.variant[1] if k.variant else None
            lines += [f"### `{k.name}`" + (f" ({variant})" if variant else "") + f" {{#{_anchor(k.name, variant)}}}", ""]
            lines += _entry(k, keys, heading=True, families=families)
    return "\n".join(lines) + "\n"


def _entry(k: Key, keys: list[Key], heading: bool, required: bool = False, families: dict | None = None) -> list[str]:
    s = k.schema
    out = [" ".join(str(s.get("description", "")).split()), ""]
    facts = [f"**Type:** {_type(s)}"]
    if required:
        facts.append("**Required**")
    if "default" in s:
        facts.append(f"**Default:** `{json.dumps(s['default'])}`")
    for family, default in (families or {}).get(k.path, {}).items():  # a model family's own (the schema's allOf)
        facts.append(f"**Default with** `recipe.model.name: {family}`**:** `{json.dumps(default)}`")
    allowed = _allowed(s)
    if allowed:
        facts.append(f"**Allowed:** {allowed}")
    if k.variant:
        facts.append(f"**Only with** `{'.'.join(k.variant[0])}.name: {k.variant[1]}`")
    out += [" · ".join(facts), ""]
    if k.same_as:
        out += [f"Takes the same keys as [`{k.same_as}`](#{_anchor(k.same_as)}).", ""]
    elif k.section:
        names = ", ".join(dict.fromkeys(f"`{c.path[-1]}`" for c in k.children if c.path[-1] != "<name>"))
        if names:
            out += [f"Keys: {names}.", ""]
    value = example_of(k)
    if value is not None:
        out += ["```yaml", _yaml(fragment(k, value, keys)), "```", ""]
    return out


def cli_reference() -> str:
    """`hwsweep --help` and every subcommand's, as argparse prints them (at 100 columns)."""
    from hwsweep import cli

    def helptext(argv: list[str]) -> str:
        buf = io.StringIO()
        old = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = "100"
        try:
            with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
                cli.run([*argv, "--help"])
        finally:
            if old is None:
                os.environ.pop("COLUMNS", None)
            else:
                os.environ["COLUMNS"] = old
        return buf.getvalue().rstrip()

    def commands(text: str) -> list[str]:
        # argparse lists a parser's subcommands as {a,b,c} first under "positional arguments:" (an option's choices
        # appear under "options:")
        found = re.search(r"^positional arguments:\n\s+\{([a-z,_-]+)\}", text, re.M)
        return found.group(1).split(",") if found else []

    lines = ["# CLI reference", "",
             "Generated on every build from the `hwsweep` command's own `--help` (argparse), so it is what the "
             "installed command prints.", "", "## `hwsweep`", "", "```text", helptext([]), "```", ""]  # fmt: skip
    todo = [[c] for c in commands(helptext([]))]
    while todo:
        argv = todo.pop(0)
        text = helptext(argv)
        if not text.startswith(f"usage: hwsweep {' '.join(argv)} "):
            continue  # a positional's choices ({slurm}), not a subcommand: its help is its parent's
        lines += [f"## `hwsweep {' '.join(argv)}`", "", "```text", text, "```", ""]
        todo = [argv + [c] for c in commands(text)] + todo
    return "\n".join(lines) + "\n"


def api_reference() -> str:
    """hwsweep.runtime's public functions and classes with their signatures and docstrings."""
    from hwsweep import runtime

    lines = ["# Runtime API reference", "",
             "Generated on every build from the docstrings of `hwsweep.runtime` (the module a training script "
             "imports: `from hwsweep import runtime`). The guide with a whole script is "
             "[Your own training script](../own_script.md#2-the-runtime-api).", ""]  # fmt: skip
    lines += [inspect.getdoc(runtime) or "", ""]
    for name, obj in vars(runtime).items():
        if name.startswith("_") or not _defined_in(obj, runtime.__name__):
            continue
        if inspect.isfunction(obj):
            lines += _api_entry(f"runtime.{name}", obj, 2)
        elif inspect.isclass(obj):
            lines += _api_entry(f"runtime.{name}", obj, 2, signature=False)
            for member, value in _members(obj, runtime.__name__):
                if member.startswith("_") or not (inspect.isfunction(value) or isinstance(value, property)):
                    continue
                lines += _api_entry(f"{name}.{member}", value, 3, signature=inspect.isfunction(value))
    return "\n".join(lines) + "\n"


def _defined_in(obj, package: str) -> bool:
    """Whether `obj` was defined in `package` or one of its modules (hwsweep.runtime is a package)."""
    module = getattr(obj, "__module__", None) or ""
    return module == package or module.startswith(package + ".")


def _members(cls, package: str) -> list[tuple[str, object]]:
    """A class's members in the order they are defined, its own first, then those of its bases from `package`
    (Run's parts are mixins of it, one per module), each name once."""
    seen = {}
    for klass in cls.__mro__:
        if _defined_in(klass, package):
            for member, value in vars(klass).items():
                seen.setdefault(member, value)
    return list(seen.items())


def _api_entry(title: str, obj, level: int, signature: bool = True) -> list[str]:
    sig = ""
    if signature:
        with contextlib.suppress(TypeError, ValueError):
            sig = str(inspect.signature(obj))
    doc = inspect.getdoc(obj) or "(no docstring)"
    return [f"{'#' * level} `{title}{sig}`", "", doc, ""]
