"""The config's `tracking:` block: which trackers (TensorBoard, MLflow, Weights & Biases) see every run live,
and the identity a run has there. Torch-free and client-free: the planner validates it,
each run's folder carries it in its own file (not in spec.json: what is watched does not change what trains),
hwsweep.run.tracking feeds the trackers. Secrets are never part of it: a W&B key or an MLflow password is read
by the trackers' clients from the environment (WANDB_API_KEY, MLFLOW_TRACKING_USERNAME/PASSWORD)."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from hwsweep.contracts import io, secrets
from hwsweep.contracts.spec import TRACKING_FILE
from hwsweep.contracts.typed import Typed

BACKENDS = ("tensorboard", "mlflow", "wandb")
MLFLOW_STORE = "results/mlruns"  # the local default: a file store, nothing to start
# Schemes MLflow's client takes as a tracking URI (a plain folder is a file store too).
MLFLOW_SCHEMES = ("file", "http", "https", "sqlite", "postgresql", "mysql", "mssql", "databricks")


@dataclass(frozen=True)
class MlflowConfig(Typed):
    uri: str | None = None  # None: the local file store MLFLOW_STORE


@dataclass(frozen=True)
class WandbConfig(Typed):
    project: str | None = None
    entity: str | None = None
    mode: str = "auto"  # auto (online with WANDB_API_KEY set, else offline) | online | offline


@dataclass(frozen=True)
class TrackingConfig(Typed):
    """hwsweep/schemas/config.schema.yaml has the descriptions."""

    backends: list = field(default_factory=list)
    mlflow: MlflowConfig = MlflowConfig()
    wandb: WandbConfig = WandbConfig()
    queue_size: int = 10000
    system_every: float = 10.0
    close_timeout: float = 60.0  # a job's end gives up on a tracker that took nothing for this long
    close_limit: float = 600.0  # ... and waits at most this long in all, while trackers still take rows

    @property
    def on(self) -> bool:
        return bool(self.backends)

    @classmethod
    def of_run(cls, run_dir) -> "TrackingConfig":
        """The trackers of the run in `run_dir` (its TRACKING_FILE); none when the file is missing (a spec
        launched by hand) or unreadable: a tracker never fails a run, so that is one warning line."""
        path = Path(run_dir, TRACKING_FILE)
        if not path.is_file():
            return cls()
        try:
            return cls.from_dict(json.loads(path.read_text()), str(path))
        except (ValueError, TypeError, OSError) as e:
            print(f"hwsweep: warning: tracking: {path} is unreadable ({e}); this run is not tracked; delete it "
                  "and rerun snakemake to rewrite it", file=sys.stderr)  # fmt: skip
            return cls()


def _text(config: TrackingConfig) -> str:
    """The TRACKING_FILE text of `config`, made once per config (every run of a sweep asks while its DAG is built)."""
    if id(config) not in _TEXTS:
        _TEXTS[id(config)] = (config, json.dumps(config.to_dict(), sort_keys=True) + "\n")
    return _TEXTS[id(config)][1]


_TEXTS: dict[int, tuple] = {}  # id -> (the config, kept alive so its id names no other, its text)


def refresh_run_file(run_dir, config: TrackingConfig, dry_run: bool = False) -> bool:
    """Make the run's TRACKING_FILE hold `config` (dry_run: write nothing); whether a file there held another
    block (the config's tracking changed since the run was started)."""
    path = Path(run_dir, TRACKING_FILE)
    text = _text(config)
    try:
        held = path.read_text()
    except (OSError, UnicodeDecodeError):
        held = None
    if held != text and not dry_run:
        io.write_text(path, text)
    return held is not None and held != text


def uri_problem(uri: str) -> str | None:
    """Why `uri` is not an MLflow tracking URI (a phrase with the fix), or None. Checked as written, at planning:
    no server is asked (a server down then is a warning of the run, not a refused config)."""
    fix = "use http://host:5000, sqlite:///path/to/file.db, file:///path/to/folder or a folder"
    if not uri.strip():
        return "is empty; leave it out for the local store results/mlruns"
    if any(c.isspace() or not c.isprintable() for c in uri):
        return f"holds a space or a control character; {fix}"
    parts = urlsplit(uri)
    if not parts.scheme:  # a folder: MLflow's file store there; a name with URI syntax in it is a mistyped URI
        odd = sorted(set(re.sub(r"[\w.+@,=/-]", "", uri)))
        return f"is neither a URI nor a plain folder (it holds {''.join(odd)!r}); {fix}" if odd else None
    if parts.scheme not in MLFLOW_SCHEMES:
        return f"has scheme {parts.scheme!r}, which MLflow does not take; {fix}"
    if parts.username or parts.password:
        return ("holds credentials; remove them and set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD "
                "in the environment instead")  # fmt: skip
    if (name := secrets.secret_query(parts.query)) is not None:
        return (f"holds a secret in its query string ({name}={secrets.MASK}); remove it and set "
                "MLFLOW_TRACKING_TOKEN in the environment instead")  # fmt: skip
    try:
        parts.port  # raises on a port that is not a number in range
    except ValueError:
        return f"has a port that is not a number from 0 to 65535; {fix}"
    if parts.scheme in ("http", "https", "postgresql", "mysql", "mssql") and not parts.hostname:
        return f"names no host; use {parts.scheme}://host:port" + ("" if parts.scheme.startswith("http") else "/database")
    if parts.scheme in ("file", "sqlite"):
        if parts.netloc and parts.netloc != "localhost":
            return f"names host {parts.netloc!r}; a {parts.scheme} URI is on this machine: {parts.scheme}:///path (three slashes)"
        if parts.path.strip("/") == "":
            return f"names no path; {fix}"
    return None


def config_problem(config: TrackingConfig) -> str | None:
    """The first problem of a tracking block as one line naming the field and the fix, or None."""
    for name in config.backends:
        if name not in BACKENDS:
            return f"tracking.backends: {name!r} is not a tracker; use {', '.join(BACKENDS)}"
    if len(set(config.backends)) != len(config.backends):
        return "tracking.backends: a tracker is named twice; name each once"
    if config.mlflow.uri is not None and "mlflow" in config.backends:
        problem = uri_problem(config.mlflow.uri)
        if problem:
            return f"tracking.mlflow.uri: {secrets.redact(repr(config.mlflow.uri))} {problem}"
    if "wandb" in config.backends and not config.wandb.project:
        return "tracking.wandb.project: W&B needs a project; add tracking: {wandb: {project: NAME}}"
    return None


def rows_text(n: int) -> str:
    """A count of rows as the warnings and `status` say it."""
    return f"{n} row" if n == 1 else f"{n} rows"


def delivery_problem(status: dict | None) -> str:
    """What a record's `tracking` (train.json's or eval.json's) says went wrong, one phrase per backend that did
    not take every row it was given ("" when all did, or tracking was off): `status` shows it."""
    out = []
    for name, b in ((status or {}).get("backends") or {}).items():
        if isinstance(b, str):  # a record of an earlier hwsweep: "ok" or why the backend failed
            b = {"state": "ok"} if b == "ok" else {"state": "failed", "why": b}
        lost = [f"{rows_text(b[k])} {k}" for k in ("dropped", "undelivered") if b.get(k)]
        if b.get("state") != "ok":
            out.append(f"{name} {b.get('state')}" + (f" ({b['why']})" if b.get("why") else "") + "".join(f", {x}" for x in lost))
        elif lost:
            out.append(f"{name}: " + ", ".join(lost))
    return "; ".join(out)


def run_id(suite: str, variant: str, hardware: str, seed: int) -> str:
    """The run's id in every tracker: derived from its identity, so a resumed run (the same identity) continues
    the same tracked run. Lower-case hex: valid as a W&B id and an MLflow tag."""
    return hashlib.sha256(f"{suite}/{variant}/{hardware}/seed{seed}".encode()).hexdigest()[:16]


def aggregate_id(suite: str) -> str:
    """The id of a suite's tables in the trackers (one tracked 'run' per suite)."""
    return hashlib.sha256(f"{suite}/aggregate".encode()).hexdigest()[:16]
