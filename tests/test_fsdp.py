"""Fully sharded data parallel (recipe.parallel.strategy: fsdp): the plan's sharded memory and its refusals."""

import pytest

from hwsweep.contracts.command import plan_values
from hwsweep.contracts.hardware import GB
from hwsweep.models import footprint
from hwsweep.plan.config import ConfigError, resolve


def big_config(small_config, strategy="ddp", memory_gb=0.1, devices=2, **recipe):
    """A transformer of ~9.5M parameters (~150 MB of fp32 weights, gradients and AdamW state) on CPU entries
    that declare `memory_gb` per device: too big for DDP at 0.1 GB."""
    cfg = small_config
    cfg["recipe"] |= {"global_batch": 16, "micro_batch": 4, "parallel": {"strategy": strategy}} | recipe
    cfg["recipe"]["model"] = {"width": 256, "depth": 12, "heads": 4}
    cfg["hardware"] = {f"cpu{n}": {"accelerator": "cpu", "devices_per_node": n, "memory_gb": memory_gb}
                       for n in (1, devices)}  # fmt: skip
    cfg["hardware"]["cpu1"]["memory_gb"] = 1.0  # the baseline fits either way
    return cfg


def test_ddp_too_big_for_the_declared_memory_is_refused_naming_fsdp_and_the_device_count(small_config):
    with pytest.raises(ConfigError) as err:
        resolve(big_config(small_config, devices=4))
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("recipe.parallel.strategy: ddp keeps a whole replica per device")
    assert "hardware cpu4" in msg and "set parallel.strategy: fsdp" in msg and "on this hardware's 4 devices" in msg
    # Two devices are too few for FSDP too: the advisor names the fewest that fit.
    with pytest.raises(ConfigError, match=r"fsdp, which needs .* GB per device on 4 devices \(a hardware entry"):
        resolve(big_config(small_config, memory_gb=0.07, devices=2))


def test_fsdp_plans_the_sharded_state_per_device(small_config):
    matrix = resolve(big_config(small_config, "fsdp", devices=4))
    plan = matrix.spec("tiny", "default", "cpu4", 0).plan
    assert plan.strategy == "fsdp" and plan.est_memory_gb * GB <= 0.1 * GB
    one = matrix.spec("tiny", "default", "cpu1", 0).plan
    r = matrix.cells[0].recipe
    n = footprint.parameter_count(r.model, r.task)
    state = n * footprint.FP32 * (2 + footprint.ADAMW_STATE)
    # What sharding saves from 1 to 4 devices is three quarters of the weights, gradients and AdamW state
    # (the micro-batch, activations and gathered blocks are the same).
    assert (one.est_memory_gb - plan.est_memory_gb) * GB == pytest.approx(state * 3 / 4, rel=1e-3)  # est_memory_gb: 4 decimals
    ddp = footprint.device_bytes(r.model, r.task, 4, 1, False, "cpu")
    assert plan.est_memory_gb * GB < ddp / 2


def test_strategy_is_a_sweepable_recipe_key_and_a_plan_value(small_config):
    small_config["suites"]["tiny"]["sweep"] = {"parallel.strategy": ["ddp", "fsdp"]}
    matrix = resolve(small_config)
    assert [c.variant for c in matrix.cells] == ["strategy-ddp", "strategy-fsdp"]
    spec = matrix.spec("tiny", "strategy-fsdp", "cpu2", 0)
    assert spec.plan.strategy == "fsdp" and spec.recipe.parallel.reshard_after_forward is True
    assert plan_values(spec).items() >= {"strategy": "fsdp", "fsdp": True, "reshard_after_forward": True}.items()
    assert plan_values(matrix.spec("tiny", "strategy-ddp", "cpu2", 0))["fsdp"] is False


@pytest.mark.parametrize("recipe, words", [
    ({"reproducibility": "strict"}, "fsdp cannot keep reproducibility strict's promise"),
    ({"precision": "fp16-mixed"}, "use precision: bf16-mixed or strategy: ddp"),
])  # fmt: skip
def test_fsdp_refuses_what_it_cannot_keep_in_one_line(small_config, recipe, words):
    small_config["recipe"] |= recipe | {"parallel": {"strategy": "fsdp"}}
    with pytest.raises(ConfigError) as err:
        resolve(small_config)
    assert str(err.value).startswith("recipe.parallel.strategy: fsdp") and words in str(err.value)
    assert "\n" not in str(err.value)
