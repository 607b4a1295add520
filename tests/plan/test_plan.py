"""The batch plan (advisor): arithmetic, memory fit, precision lock and every refusal."""

import subprocess
from types import SimpleNamespace

import pytest
import torch
import yaml
from conftest import BIN

from hwsweep.contracts.hardware import GB, Hardware
from hwsweep.contracts.recipe import Parallel
from hwsweep.models import footprint
from hwsweep.models.transformer import SequenceTransformer
from hwsweep.plan.batch import Advisor, make_plan
from hwsweep.plan.config import ConfigError, resolve


def gpu_config(small_config, **recipe):
    cfg = small_config
    cfg["recipe"] |= {"global_batch": 192, "micro_batch": "auto", "precision": "bf16-mixed"} | recipe
    cfg["hardware"] = {
        "l40s4": {"accelerator": "cuda", "devices_per_node": 4, "gpu_type": "L40S-48GB"},
        "h200x2": {"accelerator": "cuda", "devices_per_node": 2, "gpu_type": "H200-141GB"},
    }
    cfg["baseline"] = "l40s4"
    return cfg


def plans(matrix):
    return {hw: matrix.spec("tiny", "default", hw, 0).plan for hw in matrix.hardware}


def test_l40s_x4_vs_h200_x2_keep_global_batch_192(small_config):
    p = plans(resolve(gpu_config(small_config)))
    assert (p["l40s4"].micro_batch, p["l40s4"].accumulation, p["l40s4"].world_size) == (48, 1, 4)
    assert (p["h200x2"].micro_batch, p["h200x2"].accumulation, p["h200x2"].world_size) == (96, 1, 2)
    capped = plans(resolve(gpu_config(small_config, max_micro_batch=48)))
    assert (capped["h200x2"].micro_batch, capped["h200x2"].accumulation) == (48, 2)
    for plan in list(p.values()) + list(capped.values()):
        assert plan.micro_batch * plan.world_size * plan.accumulation == 192
        assert plan.backend == "nccl" and plan.comparable and plan.precision == "bf16-mixed"


def test_a_change_of_device_type_alone_is_no_warning_but_a_change_of_arithmetic_is(small_config):
    # L40S and H200 both run bf16-mixed with TF32 off: the same arithmetic, nothing to warn about.
    assert resolve(gpu_config(small_config)).warnings == ()
    # TF32 on: the H200 and L40S both have it, still the same; a V100 lacks TF32 (and bf16, so fp16 here).
    cfg = gpu_config(small_config, precision="fp16-mixed", tf32=True, reproducibility="comparable")
    cfg["hardware"]["v100x4"] = {"accelerator": "cuda", "devices_per_node": 4, "gpu_type": "V100-32GB"}
    cfg["advisor"] = {"allow_precision_mismatch": True}
    matrix = resolve(cfg)
    assert [w for w in matrix.warnings if "h200x2" in w] == []
    (warning,) = [w for w in matrix.warnings if "v100x4" in w]
    assert "TF32 matmuls off vs on" in warning and "V100-32GB" in warning


