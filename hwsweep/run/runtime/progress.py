"""What rank 0 shows as the run goes: the banner at the start, the progress bar, and the bar's stream where stderr
is a log (LogLines)."""

from __future__ import annotations

import sys

from tqdm import tqdm


def banner(run) -> str:
    """The run's plan in a few lines, printed by rank 0 before the first step (`run`: a Run)."""
    s, p = run.spec, run.plan
    resumed = f"resumed from {run.checkpoint.last} (step {run.start})" if run.start else "fresh start"
    return "\n".join([
        "=" * 64,
        f"hwsweep {s.suite}/{s.variant} on {s.hardware_name}, seed {s.seed}",
        f"world size {run.world_size} = {p.nodes} node(s) x {p.devices_per_node} {run._device.name}",
        f"global batch {p.global_batch} = micro-batch {p.micro_batch} x {run.world_size} device(s) x "
        f"{p.accumulation} accumulation",
        f"strategy {run.recipe.parallel.strategy}, backend {run._device.backend}, precision {p.precision}, tf32 {p.tf32}, "
        f"reproducibility {run.recipe.reproducibility}, {run.threads} thread(s)/process",
        f"steps {p.steps} (warmup {p.warmup_steps}) = {p.epochs} epochs; {resumed}",
        "=" * 64,
    ])  # fmt: skip


def bar(steps: int, start: int, shown: bool) -> tqdm:
    """The progress bar over the plan's `steps`, from the resumed step `start`; drawn where `shown` (rank 0)."""
    terminal = sys.stderr.isatty()
    return tqdm(total=steps, initial=start, disable=not shown, desc="train",
                file=sys.stderr if terminal else LogLines(sys.stderr),
                mininterval=1 if terminal else 10)  # fmt: skip


class LogLines:
    """The progress bar's stream where stderr is a log, not a terminal: each redraw on a line of its own (tqdm
    redraws in place, with a carriage return). What passes output on by whole lines (srun in a SLURM job, then
    the run's log) shows progress as it comes, not when the run ends."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> None:
        if text.startswith("\r"):
            self.stream.write(text[1:].rstrip(" ") + "\n")
        elif text != "\n":  # tqdm's line end when it closes: the last redraw already ended its line
            self.stream.write(text)

    def __getattr__(self, name):  # flush, encoding: the stream's
        return getattr(self.stream, name)
