"""The configuration every job of one snakemake run computes from: the one its main process resolved.

Snakemake re-reads the Snakefile in each job and passes it --configfiles and --config, but not
--replace-workflow-config (snakemake 9), so a job would merge config/config.yaml back in and compute
another matrix. The main process therefore writes the config it resolved to
.snakemake/hwsweep/config/<key>.json, the key a hash of the flags every job is given, and a job reads
that file back instead of its own merge. Carrying the replacement flag instead would still leave a
job exposed to anything else snakemake does not forward; the file is exactly what the main process used.
"""

from __future__ import annotations

import json
from pathlib import Path

from hwsweep.contracts import io
from hwsweep.contracts.spec import sha256

FOLDER = Path(".snakemake", "hwsweep", "config")


class MissingConfig(RuntimeError):
    """A job found no config written by its main process: one line saying what to do."""


def key(configfiles, config_args) -> str:
    """What a job and its main process share: the --configfiles and --config strings, as given."""
    return sha256(json.dumps([[str(f) for f in configfiles or []], list(config_args or [])]))[:16]


def path_of(configfiles, config_args, root: Path | str = ".") -> Path:
    return Path(root) / FOLDER / f"{key(configfiles, config_args)}.json"


def write(config: dict, configfiles, config_args, root: Path | str = ".") -> Path:
    """In the main process, once the config is valid: write it for the jobs (unchanged files stay untouched)."""
    path = path_of(configfiles, config_args, root)
    text = json.dumps(config, indent=1, sort_keys=True) + "\n"
    if not path.is_file() or path.read_text() != text:
        io.write_text(path, text)
    return path


def read_into(config: dict, configfiles, config_args, root: Path | str = ".") -> Path:
    """In a job: replace `config`'s contents with what its main process wrote (in place: snakemake's
    scripts read the same dict)."""
    path = path_of(configfiles, config_args, root)
    if not path.is_file():
        raise MissingConfig(f"{path}: the config the main snakemake resolved is missing (was .snakemake removed "
                            "while jobs ran?); rerun snakemake")  # fmt: skip
    config.clear()
    config.update(json.loads(path.read_text()))
    return path
