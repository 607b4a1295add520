"""Planned memory (the footprint estimate micro_batch auto plans with) against the peak a real training step
allocates on the GPU (torch.cuda.max_memory_allocated after one forward + backward + AdamW step, the memory
probe's measurement), for one model size and precision on one device. Goal: within +-15%.

    .venv/bin/python bench/memory_plan.py --width 512 --depth 6 --length 64 --global-batch 512 --precision fp32

Without a GPU it prints the plan only and says that the measurement needs one (a CPU run's record has the
host RSS, which is not comparable to the plan). The planned figure includes the CUDA context the plan reserves
(footprint.CUDA_CONTEXT_BYTES), which max_memory_allocated does not see: both ratios are printed. With
--trainer it also runs hwsweep.run.train for a few steps and prints the record's planned_memory_gb and
peak_memory_gb (what every run records).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, required=True)
    parser.add_argument("--depth", type=int, required=True)
    parser.add_argument("--length", type=int, required=True)
    parser.add_argument("--global-batch", type=int, required=True)
    parser.add_argument("--precision", choices=["fp32", "bf16-mixed", "fp16-mixed"], required=True)
    parser.add_argument("--micro-batch", default="auto", help="a number, or auto (the plan's choice)")
    parser.add_argument("--gpu-type", default="H100-80GB", help="the catalog type of the GPU")
    parser.add_argument("--trainer", action="store_true", help="also a 5-step hwsweep.run.train run: its record's peak")
    args = parser.parse_args()
    # Plan from the estimate alone: an empty probe cache, whatever this machine has cached.
    os.environ["HWSWEEP_MEMORY_CACHE"] = str(Path(tempfile.mkdtemp()) / "memory.json")

    import torch

    from hwsweep.contracts.hardware import GB
    from hwsweep.models.footprint import CUDA_CONTEXT_BYTES
    from hwsweep.run import probe

    micro = args.micro_batch if args.micro_batch == "auto" else int(args.micro_batch)
    shape = {"width": args.width, "depth": args.depth, "length": args.length}
    hardware = {"accelerator": "cuda", "devices_per_node": 1, "gpu_type": args.gpu_type}
    recipe, spec = plan_at(shape, args.global_batch, micro, args.precision, hardware, torch.cuda.is_available())
    plan = spec.plan
    planned = plan.est_memory_gb * GB
    print(f"width {args.width} depth {args.depth} length {args.length} global batch {args.global_batch} "
          f"{args.precision}: micro-batch {plan.micro_batch} x {plan.accumulation}, "
          f"planned {planned / GB:.2f} GB ({(planned - CUDA_CONTEXT_BYTES) / GB:.2f} GB without the context)")  # fmt: skip
    if not torch.cuda.is_available():
        print("no CUDA device: planned vs measured peak needs a GPU (max_memory_allocated); nothing measured")
        return
    device = torch.device("cuda", 0)
    peak, _ = probe.step_peak_bytes(recipe, plan.micro_batch, args.precision, device)
    if peak is None:
        print(f"{torch.cuda.get_device_name(device)}: out of memory at micro-batch {plan.micro_batch}")
        return
    print(f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}, CUDA {torch.version.cuda}: "
          f"max_memory_allocated {peak / GB:.2f} GB; planned / measured {planned / peak:.3f}, "
          f"without the context {(planned - CUDA_CONTEXT_BYTES) / peak:.3f}")  # fmt: skip
    if args.trainer:
        trained = trainer_record(spec)
        print(f"hwsweep.run.train record: planned_memory_gb {trained['planned_memory_gb']:.2f}, peak_memory_gb "
              f"{trained['peak_memory_gb']:.2f} ({trained['peak_memory_source']}); planned / measured "
              f"{trained['planned_memory_gb'] / trained['peak_memory_gb']:.3f}")  # fmt: skip


def plan_at(shape: dict, global_batch: int, micro, precision: str, hardware: dict, tf32: bool):
    """(recipe, RunSpec) of config/config.yaml's recipe at `shape` (width, depth, length; heads = width / 64),
    batch (`micro`: a number or "auto") and precision, planned for one `hardware` entry (tf32 for fp32 only)."""
    from hwsweep.plan.config import resolve

    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg["recipe"]["task"]["length"] = shape["length"]
    cfg["recipe"]["model"] |= {"width": shape["width"], "depth": shape["depth"], "heads": max(1, shape["width"] // 64)}
    cfg["recipe"] |= {"global_batch": global_batch, "micro_batch": micro, "precision": precision,
                      "tf32": precision == "fp32" and tf32}  # fmt: skip
    cfg["suites"] = {"bench": {}}
    cfg["hardware"] = {"gpu": hardware}
    cfg["baseline"] = "gpu"
    matrix = resolve(cfg)
    return matrix.cells[0].recipe, matrix.spec("bench", "default", "gpu", 0)


def trainer_record(spec) -> dict:
    """The RunRecord of a 5-step run of the reference trainer on this GPU."""
    from hwsweep.contracts import io

    folder = Path(tempfile.mkdtemp())
    d = spec.to_dict() | {"run_dir": str(folder)}
    d["plan"]["steps"] = d["recipe"]["schedule"]["steps"] = 5
    d["plan"]["warmup_steps"] = d["recipe"]["schedule"]["warmup_steps"] = 1
    io.write_json(folder / "spec.json", d)
    torchrun = Path(sys.executable).parent / "torchrun"
    cmd = [str(torchrun), "--standalone", "--nproc_per_node", "1", "-m", "hwsweep.run.train", str(folder / "spec.json")]
    subprocess.run(cmd, check=True, capture_output=True)
    return json.loads((folder / "train.json").read_text())


if __name__ == "__main__":
    main()
