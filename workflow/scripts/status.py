"""Thin entry point: the sweep's progress and a partial aggregate in results/partial/."""

import sys

from hwsweep.run import startup

held = startup.hold_collection(__name__)  # this job's imports without the collector's walks

from hwsweep.analysis.status import Scheduler, Unwritten, write_status  # noqa: E402
from hwsweep.contracts import io  # noqa: E402
from hwsweep.plan.config import resolve  # noqa: E402

startup.resume_collection(held)
io.one_line_refusals()  # a full or read-only disk: one line naming the folder, not a traceback

matrix = resolve(snakemake.config, config_dir=snakemake.params.config_dir)  # noqa: F821 - snakemake injects it
scheduler = Scheduler()
try:
    status = write_status(matrix, scheduler=scheduler)
except Unwritten as e:  # a full or read-only disk: the table on the terminal, then the one line of why
    print(e.rows.to_string(index=False), file=sys.stderr)
    print(f"hwsweep status: the table above was not written: {e}", file=sys.stderr)
    sys.exit(1)
if scheduler.note:
    print(f"hwsweep status: {scheduler.note}", file=sys.stderr)
counts = status.state.value_counts()
summary = ", ".join(f"{n} {state}" for state, n in counts.items())
print(f"hwsweep status: {summary}; see results/partial/", file=sys.stderr)
for run in status[status.repairs != ""].itertuples():  # what `all` set right, or will
    print(f"hwsweep status: {run.suite}/{run.variant}/{run.hardware}/seed{run.seed}: {run.repairs}", file=sys.stderr)
for run in status[status.tracking != ""].itertuples():  # a tracker that did not take what the run sent it
    print(f"hwsweep status: {run.suite}/{run.variant}/{run.hardware}/seed{run.seed}: tracking: {run.tracking}", file=sys.stderr)
with open(snakemake.log[0], "w") as log:  # noqa: F821
    print(summary, file=log)
