"""micro_batch auto by measurement: the probe's search and cache, and plans that use measured peaks.
The CUDA step itself (probe.step_peak_bytes) needs a GPU: docs/benchmarks.md has its protocol."""

import json

import pytest

from hwsweep.contracts import memory
from hwsweep.contracts.hardware import GB
from hwsweep.models import footprint
from hwsweep.plan.config import resolve
from hwsweep.run import probe

GPU = {"accelerator": "cuda", "devices_per_node": 1, "gpu_type": "H100-80GB"}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    path = tmp_path / "memory.json"
    monkeypatch.setenv(memory.CACHE_ENV, str(path))
    return path


def matrix(small_config, **recipe):
    cfg = small_config
    cfg["recipe"] |= {"global_batch": 64, "micro_batch": "auto", "precision": "bf16-mixed"} | recipe
    cfg["hardware"] = {"h100": GPU, "cpu1": {"accelerator": "cpu", "devices_per_node": 1}}
    cfg["baseline"] = "h100"
    return resolve(cfg)


def fake_device(peaks: dict, calls: list):
    """A device whose step at micro-batch m peaks at peaks[m] bytes (None: out of memory)."""

    def measure(micro):
        calls.append(micro)
        return peaks[micro], 1000

    return measure


def test_probe_measures_largest_first_until_one_fits_and_caches_every_peak(small_config, cache):
    recipe = matrix(small_config).cells[0].recipe
    calls = []
    peaks = {64: None, 32: 50 * GB, 16: 30 * GB, 8: 10 * GB}
    found = probe.probe(recipe, "H100-80GB", "bf16-mixed", 64, 40 * GB, fake_device(peaks, calls))
    assert calls == [64, 32, 16] and found == {64: None, 32: 50 * GB, 16: 30 * GB}
    assert memory.measured(recipe, "H100-80GB", "bf16-mixed")["peak_bytes"] == found
    assert memory.measured(recipe, "H100-80GB", "fp32") is None  # per precision
    assert memory.measured(recipe, "A100-80GB", "bf16-mixed") is None  # per device type
    calls.clear()  # a second probe reads the cache and measures nothing
    assert probe.probe(recipe, "H100-80GB", "bf16-mixed", 64, 40 * GB, fake_device(peaks, calls)) == found
    assert calls == []
    assert len(json.loads(cache.read_text())) == 1


def test_plans_use_measured_peaks_on_the_device_type_only(small_config):
    m = matrix(small_config)
    recipe = m.cells[0].recipe
    before = m.spec("tiny", "default", "h100", 0).plan
    assert (before.micro_batch, before.memory_source) == (64, "estimate")  # the tiny model fits whole
    memory.store(recipe, "H100-80GB", "bf16-mixed", {64: None, 32: 70 * GB, 16: 20 * GB}, 1000)
    after = matrix(small_config).spec("tiny", "default", "h100", 0).plan
    assert (after.micro_batch, after.accumulation, after.memory_source) == (16, 4, "measured")
    assert after.est_memory_gb == pytest.approx((20 * GB + footprint.CUDA_CONTEXT_BYTES) / GB, abs=1e-4)
    cpu = matrix(small_config).spec("tiny", "default", "cpu1", 0).plan
    assert cpu.memory_source == "estimate"  # no probe on a CPU
    sgd = matrix(small_config, optimizer={"name": "sgd"}).spec("tiny", "default", "h100", 0).plan
    assert sgd.memory_source == "estimate"  # the probe steps AdamW: its peak holds two moments SGD does not keep


def test_strict_plans_add_the_kept_gradients_to_a_measured_peak(small_config):
    m = matrix(small_config, reproducibility="strict", micro_batch=16)
    memory.store(m.cells[0].recipe, "H100-80GB", "bf16-mixed", {16: 5 * GB}, 2 * GB)
    plan = matrix(small_config, reproducibility="strict", micro_batch=16).spec("tiny", "default", "h100", 0).plan
    assert plan.memory_source == "measured"
    assert plan.est_memory_gb == pytest.approx((5 * GB + 4 * 2 * GB + footprint.CUDA_CONTEXT_BYTES) / GB, abs=1e-4)


def test_a_damaged_cache_falls_back_to_the_estimate(small_config, cache):
    cache.write_text("{not json")
    assert matrix(small_config).spec("tiny", "default", "h100", 0).plan.memory_source == "estimate"
