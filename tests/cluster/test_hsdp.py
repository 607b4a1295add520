"""HSDP through the workflow: a sweep of parallel.strategy over fsdp and hsdp on a hardware entry of 2 nodes x 2
processes, run by snakemake on a SLURM cluster of its own (tests/slurm/cluster.py; the local executor runs one node
only): HSDP shards within each node and replicates over the two, FSDP shards over all four, and both train the same
losses up to the reduction's order. Its cluster has its own folder and ports (150 above the default's;
test_accounting.py's are 50, test_recommend.py's 100 above), so the others may run beside it."""

import copy
import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, SMALL
from test_slurm import HARDWARE, finish, start_slurm, with_profile

sys.path.insert(0, str(REPO / "tests" / "slurm"))
import cluster  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.timeout(1200)]

TWO_BY_TWO = HARDWARE["g2n"] | {"mem_mb": 1500}  # 2 nodes x 2 processes, GPUs by model (CPU ranks: no CUDA)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A cluster of this module's own (folder and ports beside the default one's), the slurm profile installed as
    users install it; the clients' environment."""
    if os.geteuid() != 0 and not cluster.shutil.which("slurmctld"):
        pytest.skip("needs root (to install and start SLURM) or an installed SLURM")
    own = cluster.Cluster(cluster.ROOT.with_name(f"{cluster.ROOT.name}-hsdp"), cluster.PORT + 150)
    env = own.up()
    try:
        env, _ = with_profile(env, tmp_path_factory.mktemp("xdg"))
        yield env
    finally:
        if own.controller_up():
            subprocess.run(["scancel", "--user", "root"], env=env, check=False, timeout=30)
        own.down()


def test_hsdp_on_2_nodes_by_2_trains_through_snakemake_on_slurm_like_fsdp(site, tmp_path):
    cfg = copy.deepcopy(SMALL) | {"hardware": {"g2n": TWO_BY_TWO}, "baseline": "g2n", "seeds": [0],
                                  "evaluation": "none", "metrics": {"loss": {"goal": "min", "stage": "train"}}}  # fmt: skip
    cfg["recipe"] |= {"global_batch": 16, "micro_batch": 4, "checkpoint_every": 100,
                      "schedule": {"steps": 12, "warmup_steps": 2}}  # fmt: skip
    cfg["suites"] = {"tiny": {"sweep": {"parallel.strategy": ["fsdp", "hsdp"]}}}
    code, err = finish(start_slurm(tmp_path, cfg, site, "--retries", "0", "--jobs", "1"), timeout=900)
    assert code == 0, err[-4000:]
    runs = tmp_path / "results/tiny"
    fsdp, hsdp = (json.loads((runs / f"strategy-{name}/g2n/seed0/train.json").read_text())
                  for name in ("fsdp", "hsdp"))  # fmt: skip
    for record, strategy in ((fsdp, "fsdp"), (hsdp, "hsdp")):
        assert record["plan"]["strategy"] == strategy and record["plan"]["nodes"] == 2, record["plan"]
        assert record["plan"]["world_size"] == 4 and len(record["rank_memory"]) == 4
        assert {d.split(":")[0] for d in record["provenance"]["devices"]} == {"h100-1", "h100-2"}
        assert record["checks"] == [], record["checks"]  # nor over its memory plan
        assert record["provenance"]["env"]["SLURM_JOB_ID"]
    log = (tmp_path / "logs/tiny/strategy-hsdp/g2n/seed0/train.log").read_text()
    assert "--node_rank 0" in log and "--node_rank 1" in log
    assert "returned a view tensor" not in log
    assert (runs / "strategy-hsdp/g2n/seed0/final/.metadata").is_file()  # its end sharded, as FSDP's
    # the same batches and initial weights; only the order of the gradients' sums differs
    assert hsdp["curves"]["loss"]["steps"] == fsdp["curves"]["loss"]["steps"]
    assert hsdp["curves"]["loss"]["values"] == pytest.approx(fsdp["curves"]["loss"]["values"], rel=1e-4)
    assert hsdp["curves"]["loss"]["values"][-1] < hsdp["curves"]["loss"]["values"][0]  # it trained
