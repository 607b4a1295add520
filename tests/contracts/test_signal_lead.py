"""The signal lead fits the time limit (issue 65): a SLURM train job is asked for SIGTERM 180 s before its limit,
or a quarter of a limit under 12 minutes, so a short runtime trains instead of being signalled as it starts; the
plan says so in one warning naming the hardware."""

import copy

import pytest
from conftest import SMALL

from hwsweep.contracts.hardware import SIGNAL_LEAD_S, Hardware
from hwsweep.plan.config import resolve


@pytest.mark.parametrize("runtime, lead", [(None, 180), (60, 180), (12, 180), (11, 165), (3, 45), (1, 15)])
def test_the_lead_is_180_s_or_a_quarter_of_a_short_limit(runtime, lead):
    hw = Hardware(accelerator="cpu", nodes=1, devices_per_node=1, gpu_type="cpu", cpus_per_task=1, runtime=runtime)
    assert hw.signal_lead == lead and hw.signal_lead < 60 * (runtime or 60)


def test_a_short_runtime_is_planned_with_one_warning_naming_the_hardware_and_the_lead():
    cfg = copy.deepcopy(SMALL)
    assert not [w for w in resolve(cfg).warnings if "runtime" in w]
    cfg["hardware"]["cpu2"]["runtime"] = 3
    (warning,) = [w for w in resolve(cfg).warnings if "runtime" in w]
    assert warning.startswith(f"hardware.cpu2.runtime: 3 minute(s) is under 4 x the {SIGNAL_LEAD_S} s lead")
    assert "signalled 45 s before its limit" in warning
