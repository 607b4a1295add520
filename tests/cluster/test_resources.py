"""`hwsweep resources` and the scheduler reader behind it, on captured `sinfo` output and stand-in clients."""

import subprocess
import sys
import time

import pytest
import yaml
from conftest import REPO
from fake_slurm import CLUSTER, fake_sinfo

from hwsweep.cluster import resources, slurm
from hwsweep.plan.config import resolve

DEFAULT = yaml.safe_load((REPO / "config/config.yaml").read_text())


def run_resources(*args):
    return subprocess.run([sys.executable, "-m", "hwsweep.cli", "resources", "--configfile",
                           str(REPO / "config/config.yaml"), *args], capture_output=True, text=True, timeout=60)  # fmt: skip


@pytest.mark.parametrize("text, expected", [
    ("gpu:h100:4(S:0-1)", {"h100": 4}),
    ("gpu:h100:4(S:0-1),shard:8,gpu:a100:2", {"h100": 4, "a100": 2}),
    ("gpu:2", {"": 2}),
    ("gpu:h100:0(IDX:N/A)", {"h100": 0}),
    ("gpu:h100:2(IDX:0,2)", {"h100": 2}),
    ("(null)", {}),
    ("", {}),
])  # fmt: skip
def test_parse_gres(text, expected):
    assert slurm.parse_gres(text) == expected


def test_parse_sinfo_reads_states_gpus_cpus_and_memory():
    nodes = {n.name: n for n in slurm.parse_sinfo(CLUSTER)}
    assert nodes["cpu-1"].default_partition and nodes["cpu-1"].partition == "cpu" and nodes["cpu-1"].gpus == {}
    h1, h2 = nodes["h100-1"], nodes["h100-2"]
    assert (h1.state, h1.available, h1.gpus, h1.gpus_used, h1.gpus_free("h100")) == ("mixed", True, {"h100": 4}, {"h100": 4}, 0)
    assert (h1.cpus, h1.cpus_idle, h1.memory_mb, h1.memory_free_mb) == (16, 15, 32000, 31500)
    assert (h2.state, h2.available, h2.reason, h2.gpus_free("h100")) == ("drained", False, "test", 0)
    assert nodes["l40s-1"].gpus_free("l40s") == 2


@pytest.mark.parametrize("state, available", [
    ("idle", True), ("mixed", True), ("allocated", True), ("idle~", True), ("idle*", False), ("down*", False),
    ("drained", False), ("draining", False), ("mixed-", True), ("maint", False), ("reserved", False),
])  # fmt: skip
def test_node_availability(state, available):
    assert slurm.Node("n", "p", False, state, 8, 8, 1000, 1000).available is available


def test_a_reason_with_the_separator_is_kept_whole():
    (node,) = slurm.parse_sinfo("n1|p|drained|0/0/8/8|1000|0|gpu:a:1|gpu:a:0|broken | fan|\n")
    assert node.reason == "broken | fan" and node.gpus == {"a": 1}


def test_unexpected_sinfo_output_is_one_line():
    with pytest.raises(slurm.SchedulerError, match="unexpected line"):
        slurm.parse_sinfo("PARTITION AVAIL TIMELIMIT\n")


def test_the_report_on_a_drained_node_and_a_node_whose_gpus_are_all_allocated():
    lines = resources.report(DEFAULT, slurm.parse_sinfo(CLUSTER))
    text = "\n".join(lines)
    assert "partition cpu (default): CPU only, 8 CPUs on 1 node, 8 idle" in lines
    assert ("partition gpu-h100: h100 = H100-80GB, 8 GPUs on 2 nodes: 0 idle, 4 allocated, 4 drained or down "
            "[h100-2: drained (test)]") in lines  # fmt: skip
    assert "  busy now: h100x1, h100x2, h100x4, h100x8-2n" in lines
    assert "partition gpu-l40s: l40s = L40S-48GB, 2 GPUs on 1 node: 2 idle, 0 allocated, 0 drained or down" in lines
    assert "  l40sx2: 1 node x 2 GPUs, free now" in lines
    assert ("    width[width-64]: 32/GPU x 2 accum x 2 GPUs = 128 global  ✓ global batch locked  ✓ precision fp32 "
            "locked, tf32 false") in lines  # fmt: skip
    assert "  note: rtx6000 is not in the catalog: add memory_gb (GB per GPU) to its hardware entry" in lines
    pasted = yaml.safe_load("\n".join(lines[lines.index("ready to paste under hardware: in your config (free now):") + 1:]))
    assert list(pasted) == ["l40sx1", "l40sx2", "rtx6000x1", "rtx6000x2"]
    # each pasted entry is a valid hardware entry of the config (the unknown type once memory_gb is added)
    cfg = DEFAULT | {"hardware": pasted | {"cpu1": DEFAULT["hardware"]["cpu1"]}}
    cfg["hardware"]["rtx6000x1"]["memory_gb"] = cfg["hardware"]["rtx6000x2"]["memory_gb"] = 48
    assert set(resolve(cfg).hardware) == {"l40sx1", "l40sx2", "rtx6000x1", "rtx6000x2", "cpu1"}
    assert "h100x" not in text.split("ready to paste")[1]


