"""Secrets never leave the process. The one rule of what counts as a secret, and the three things done with one:

* **masked** (`redact`, `redact_argv`, `mask_known`) in any text hwsweep says or writes: `http://***@host`,
  `?token=***`, `--api-key=***`, `HF_TOKEN=***`, `recipe.args.api_key: '***'`, `{api_key: ***}`;
* **sealed** (`seal`) where the config holds one (recipe.args, a command's items): the config, spec.json, records,
  the plan and the tracker params hold the placeholder `@@HWSWEEP_SECRET_<WHERE>@@` and the value is carried in the
  environment variable HWSWEEP_SECRET_<WHERE> of the process that read the config, which its jobs inherit;
* **unsealed** (`unseal`) in the argument vector of the user's command only, when that process is started.

What counts as a secret (one place; docs/safety.md states it):
  by name: a flag, argument or variable whose name has a word (split at -, _, ., camelCase) that is or ends in
    token, key, secret, password, passwd, pwd, auth, authorization, credential(s), signature (api_key, hf_token,
    --api-key, AWS_SECRET_ACCESS_KEY, clientSecret; not max_tokens, tokenizer, author) with a value that is not a
    number or a boolean (`key_dim: 64` is not a secret);
  by value, whatever the name: a URI's userinfo (`scheme://user:pass@host`, `scheme://token@host`), a query
    parameter named as above or `sig`, and the known token forms: hf_…, ghp_/gho_/ghu_/ghs_/ghr_…, github_pat_…,
    sk-…, AKIA…/ASIA… (AWS), xox?-… (Slack), glpat-…, AIza… (Google), npm_…, pypi-…, and a JSON web token eyJ….eyJ….
"""

from __future__ import annotations

import re

MASK = "***"
# The names a secret goes by in a query string (`sig` alone, as cloud stores sign URLs) and, upper case, in an
# environment variable; the word rule of `secret_name` is the general form.
SECRET_WORDS = r"token|key|secret|password|passwd|pwd|auth|signature|credential|session"
_NAME_ENDS = ("token", "key", "secret", "password", "passwd", "pwd", "auth", "authorization", "credential",
              "credentials", "signature")  # fmt: skip
_PREFIXED = (r"hf_[A-Za-z0-9]{8,}|gh[pousr]_[A-Za-z0-9]{8,}|github_pat_[A-Za-z0-9_]{8,}|sk-[A-Za-z0-9_-]{8,}"
             r"|(?:AKIA|ASIA)[0-9A-Z]{12,}|xox[abprs]-[A-Za-z0-9-]{8,}|glpat-[A-Za-z0-9_-]{8,}|AIza[0-9A-Za-z_-]{20,}"
             r"|npm_[A-Za-z0-9]{16,}|pypi-[A-Za-z0-9_-]{16,}|eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")  # fmt: skip
_USERINFO = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://(?P<v>[^\s/@'\"?#]+)@")
_QUERY = re.compile(rf"[?&;](?:sig|[A-Za-z0-9_.-]*(?:{SECRET_WORDS})[A-Za-z0-9_.-]*)=(?P<v>[^&#\s'\"]+)", re.I)
_TOKEN = re.compile(rf"(?<![A-Za-z0-9])(?P<v>{_PREFIXED})")
# name=value, name: 'value', --name value: the name is judged by secret_name.
_ASSIGNED = re.compile(r"(?<![\w.?&;-])-{0,2}(?P<n>[A-Za-z_][\w.-]*)=(?P<v>[^\s'\"&,;)\]}]+)")
_QUOTED = re.compile(r"(?P<n>[A-Za-z_][\w.-]*)['\"]?\s*[:=]\s*(?P<q>['\"])(?P<v>[^'\"]*)(?P=q)")
_COLON = re.compile(r"(?<![\w./-])(?P<n>[A-Za-z_][\w.-]*)\s*:\s+(?P<v>[^\s,'\"{}\[\]]+)")  # YAML's `api_key: value`
_SPACED = re.compile(r"(?<![\w-])--?(?P<n>[A-Za-z_][\w.-]*)\s+(?P<v>[^\s'\"-][^\s'\"]*)")
PLACEHOLDER = re.compile(r"@@(HWSWEEP_SECRET_[A-Z0-9_]+)@@")
PREFIX = "HWSWEEP_SECRET_"


class SecretMissing(RuntimeError):
    """A sealed secret whose variable is not in this process's environment: one line naming it."""


