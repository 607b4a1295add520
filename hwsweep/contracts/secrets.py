"""Secrets never leave the process: the credentials of a URI (`http://user:pass@host` -> `http://***@host`), a
secret in its query string (`?token=…` -> `?token=***`) and a secret-named variable's value (`WANDB_API_KEY=…`)
are masked in any text hwsweep says or writes about a config. One function, applied where messages are made."""

from __future__ import annotations

import re

MASK = "***"
# The names a secret goes by: in a query string (any case; `sig` alone, as cloud stores sign URLs), and in an
# environment variable (upper case, as such variables are written: WANDB_API_KEY, HF_TOKEN, MLFLOW_TRACKING_PASSWORD).
SECRET_WORDS = r"token|key|secret|password|passwd|pwd|auth|signature|credential|session"
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^\s/@'\"]+@")
_QUERY = re.compile(rf"([?&;](?:sig|[A-Za-z0-9_.-]*(?:{SECRET_WORDS})[A-Za-z0-9_.-]*)=)[^&#\s'\"]+", re.IGNORECASE)
_VARIABLE = re.compile(r"(?<![?&;A-Za-z0-9_.-])([A-Z0-9_]*(?:TOKEN|KEY|SECRET|PASSWORD|PASSWD|PWD|AUTH|CREDENTIAL)"
                       r"[A-Z0-9_]*=)[^\s'\"]+")  # fmt: skip


def redact(text: str) -> str:
    """`text` with every URI's credentials, secret query values and secret-named variables' values masked."""
    text = _USERINFO.sub(rf"\1{MASK}@", text)
    text = _QUERY.sub(rf"\1{MASK}", text)
    return _VARIABLE.sub(rf"\1{MASK}", text)


def secret_query(query: str) -> str | None:
    """The name of the first query parameter of a URI that holds a secret, or None."""
    for part in re.split(r"[&;]", query):
        name = part.split("=", 1)[0]
        if (name.lower() == "sig" or re.search(SECRET_WORDS, name, re.IGNORECASE)) and "=" in part:
            return name
    return None