def test_entries_that_cannot_hold_the_global_batch_say_why_and_are_not_offered():
    idle = CLUSTER.replace("h100-1|gpu-h100|mixed|1/15/0/16|32000|500|gpu:h100:4|gpu:h100:4(IDX:0-3)",
                           "h100-1|gpu-h100|idle|0/16/0/16|32000|0|gpu:h100:4|gpu:h100:0(IDX:N/A)")
    idle = idle.replace("h100-2|gpu-h100|drained|0/0/16/16", "h100-2|gpu-h100|idle|0/16/0/16")  # fmt: skip
    lines = resources.report(DEFAULT, slurm.parse_sinfo(idle))
    assert any(line.startswith("    ✗ not for this recipe: recipe.global_batch: 128 is not divisible by world_size 8")
               for line in lines)  # fmt: skip
    paste = lines[lines.index("ready to paste under hardware: in your config (free now):"):]
    assert any(line.startswith("  h100x4:") for line in paste) and not any("h100x8-2n" in line for line in paste)


def test_a_precision_the_device_lacks_is_marked():
    cfg = DEFAULT | {"recipe": DEFAULT["recipe"] | {"precision": "bf16-mixed"}, "advisor": {"allow_precision_mismatch": True}}
    v100 = "v-1|gpu-v100|idle|0/8/0/8|16000|0|gpu:v100:1|gpu:v100:0|none|\n"
    lines = resources.report(cfg, slurm.parse_sinfo(v100))
    assert any("✓ global batch locked  ✗ precision bf16-mixed differs" in line for line in lines), lines


@pytest.mark.parametrize("kind, name, note", [
    ("h100", "H100-80GB", None),
    ("a100_80g", "A100-80GB", None),
    ("nvidia_a100-sxm4-40gb", "A100-40GB", None),
    ("a100", "A100-40GB", "a100 could be A100-40GB or A100-80GB: A100-40GB assumed; set gpu_type to the one your nodes have"),
    ("rtx6000", None, "rtx6000 is not in the catalog: add memory_gb (GB per GPU) to its hardware entry"),
    ("", None, "untyped gpu is not in the catalog: add memory_gb (GB per GPU) to its hardware entry"),
])  # fmt: skip
def test_gres_types_map_to_the_catalog(kind, name, note):
    device, message = resources.device_type(kind)
    assert (device.name if device else None, message) == (name, note)


def test_the_cli_prints_the_report(tmp_path, monkeypatch):
    fake_sinfo(monkeypatch, tmp_path)
    proc = run_resources()
    assert proc.returncode == 0, proc.stderr
    assert "partition gpu-h100: h100 = H100-80GB" in proc.stdout and "  l40sx1: {accelerator: cuda" in proc.stdout


def test_no_slurm_client_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sinfo anywhere
    proc = subprocess.run([sys.executable, "-m", "hwsweep.cli", "resources", "--configfile", str(REPO / "config/config.yaml")],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == "hwsweep resources: no SLURM client: sinfo is not on PATH; run this on a cluster login node\n"


def test_an_unreachable_controller_is_one_line_within_5_seconds(tmp_path, monkeypatch):
    fake_sinfo(monkeypatch, tmp_path, stdout="", sleep=30)
    start = time.monotonic()
    nodes = None
    with pytest.raises(slurm.SchedulerError, match=r"no answer from the SLURM controller within 4 s"):
        nodes = slurm.read_nodes()
    assert nodes is None and time.monotonic() - start < 5


def test_a_failing_sinfo_is_one_line(tmp_path, monkeypatch):
    fake_sinfo(monkeypatch, tmp_path, stdout="", rc=1,
               stderr="sinfo: error: x\nslurm_load_partitions: Unable to contact slurm controller (connect failure)\n")
    proc = run_resources()
    assert proc.returncode == 1
    assert proc.stderr == "hwsweep resources: sinfo failed: slurm_load_partitions: Unable to contact slurm controller (connect failure)\n"


def test_a_bad_config_is_one_line(tmp_path, monkeypatch):
    fake_sinfo(monkeypatch, tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(DEFAULT | {"baseline": "nope"}))
    proc = subprocess.run([sys.executable, "-m", "hwsweep.cli", "resources", "--configfile", str(bad)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 1 and proc.stderr.startswith("hwsweep config error: baseline: 'nope'")
    assert proc.stderr.count("\n") == 1


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path, monkeypatch):
    """`hwsweep resources | head`: the pipe closes before the output is written."""
    env = fake_sinfo(monkeypatch, tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "hwsweep.cli", "resources", "--configfile",
                             str(REPO / "config/config.yaml")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, text=True)  # fmt: skip
    proc.stdout.close()  # before it prints: its first write meets a closed pipe
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0 and "Traceback" not in err and "BrokenPipeError" not in err, err
