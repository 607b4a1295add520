"""After an interrupt: what a killed snakemake leaves in .snakemake/ that stops the next `snakemake all`, and
the one line that says what to run. kill -9 leaves its lock (LockException); SIGINT to snakemake alone lets the
running jobs finish, then leaves their outputs marked incomplete (IncompleteFilesException)."""

from __future__ import annotations

from pathlib import Path

from hwsweep.contracts import host


def advice(workdir=".", rerun_incomplete: bool = False) -> list[str]:
    """One line per thing that stops the next run here, naming the command that gets past it."""
    state = Path(workdir, ".snakemake")
    lines = []
    if any(state.glob("locks/*.lock")) and not host.other_snakemakes(workdir):
        lines.append("hwsweep: this folder is locked by a snakemake that was killed (none runs here on this machine); "
                     "if none runs on another machine that shares the folder, run `snakemake --unlock` with the "
                     "same options, then this command again")  # fmt: skip
    marked = [p for p in state.glob("incomplete/**/*") if p.is_file() and p.name != "migration_underway"]
    if marked and not rerun_incomplete:
        lines.append(f"hwsweep: an interrupted snakemake left {len(marked)} output(s) marked incomplete; run this "
                     "command again with --rerun-incomplete (profiles/local sets it; a train job resumes from its "
                     "checkpoints)")  # fmt: skip
    return lines
