"""What the command contract adds to a run: the same user script under the same torchrun, started
by hand and through `python -m hwsweep.run.launch` (argument vector built from the plan, workers
tethered, output streamed and parsed, RunRecord written), alternating, in one run (goal <= 0.2 s per
run). The torchrun command launch runs (its workers tethered), started by hand, splits the overhead
into the tether's share and the launcher's.

    .venv/bin/python bench/command_overhead.py [--repeats 7]
"""

import argparse
import copy
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hwsweep.contracts import command  # noqa: E402
from hwsweep.plan.config import resolve  # noqa: E402
from hwsweep.run.launch import torchrun_command  # noqa: E402
from hwsweep.run.tether import tethered  # noqa: E402

# A stand-in for a user's script that prints 200 log lines: the parse cost is part of the overhead.
SCRIPT = """
import sys
for step in range(1, 201):
    print(f"step {step}: loss {1 / step:.5f}")
print("final val_loss 0.25 val_acc 0.9")
"""
CONFIG = {
    # launch torchrun even for one process (auto would run it plainly): the same command as by hand
    "trainer": {"command": ["python", "train.py"], "launch": "torchrun",
                "args": {"max_steps": "steps", "seed": "seed", "out_dir": "run_dir"}},
    "recipe": {"global_batch": 8, "micro_batch": 8, "schedule": {"steps": 200, "warmup_steps": 1}},
    "metrics": {"loss": {"goal": "min"}, "val_loss": {"goal": "min", "margin": 0.1}, "val_acc": {"goal": "max", "margin": 0.1}},
    "suites": {"bench": {}},
    "seeds": [0],
    "hardware": {"cpu1": {"accelerator": "cpu"}},
    "baseline": "cpu1",
}


def timed(cmd, cwd) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "train.py").write_text(SCRIPT)
        spec = resolve(copy.deepcopy(CONFIG), config_dir=tmp).spec("bench", "default", "cpu1", 0)
        spec = type(spec).from_dict(spec.to_dict() | {"run_dir": str(tmp / "run")})
        (tmp / "spec.json").write_text(json.dumps(spec.to_dict()))
        script = command.command_argv(spec, spec.trainer.invocation)  # [python, train.py, --flags...]
        by_hand = torchrun_command(spec, {}) + script[1:]  # what a user types: torchrun runs train.py itself
        launched = torchrun_command(spec, {}) + tethered(script)  # what hwsweep.run.launch runs
        through = [sys.executable, "-m", "hwsweep.run.launch", str(tmp / "spec.json")]
        hand, tether, ours = [], [], []
        for _ in range(args.repeats):
            hand.append(timed(by_hand, tmp))
            tether.append(timed(launched, tmp))
            ours.append(timed(through, tmp))
        assert (tmp / "run" / "train.json").exists()
    h, t, o = statistics.median(hand), statistics.median(tether), statistics.median(ours)
    print(f"by hand {h:.3f} s, tethered by hand {t:.3f} s, through hwsweep.run.launch {o:.3f} s "
          f"(medians of {args.repeats}): overhead {o - h:+.3f} s per run (goal <= 0.2 s; tether {t - h:+.3f} s, "
          f"launcher {o - t:+.3f} s), ratio {o / h:.3f}")


if __name__ == "__main__":
    main()