def test_auto_micro_batch_is_the_largest_that_fits():
    big = SimpleNamespace(width=4096, depth=8, heads=32, mlp_ratio=4, name="transformer")
    task = SimpleNamespace(length=2048, vocab_size=32000, train_size=10**6, eval_size=10, name="sort")
    recipe = SimpleNamespace(model=big, task=task, global_batch=256, micro_batch="auto", max_micro_batch=None,
                             batch_policy="locked", lr_scaling="none", precision="fp32", tf32=False,
                             reproducibility="deterministic", schedule=SimpleNamespace(steps=10, warmup_steps=1),
                             optimizer=SimpleNamespace(name="adamw", lr=1e-3), parallel=Parallel("ddp", True),
                             activation_checkpointing="none")  # fmt: skip
    hw = Hardware(accelerator="cuda", nodes=1, devices_per_node=8, gpu_type="A100-80GB", cpus_per_task=8)
    plan = make_plan(recipe, hw, Advisor(target_utilisation=0.75))
    budget = 0.75 * 80 * GB

    def need(m):
        return footprint.device_bytes(big, task, m, 32 // m, False, "cuda")

    assert 1 <= plan.micro_batch < 32 and 32 % plan.micro_batch == 0
    assert need(plan.micro_batch) <= budget
    bigger = [d for d in (1, 2, 4, 8, 16, 32) if d > plan.micro_batch]
    assert need(bigger[0]) > budget
    assert plan.est_memory_gb == pytest.approx(need(plan.micro_batch) / GB, rel=1e-3)
    assert plan.accumulation * plan.micro_batch * 8 == 256


@pytest.mark.parametrize("precision", ["fp32", "bf16-mixed"])
def test_footprint_matches_the_real_model(precision):
    model_cfg = SimpleNamespace(name="transformer", width=96, depth=3, heads=4, mlp_ratio=4)
    task = SimpleNamespace(length=24, vocab_size=50)
    model = SequenceTransformer(task.vocab_size, task.length, model_cfg.width, model_cfg.depth, model_cfg.heads, 4)
    assert footprint.parameter_count(model_cfg, task) == sum(p.numel() for p in model.parameters())

    def saved(n):  # bytes autograd keeps for backward, each storage counted once, as the trainer runs a step
        seen, total = set(), [0]

        def pack(t):
            if t.data_ptr() not in seen:
                seen.add(t.data_ptr())
                total[0] += t.numel() * t.element_size()
            return t

        x = torch.randint(0, task.vocab_size, (n, task.length))
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision != "fp32"):
                model(x, x)  # the model's own loss: cross-entropy of its logits in fp32
        return total[0]

    measured = (saved(8) - saved(4)) / 4
    assert footprint.activation_bytes_per_sample(model_cfg, task, precision) == pytest.approx(measured, rel=0.15)


def test_mixed_precision_plans_less_memory_and_a_larger_auto_micro_batch(tmp_path, monkeypatch):
    monkeypatch.setenv("HWSWEEP_MEMORY_CACHE", str(tmp_path / "none.json"))  # the estimate, not a probe's cache
    big = SimpleNamespace(name="transformer", width=1024, depth=12, heads=16, mlp_ratio=4)
    task = SimpleNamespace(name="sort", length=128, vocab_size=64)
    fp32, bf16 = (footprint.device_bytes(big, task, 256, 1, False, "cuda", p) for p in ("fp32", "bf16-mixed"))
    assert 0.5 < bf16 / fp32 < 0.7  # 16-bit saved activations, fp32 weights and optimizer state
    h100 = Hardware(accelerator="cuda", nodes=1, devices_per_node=1, gpu_type="H100-80GB", cpus_per_task=8)
    micro = {}
    for precision in ("fp32", "bf16-mixed"):
        recipe = SimpleNamespace(model=big, task=SimpleNamespace(**vars(task), train_size=10**6),
                                 global_batch=1024, micro_batch="auto", max_micro_batch=None, batch_policy="fixed",
                                 reproducibility="comparable", precision=precision, tf32=False,
                                 schedule=SimpleNamespace(steps=10, warmup_steps=1),
                                 optimizer=SimpleNamespace(name="adamw", lr=1e-3), lr_scaling="none",
                                 parallel=Parallel("ddp", True), activation_checkpointing="none")  # fmt: skip
        plan = make_plan(recipe, h100)
        micro[precision] = plan.micro_batch
        assert plan.est_memory_gb * GB <= 0.75 * 80 * GB
    assert micro["bf16-mixed"] > micro["fp32"]


REFUSALS = [
    ({"precision": "bf16-mixed"}, "V100-32GB", ["recipe.precision: bf16-mixed is not native on V100-32GB",
                                                 "allow_precision_mismatch"]),
    ({"tf32": True, "reproducibility": "comparable", "precision": "fp32"}, "V100-32GB", ["recipe.tf32: true but V100-32GB has no TF32"]),
    ({"lr_scaling": "sqrt"}, "A100-80GB", ["recipe.lr_scaling: sqrt only applies with batch_policy: grow"]),
    ({"global_batch": 190, "micro_batch": "auto"}, "A100-80GB", ["recipe.global_batch: 190 is not divisible by world_size 4",
                                                                  "use global_batch 188 or 192"]),
    ({"global_batch": 192, "micro_batch": 10}, "A100-80GB", ["micro_batch 10", "use global_batch 160 or 200",
                                                              "micro_batch 6 or 8 or 12"]),
]  # fmt: skip


