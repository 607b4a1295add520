"""The config's secrets sealed before anything reads it (hwsweep.contracts.secrets): in recipe.args (the config's
and each suite's overrides), in trainer.command, trainer.resume.args, trainer.env and evaluation.command. Each is replaced in
place by a placeholder and carried in this process's environment, which snakemake's jobs inherit; the config the
main process shares with its jobs, spec.json, the records, the plan and the trackers hold the placeholder, and
only the user's command receives the value (hwsweep.run.runner, hwsweep.run.launch)."""

from __future__ import annotations

import os

from hwsweep.contracts import secrets
from hwsweep.plan.config.wording import ConfigError


def seal_config(raw, environ=None) -> dict:
    """Seal `raw`'s secrets in place; put them into `environ` (default os.environ) and return them."""
    carried: dict = {}
    if not isinstance(raw, dict):
        return carried
    for section in ("trainer", "evaluation"):
        block = raw.get(section)
        if not isinstance(block, dict):
            continue
        _argv(block, "command", f"{section}.command", carried)
        if isinstance(block.get("resume"), dict):
            _argv(block["resume"], "args", f"{section}.resume.args", carried)
        if section == "trainer":
            _args(block, "trainer.env", carried, key="env")
    if isinstance(raw.get("recipe"), dict):
        _args(raw["recipe"], "recipe.args", carried)
    for suite, body in (raw.get("suites") or {}).items() if isinstance(raw.get("suites"), dict) else ():
        if not isinstance(body, dict):
            continue
        if isinstance(body.get("overrides"), dict):
            _args(body["overrides"], f"suites.{suite}.overrides.args", carried)
        for key, values in (body.get("sweep") or {}).items() if isinstance(body.get("sweep"), dict) else ():
            named = any(secrets.secret_name(k.split(".")[-1]) for k in str(key).split(",") if k.startswith("args."))
            items = values if isinstance(values, list) else [values]
            if any(isinstance(v, str) and (secrets.spans(v) or named and not secrets.plain_value(v)) for v in items):
                raise ConfigError(f"suites.{suite}.sweep.{key}: is a secret, and swept values name the variants' "
                                  "folders: give it once in recipe.args (or the suite's overrides.args) instead")  # fmt: skip
    (os.environ if environ is None else environ).update(carried)
    return carried


def _argv(block: dict, key: str, where: str, carried: dict) -> None:
    value = block.get(key)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        block[key] = secrets.seal_argv(value, where, carried)


def _args(recipe: dict, where: str, carried: dict, key: str = "args") -> None:
    """A recipe's script settings (or trainer.env's variables): a value is sealed as a whole under a secret's
    name, else what it holds."""
    args = recipe.get(key)
    if not isinstance(args, dict):
        return
    for name, value in args.items():
        if isinstance(value, str):
            args[name] = secrets.seal(value, f"{where}.{name}", carried, whole=secrets.secret_name(str(name)))
