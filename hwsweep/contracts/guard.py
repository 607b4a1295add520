"""Divergence guard: a training loss that has gone wrong, said in one line with the step and the values.

Feed the loss step by step; `feed` returns the verdict the first time one of these holds, else None:
- the loss is not finite (NaN, inf);
- it blew up: above `factor` x its early value (the lowest of the first `early_steps` losses, taken
  before a blow-up can move it) for `patience` consecutive steps;
and `finish` checks the end: a final loss at or above `chance_loss` (the loss of a uniform guess, when
known) is a run that learned nothing. What happens then is the user's choice (config `guard.action`):
`fail` stops the run without a record, `flag` keeps it and adds the line to the record's checks (the
report shows them), `off` only says nothing. Pure and torch-free: the trainer, the runner of a user's
command and the tests feed it alike; on resume, feed the recorded losses again first."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hwsweep.contracts.typed import Typed


@dataclass(frozen=True)
class GuardConfig(Typed):
    """The config's `guard:` block (hwsweep/schemas/config.schema.yaml has the descriptions)."""

    action: str = "fail"  # fail | flag | off
    factor: float = 10.0  # k: blown up when the loss is above k x its early value ...
    patience: int = 10  # ... for this many consecutive steps
    early_steps: int = 5  # the early value: the lowest of the first this-many losses
    # A final loss at or above this learned nothing; None: not checked. In the config also "auto", which
    # the matrix turns into each cell's number (ln vocab_size for the built-in task) before a spec has it.
    chance_loss: float | str | None = None


class Guard:
    def __init__(self, config: GuardConfig):
        self.config = config
        self.early = math.inf
        self.seen = 0
        self.streak: list[tuple[int, float]] = []  # the consecutive (step, loss) above the threshold
        self.last: tuple[int, float] | None = None
        self.verdict: str | None = None

    def feed(self, step: int, loss: float) -> str | None:
        """The verdict line the first time the loss has gone wrong at `step`; None otherwise (and after)."""
        if self.verdict is not None:
            return None
        c = self.config
        if not math.isfinite(loss):
            last = f"{self.last[1]:.6g} at step {self.last[0]}" if self.last else "none"
            return self._say(f"loss is {loss} at step {step} (last finite loss: {last}); "
                             "lower recipe.optimizer.lr, or under a 16-bit precision use fp32")  # fmt: skip
        self.seen += 1
        if self.seen <= c.early_steps:
            self.early = min(self.early, loss)
        threshold = c.factor * self.early
        self.streak = self.streak + [(step, loss)] if loss > threshold and self.early > 0 else []
        self.last = (step, loss)
        if len(self.streak) >= c.patience:
            (first, at_first), peak = self.streak[0], max(v for _, v in self.streak)
            return self._say(
                f"loss blew up: {loss:.6g} at step {step}, above {c.factor:g} x its early value {self.early:.6g} "
                f"= {threshold:.6g} for {len(self.streak)} consecutive steps since step {first} ({at_first:.6g}; "
                f"peak {peak:.6g}); lower recipe.optimizer.lr, or raise guard.factor if such a rise is expected"
            )
        return None

    def finish(self) -> str | None:
        """The verdict at the end of training (a blow-up still under way counts), or None."""
        if self.verdict is not None or self.last is None:
            return None
        c, (step, loss) = self.config, self.last
        if c.chance_loss is not None and loss >= c.chance_loss:
            return self._say(
                f"final loss {loss:.6g} at step {step} is at chance level (a uniform guess scores "
                f"{c.chance_loss:.6g}): the run learned nothing; train longer or check recipe.optimizer.lr"
            )
        return None

    def _say(self, line: str) -> str:
        self.verdict = line
        return line


def judge(config: GuardConfig, steps, losses) -> str | None:
    """The verdict on a whole loss series (steps[i] is the step of losses[i]), as if fed one by one."""
    guard = Guard(config)
    for step, loss in zip(steps, losses):
        if guard.feed(step, loss):
            return guard.verdict
    return guard.finish()