@pytest.mark.parametrize("recipe,gpu,words", REFUSALS, ids=[str(r) for r, _, _ in REFUSALS])
def test_refusals_are_one_line_with_the_fix(small_config, recipe, gpu, words):
    cfg = gpu_config(small_config, **recipe)
    cfg["hardware"]["h200x2"] |= {"gpu_type": gpu, "devices_per_node": 4}
    with pytest.raises(ConfigError) as err:
        resolve(cfg)
    assert "\n" not in str(err.value)
    for word in words:
        assert word in str(err.value)


def test_precision_mismatch_can_be_allowed_and_is_recorded(small_config):
    cfg = gpu_config(small_config)
    cfg["hardware"]["h200x2"]["gpu_type"] = "V100-32GB"
    cfg["advisor"] = {"allow_precision_mismatch": True}
    plan = plans(resolve(cfg))["h200x2"]
    assert any("not native on V100-32GB" in w for w in plan.warnings)


def test_unknown_gpu_type_needs_memory_and_nothing_fits_is_refused(small_config):
    cfg = gpu_config(small_config)
    cfg["hardware"]["h200x2"]["gpu_type"] = "B300"
    with pytest.raises(ConfigError, match=r"hardware.h200x2.gpu_type: 'B300' is not in the catalog; .* or give memory_gb"):
        resolve(cfg)
    cfg["hardware"]["h200x2"]["memory_gb"] = 0.0001
    with pytest.raises(ConfigError, match=r"^recipe.micro_batch: ddp at micro-batch 1 needs 0.586 GB per device, over 75% "
                                          r"of 0.0001 GB = 7.5e-05 GB .*; neither ddp nor fsdp fits on any device count "
                                          r"up to 1024: use a device with more memory or a smaller model$"):  # fmt: skip
        resolve(cfg)


def test_grow_policy_scales_batch_and_lr_and_is_marked_not_comparable(small_config):
    cfg = gpu_config(small_config, global_batch=32, micro_batch=8, batch_policy="grow", lr_scaling="sqrt")
    p = plans(resolve(cfg))
    assert p["l40s4"].global_batch == 128 and p["h200x2"].global_batch == 64
    assert p["l40s4"].lr == pytest.approx(0.003 * 2) and p["h200x2"].lr == pytest.approx(0.003 * 2**0.5)
    assert not p["l40s4"].comparable and "not comparable" in p["l40s4"].warnings[0]


def test_plan_command_prints_the_table(tmp_path, small_config):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(gpu_config(small_config)))
    # GPUs on the cluster: planned for the slurm executor (the local one refuses GPUs this machine lacks)
    out = subprocess.run([str(BIN / "hwsweep"), "plan", "--configfile", str(path), "--format", "tsv", "--executor", "slurm"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    lines = [line.split("\t") for line in out.stdout.strip().splitlines()]
    header, rows = lines[0], {r[2]: dict(zip(lines[0], r)) for r in lines[1:]}
    assert "est_memory_gb" in header and rows["h200x2"]["micro_batch"] == "96"
    assert out.stderr == ""  # the same arithmetic on both device types: no warning
    cfg = gpu_config(small_config, precision="fp16-mixed", tf32=True, reproducibility="comparable")
    cfg["hardware"]["v100x4"] = {"accelerator": "cuda", "devices_per_node": 4, "gpu_type": "V100-32GB"}
    cfg["advisor"] = {"allow_precision_mismatch": True}
    path.write_text(yaml.safe_dump(cfg))
    out = subprocess.run([str(BIN / "hwsweep"), "plan", "--configfile", str(path), "--executor", "slurm"],
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0 and "v100x4" in out.stderr and "TF32 matmuls off vs on" in out.stderr
