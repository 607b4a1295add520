"""What resolve warns of without refusing: arithmetic that differs from the baseline's, plan settings a script's
flags do not receive, targets an unmodified command does not stop at, a learning rate high for Adam, unseen
puzzles with nothing to learn their rule from, a time limit too short for the usual signal lead."""

from __future__ import annotations

from hwsweep.contracts.command import BATCH_CARRIERS, RECIPE_VALUES, Trainer, not_passed
from hwsweep.contracts.hardware import SIGNAL_LEAD_S
from hwsweep.plan.config.recipe import ADAMW_MAX_LR


def _warnings(cells, hardware, baseline: str, trainer: Trainer) -> tuple[str, ...]:
    """Every warning of the resolved matrix, in the order the plan prints them."""
    return (_cross_hardware_warnings(cells, hardware, baseline) + _unmapped_warnings(trainer, cells)
            + _stop_at_warnings(cells, trainer) + _lr_warnings(cells, trainer)
            + _unseen_warnings(cells) + _signal_lead_warnings(hardware))  # fmt: skip


def _signal_lead_warnings(hardware) -> tuple[str, ...]:
    """A SLURM time limit too short for the usual signal lead: the train job is signalled sooner before its end."""
    return tuple(f"hardware.{name}.runtime: {hw.runtime} minute(s) is under 4 x the {SIGNAL_LEAD_S} s lead of the "
                 f"signal to checkpoint before the time limit; a train job there is signalled {hw.signal_lead} s "
                 "before its limit instead: if a checkpoint takes longer, give a longer runtime"
                 for name, hw in hardware.items() if hw.signal_lead < SIGNAL_LEAD_S)  # fmt: skip


def _cross_hardware_warnings(cells, hardware, baseline) -> tuple[str, ...]:
    """Where a hardware's arithmetic differs from the baseline's: another precision, or TF32
    matmuls on one device type and not the other. Nothing when both run the same arithmetic
    (the precision is locked by the plan; a change of device type alone is not a warning)."""
    out = []
    for cell in cells:
        r, base = cell.recipe, hardware[baseline]

        def arithmetic(hw):
            kind = hw.device_type
            return hw.precision or r.precision, bool(r.tf32 and (kind is None or kind.tf32))

        for hw in cell.hardware:
            (p, tf32), (bp, btf32) = arithmetic(hardware[hw]), arithmetic(base)
            diffs = ([f"precision {p} vs {bp}"] if p != bp else []) + (
                [f"TF32 matmuls {'on' if tf32 else 'off'} vs {'on' if btf32 else 'off'}"] if tf32 != btf32 else []
            )
            if diffs:
                out.append(
                    f"suite {cell.suite} [{cell.variant}]: {hw} ({hardware[hw].gpu_type}) vs baseline {baseline} "
                    f"({base.gpu_type}): {', '.join(diffs)}: results may differ because of it"
                )
    return tuple(dict.fromkeys(out))


# What the comparison is locked on, and the plan values that carry it to a script.
LOCKED_BY = {
    "the seed": ("seed",),
    "the batch": ("micro_batch", "per_device_batch", "global_batch"),
    "the step budget": ("steps",),
    "the precision": ("precision",),
}


def _stop_at_warnings(cells, trainer: Trainer) -> tuple[str, ...]:
    """Only the runtime stops a run at its targets: a command that does not import it trains its whole schedule."""
    stopping = sorted({c.suite for c in cells if c.recipe.schedule.stop_at == "target"})
    if trainer.kind == "builtin" or not stopping:
        return ()
    return (f"recipe.schedule.stop_at: target (suite {', '.join(stopping)}): only a script on hwsweep.runtime stops at "
            "its targets; an unmodified command trains every step (its time to target is still measured, nothing "
            "is saved; use stop_at: steps to say so)",)  # fmt: skip


def _unseen_warnings(cells) -> tuple[str, ...]:
    """Unseen puzzles whose samples show no demonstration: nothing tells the model their rule (their identifier's
    embedding row is zero), so their accuracy measures chance, not generalization."""
    blind = sorted({c.suite for c in cells if getattr(c.recipe.task, "unseen_puzzles", 0)
                    and not getattr(c.recipe.task, "demonstrations", 0)})  # fmt: skip
    if not blind:
        return ()
    return (f"recipe.task.unseen_puzzles without demonstrations (suite {', '.join(blind)}): an unseen puzzle's rule "
            "reaches the model through nothing, so unseen_exact_accuracy measures chance; set task.demonstrations: 1 "
            "to ask whether the rule is read from the sample",)  # fmt: skip


def _lr_warnings(cells, trainer: Trainer) -> tuple[str, ...]:
    """A learning rate above ADAMW_MAX_LR passed to a script: right for plain SGD, not for an Adam (the built-in
    trainer refuses it)."""
    if trainer.kind == "builtin" or "lr" not in trainer.invocation.args.values():
        return ()
    high = sorted({c.recipe.optimizer.lr for c in cells if c.recipe.optimizer.lr > ADAMW_MAX_LR})
    if not high:
        return ()
    return (f"recipe.optimizer.lr: {high[-1]:g} is above {ADAMW_MAX_LR:g}: usual for plain SGD (the PyTorch word "
            "language model's is 20), far too high for Adam; check which optimizer the script's flag sets",)  # fmt: skip


def _unmapped_warnings(trainer: Trainer, cells=()) -> tuple[str, ...]:
    """A script only follows the plan through its flags: say which locks it does not receive."""
    if trainer.kind == "builtin":
        return ()
    mapped = set(trainer.invocation.args.values())
    out = []
    for what, values in LOCKED_BY.items():
        if not mapped & set(values):
            consequence = (
                "every seed repeats the same run, so the seed axis measures run-to-run noise only"
                if what == "the seed"
                else "the script uses its own, so hwsweep cannot lock it across hardware"
            ) + (", and records say not_passed" if any(v in RECIPE_VALUES for v in values) else "")
            out.append(f"trainer.args maps no flag to {' or '.join(values)}: {what} is not passed; {consequence} "
                       "(a script on hwsweep.runtime reads the plan itself: nothing to do)")
    if "micro_batch" in mapped and not mapped & set(BATCH_CARRIERS):
        out.append("trainer.args maps micro_batch but no accumulation: the script accumulates by its own default, which "
                   "must be 1 (the run fails if the global batch it is seen to train differs from the plan's)")
    # a recipe setting given in recipe.args under its name in every cell (lr: 20) is passed: its value is on record
    everywhere = [k for k in (cells[0].recipe.args if cells else {}) if all(k in c.recipe.args for c in cells)]
    locked = {f"recipe.{RECIPE_VALUES[v]}" for values in LOCKED_BY.values() for v in values if v in RECIPE_VALUES}
    unpassed = [key for key in not_passed(trainer, dict.fromkeys(everywhere)) if key not in locked]  # said above
    if unpassed:
        names = [v for v, key in RECIPE_VALUES.items() if f"recipe.{key}" in unpassed]
        out.append(f"{', '.join(unpassed)} reach no flag of the script: it uses its own values, and records say "
                   f"not_passed (map {', '.join(names)} in trainer.args to pass them, or give the script's value in "
                   "recipe.args under that name; a script on hwsweep.runtime applies them itself)")
    return tuple(out)
