"""Peak FLOP/s of the catalog, the denominator of MFU."""

from hwsweep.contracts.catalog import catalog, peak_flops


def test_peak_follows_the_arithmetic_the_plan_runs():
    assert peak_flops("H100-80GB", "bf16-mixed", False) == 989.5e12
    assert peak_flops("H100-80GB", "fp32", True) == 494.5e12 and peak_flops("H100-80GB", "fp32", False) == 67e12
    assert peak_flops("A100-80GB", "fp16-mixed", False) == 312e12
    assert peak_flops("V100-32GB", "fp32", True) == 15.7e12  # no TF32 on a V100: plain fp32
    assert peak_flops("no-such-gpu", "fp32", False) is None


def test_every_gpu_type_has_a_peak_for_each_precision_it_runs():
    for kind in catalog().values():
        if kind.architecture == "cpu":
            continue
        for precision in ("fp32", "bf16-mixed", "fp16-mixed"):
            if kind.supports(precision):
                assert peak_flops(kind.name, precision, False), (kind.name, precision)
