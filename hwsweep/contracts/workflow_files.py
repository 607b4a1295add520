"""Where the workflow's own files are: the Snakefile, workflow/ (rules, scripts, report captions), profiles/ and
the config templates. A built wheel carries them in hwsweep/_workflow (pyproject.toml maps the checkout's root
there, same layout); an editable install of a clone uses the clone's own, so a clone works as it always did.
Everything else finds them here: `hwsweep workflow`, `hwsweep init` and `hwsweep profile install`."""

from __future__ import annotations

from pathlib import Path

PACKAGED = Path(__file__).resolve().parents[1] / "_workflow"  # inside an installed wheel
CHECKOUT = Path(__file__).resolve().parents[2]  # the clone this package is imported from (editable install)


class MissingWorkflow(RuntimeError):
    """This installation of hwsweep has no workflow files (a damaged install, or a wheel built without them)."""


def root() -> Path:
    """The folder holding Snakefile, workflow/, profiles/ and config/."""
    for folder in (PACKAGED, CHECKOUT):
        if (folder / "Snakefile").is_file():
            return folder
    raise MissingWorkflow(f"hwsweep's workflow files are missing: no Snakefile in {PACKAGED} (nor in {CHECKOUT}); "
                          "reinstall hwsweep from its wheel or sdist, or run from a clone")  # fmt: skip


def snakefile() -> Path:
    """The workflow's Snakefile: `snakemake --snakefile "$(hwsweep workflow)"` runs it from any folder."""
    return root() / "Snakefile"


def profile_template(kind: str) -> Path:
    return root() / "profiles" / kind / "config.yaml"


def starter_files() -> dict[str, Path]:
    """What `hwsweep init` copies into a folder, by the path it gets there: the config templates and the local
    profile (the slurm profile is installed per user by `hwsweep profile install slurm`)."""
    base = root()
    files = sorted((base / "config").glob("*.yaml")) + [profile_template("local")]
    return {str(p.relative_to(base)): p for p in files}
