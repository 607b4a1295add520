"""The progress bar's stream where stderr is a log (LogLines)."""

from __future__ import annotations


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
