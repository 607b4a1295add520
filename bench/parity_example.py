"""The parity example, run for real: how far apart world sizes 1 and 2 (and 4) train under each
setup, at the same seed, on CPU with gloo.

    .venv/bin/python bench/parity_example.py [--steps 50]

- naive: the per-device batch is kept and the global batch doubles with the devices (what
  hand-edited configs do); the runs differ from step 1.
- deterministic: standard DDP with the plan's fixed global batch; the float reduction order
  differs, so the runs drift apart slowly.
- strict: gradients summed in one global micro-batch order; bitwise identical.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from hwsweep.contracts import io
from hwsweep.plan.config import resolve

REPO = Path(__file__).resolve().parent.parent


def run(level: str, n: int, steps: int, folder: Path, global_batch: int = 32) -> list[float]:
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg["recipe"] |= {"reproducibility": level, "global_batch": global_batch, "micro_batch": 8}
    cfg["recipe"]["schedule"] = {"steps": steps, "warmup_steps": 5}
    cfg["hardware"] = {f"cpu{n}": {"accelerator": "cpu", "devices_per_node": n}}
    cfg |= {"baseline": f"cpu{n}", "seeds": [0], "suites": {"parity": {}}}
    spec = resolve(cfg).spec("parity", "default", f"cpu{n}", 0).to_dict() | {"run_dir": str(folder)}
    io.write_json(folder / "spec.json", spec)
    torchrun = Path(sys.executable).parent / "torchrun"
    subprocess.run([str(torchrun), "--standalone", "--nproc_per_node", str(n), "-m", "hwsweep.run.train",
                    str(folder / "spec.json"), "--threads", "2"],
                   check=True, capture_output=True, env=os.environ | {"OMP_NUM_THREADS": "1"})  # fmt: skip
    return json.loads((folder / "train.json").read_text())["curves"]["loss"]["values"]


def gap(a, b, upto):
    return max(abs(x - y) for x, y in zip(a[:upto], b[:upto]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    steps = parser.parse_args().steps
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        rows = []
        for level in ("strict", "deterministic"):
            one = run(level, 1, steps, t / f"{level}1")
            for n in (2, 4):
                other = run(level, n, steps, t / f"{level}{n}")
                rows.append((level, n, one, other))
        naive = run("deterministic", 2, steps, t / "naive2", global_batch=64)
        rows.append(("naive (global batch 64)", 2, run("deterministic", 1, steps, t / "d1b"), naive))
    print(f"{'setup':26} {'N':>2} {'step 1':>10} {'<= step 25':>11} {'<= step ' + str(steps):>11}")
    for level, n, a, b in rows:
        print(f"{level:26} {n:>2} {gap(a, b, 1):>10.2e} {gap(a, b, 25):>11.2e} {gap(a, b, steps):>11.2e}")


if __name__ == "__main__":
    main()