def secret_name(name: str) -> bool:
    """Whether a flag, argument or variable called `name` holds a secret (the module's rule); a dotted name (a
    config path, recipe.args.api_key) by its last part, so a file name (dup_key.yaml) is none."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", str(name).rsplit(".", 1)[-1])
    return any(w.endswith(_NAME_ENDS) for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w)


def _wordlike(value: str) -> bool:
    """An unquoted value after `name: ` that may be a secret rather than the first word of a sentence (a message
    about the field): 8 characters or more, or a digit in it."""
    return len(value) >= 8 or any(c.isdigit() for c in value)


def plain_value(value) -> bool:
    """A value no secret is: a number or a boolean (key_dim: 64, use_auth: true), or empty."""
    text = str(value).strip().lower()
    return text in ("", "true", "false", "none", "null") or re.fullmatch(r"[-+]?[\d_.]+(e[-+]?\d+)?", text) is not None


def spans(text: str) -> list[tuple[int, int]]:
    """Where the secrets in `text` are (start, end), in order, not overlapping."""
    found = [m.span("v") for rx in (_USERINFO, _QUERY, _TOKEN) for m in rx.finditer(text)]
    for rx in (_ASSIGNED, _QUOTED, _COLON, _SPACED):
        found += [m.span("v") for m in rx.finditer(text) if secret_name(m["n"]) and not plain_value(m["v"])
                  and (rx is not _COLON or _wordlike(m["v"]))]  # fmt: skip
    found = [s for s in sorted(set(found)) if s[1] > s[0] and not PLACEHOLDER.fullmatch(text[s[0]:s[1]])]
    merged: list[tuple[int, int]] = []
    for start, end in found:
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _replace(text: str, where: list[tuple[int, int]], by) -> str:
    out, last = [], 0
    for i, (start, end) in enumerate(where):
        out += [text[last:start], by(i, text[start:end])]
        last = end
    return "".join(out + [text[last:]])


def redact(text: str) -> str:
    """`text` with every secret the rule finds masked."""
    return _replace(text, spans(text), lambda i, v: MASK)


def _argv_spans(argv: list[str]) -> list[list[tuple[int, int]]]:
    """The secrets of each item of an argument vector: an item's own, and the whole item after a secret flag
    given alone (`--hf_token hf_…`, `--password pw`)."""
    out = []
    for i, item in enumerate(argv):
        before = argv[i - 1] if i else ""
        flag = before.startswith("-") and "=" not in before and secret_name(before.lstrip("-"))
        whole = flag and not item.startswith("-") and not plain_value(item) and not PLACEHOLDER.fullmatch(item)
        out.append([(0, len(item))] if whole and item else spans(item))
    return out


def redact_argv(argv: list[str]) -> list[str]:
    """An argument vector as it may be shown: each secret masked."""
    return [_replace(item, where, lambda i, v: MASK) for item, where in zip(argv, _argv_spans(list(argv)))]


def variable(where: str) -> str:
    """The environment variable that carries the secret found at `where` (a config path)."""
    return PREFIX + re.sub(r"[^A-Z0-9]+", "_", where.upper()).strip("_")


def seal(value: str, where: str, carried: dict, whole: bool = False) -> str:
    """`value` with each secret in it replaced by a placeholder; the secrets go into `carried` (variable -> value).
    `whole`: the value is a secret as a whole (its name says so)."""
    found = [(0, len(value))] if whole and not plain_value(value) and not PLACEHOLDER.fullmatch(value) else spans(value)

    def hold(i: int, secret: str) -> str:
        name = variable(where) + (f"_{i + 1}" if i else "")
        carried[name] = secret
        return f"@@{name}@@"

    return _replace(value, found, hold)


def seal_argv(argv: list[str], where: str, carried: dict) -> list[str]:
    """An argument vector with its secrets sealed (the item after a secret flag given alone as a whole)."""
    found = _argv_spans(list(argv))
    return [seal(item, f"{where}.{i}", carried, whole=found[i] == [(0, len(item))] and bool(item))
            if found[i] else item for i, item in enumerate(argv)]  # fmt: skip


def unseal(argv: list[str], env) -> list[str]:
    """The argument vector the user's command is started with: each placeholder replaced by its variable's value
    from `env`; SecretMissing names the first that is not set."""

    def value(m: re.Match) -> str:
        if m[1] not in env:
            raise SecretMissing(f"{m[1]} is not set: a secret of the config travels in the environment, never in "
                                "spec.json; start the run through snakemake, or export it")  # fmt: skip
        return env[m[1]]

    return [PLACEHOLDER.sub(value, item) for item in argv]


def known(env) -> list[str]:
    """The secret values of an environment: the sealed ones, and those of variables a secret's name (WANDB_API_KEY,
    HF_TOKEN), longest first; short values (under 6 characters) are left, as masking them would garble text."""
    values = {v for k, v in env.items() if (k.startswith(PREFIX) or secret_name(k)) and len(v) >= 6 and not plain_value(v)}
    return sorted(values, key=len, reverse=True)


def mask_known(text: str, values: list[str]) -> str:
    """`text` with each of `values` (known secrets) and whatever else the rule finds masked: a line of the user's
    command's output, which may echo its arguments or environment."""
    for v in values:
        if v in text:
            text = text.replace(v, MASK)
    return redact(text)


def secret_query(query: str) -> str | None:
    """The name of the first query parameter of a URI that holds a secret, or None."""
    for part in re.split(r"[&;]", query):
        name = part.split("=", 1)[0]
        if (name.lower() == "sig" or re.search(SECRET_WORDS, name, re.IGNORECASE)) and "=" in part:
            return name
    return None
