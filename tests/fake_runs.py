"""Synthetic finished runs: a train.json whose timing a test chooses, for the readers of records (the throughput
model, predicted vs actual, hwsweep recommend) without training anything."""

from hwsweep.contracts import io


def write_run(root, spec, per_step, startup=2.0, seed=None):
    """A complete train.json of `spec` whose steps took `per_step` s each; its path."""
    seed = spec.seed if seed is None else seed
    path = root / spec.run_dir.replace(f"seed{spec.seed}", f"seed{seed}") / "train.json"
    plan = spec.plan.to_dict() | {"threads_per_process": 1}
    io.write_json(path, {"status": "complete", "suite": spec.suite, "variant": spec.variant, "seed": seed,
                         "hardware": spec.hardware_name, "spec": spec.to_dict(), "plan": plan,
                         "train_seconds": per_step * spec.plan.steps, "startup_seconds": startup,
                         "segments": [{}], "step_seconds": []})  # fmt: skip
    return path
