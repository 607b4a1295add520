"""What hwsweep adds to a train process's startup: the bare floor (`import torch` + gloo
init_process_group under torchrun), and the floor of any DDP training script (the same + a DDP-wrapped
Linear + one AdamW step: torch's lazy costs, e.g. torch.optim imports torch._dynamo on the first step),
against the recorded startup of a real run of the built-in trainer (config/config.yaml's recipe, a few
steps), at world sizes 1 and 2, alternating, in one run. Goal: startup <= the bare first training step + 3 s
(the second floor: torch's lazy costs of a first step are any script's, and the trainer pays them too, earlier;
bench/gpucheck/startup.py says why).

    .venv/bin/python bench/startup.py [--repeats 3] [--world-sizes 1 2]

Every figure is rank 0's seconds from its process start (the kernel's clock), as the record's startup.
"""

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hwsweep.contracts import io  # noqa: E402
from hwsweep.contracts.hardware import BACKEND  # noqa: E402
from hwsweep.contracts.records import PARTS  # noqa: E402
from hwsweep.contracts.spec import TRAIN_RECORD  # noqa: E402
from hwsweep.plan.config import resolve  # noqa: E402

BIN = Path(sys.executable).parent
AGE = """
from pathlib import Path
import os
def age():
    ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    return float(Path("/proc/uptime").read_text().split()[0]) - ticks / os.sysconf("SC_CLK_TCK")
"""
BARE = AGE + """
import torch, torch.distributed as dist
device = torch.device("cpu")
if {cuda}:  # the GPU floor: CUDA's context on this rank's device, then NCCL
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    torch.cuda.init()
dist.init_process_group("{backend}")
if {step}:
    model = torch.nn.Linear(8, 8).to(device)
    net = torch.nn.parallel.DistributedDataParallel(model) if dist.get_world_size() > 1 else model
    optimizer = torch.optim.AdamW(model.parameters())
    net(torch.ones(4, 8, device=device)).sum().backward()
    optimizer.step()
if dist.get_world_size() > 1:  # on NCCL the first collective makes the communicator; alone, the trainer makes
    dist.barrier()  # no collective before its first step ends, and neither does this floor
if dist.get_rank() == 0:
    print("AGE", age())
dist.destroy_process_group()
"""


def torchrun(n: int, *program: str, run=None) -> str:
    """torchrun's output (stdout) of `program` on n processes. `run(cmd, env)`: how to run it, returning its output
    (bench/gpu_check.py's: a log file, a timeout, the log's tail on a failure); default: here, at most 600 s."""
    cmd = [str(BIN / "torchrun"), "--standalone", "--nnodes", "1", "--nproc_per_node", str(n), *program]
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    if run is not None:
        return run(cmd, env)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def bare(folder: Path, n: int, step: bool, accelerator: str = "cpu", run=None) -> float:
    """Rank 0's age at the end of the bare floor (with step: + DDP and one AdamW step) on `accelerator`; `run`:
    torchrun's."""
    script = folder / f"bare_{int(step)}_{accelerator}.py"
    script.write_text(BARE.format(step=step, cuda=accelerator == "cuda", backend=BACKEND[accelerator]))
    out = torchrun(n, str(script), run=run)
    return float(next(line.split()[1] for line in out.splitlines() if line.startswith("AGE")))


def hwsweep_run(folder: Path, n: int, steps: int, hardware: dict | None = None, run=None) -> dict:
    """The startup (seconds, and its parts) of the built-in trainer on config/config.yaml's recipe; `hardware`:
    the hardware entry to run on (default: n CPU processes); `run`: torchrun's."""
    raw = yaml.safe_load((REPO / "config/config.yaml").read_text())
    entry = hardware or {"accelerator": "cpu", "devices_per_node": n}
    name = f"{entry['accelerator']}{n}"
    raw = copy.deepcopy(raw) | {"suites": {"bench": {}}, "seeds": [0], "baseline": name, "hardware": {name: entry}}
    raw["recipe"]["schedule"] = {"steps": steps, "warmup_steps": 1}
    spec = resolve(raw, config_dir=REPO / "config").spec("bench", "default", name, 0).to_dict()
    run_dir = folder / f"run{n}"
    if run_dir.exists():
        subprocess.run(["rm", "-rf", str(run_dir)], check=True)
    spec["run_dir"] = str(run_dir)
    io.write_json(folder / "spec.json", spec)
    torchrun(n, "-m", "hwsweep.run.train", str(folder / "spec.json"), "--threads", str(n), run=run)
    record = json.loads((run_dir / TRAIN_RECORD).read_text())
    return record["startup_parts"] | {"startup": record["startup_seconds"]}


def setting(repeats: int) -> str:
    """The line that says where a benchmark ran: torch, Python, the CPUs it may use, the repeats."""
    import torch

    return (f"torch {torch.__version__}, python {sys.version.split()[0]}, {len(os.sched_getaffinity(0))} CPU(s) "
            f"allowed, {repeats} repeats (medians)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    print(setting(args.repeats))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for n in args.world_sizes:
            samples = {"bare": [], "bare_step": [], "runs": []}
            for _ in range(args.repeats):  # alternating: a slow moment of the machine hits all three
                samples["bare"].append(bare(folder, n, step=False))
                samples["bare_step"].append(bare(folder, n, step=True))
                samples["runs"].append(hwsweep_run(folder, n, args.steps))
            floor, floor_step = statistics.median(samples["bare"]), statistics.median(samples["bare_step"])
            med = {k: statistics.median(r[k] for r in samples["runs"]) for k in (*PARTS, "startup")}
            parts = ", ".join(f"{k} {med[k]:.2f}" for k in PARTS)
            print(f"world size {n}: bare import torch + init_process_group {floor:.2f} s; + DDP and one AdamW step "
                  f"{floor_step:.2f} s; hwsweep startup {med['startup']:.2f} s ({parts}); excess over the bare floor "
                  f"{med['startup'] - floor:+.2f} s, over the bare training step {med['startup'] - floor_step:+.2f} s "
                  "(goal <= +3 s)")  # fmt: skip


if __name__ == "__main__":
    main()
