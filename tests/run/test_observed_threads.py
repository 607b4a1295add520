"""The threads the observer saw beside the plan's: the record's observed summary keeps them, runs.csv has them next to
threads_per_process, and where a process ran another count than it was given (the runtime's own, or the
OMP_NUM_THREADS hwsweep gives a command) the record's checks say so; the run still counts."""

import json
import os
import subprocess
import sys

import pytest
from conftest import script_config

from hwsweep.contracts.records import RunRecord, read, run_row
from hwsweep.contracts.spec import canonical_json
from hwsweep.plan.config import resolve
from hwsweep.run import observe


def report(rank, threads, pid):
    return {"host": "h", "pid": pid, "process_group": None if rank is None else {"rank": rank, "world_size": 2,
            "backend": "gloo"}, "device": "cpu", "threads": threads, "samples_per_step": [8] * 4,
            "optimizer_steps": 10}  # fmt: skip


def test_the_threads_seen_are_kept_and_a_count_other_than_planned_is_named():
    same = observe.observed([report(0, 2, 1), report(1, 2, 2)])
    assert same["threads"] == {"0": 2, "1": 2} and same["threads_per_process"] == 2
    assert observe.threads_differ(same, 2) is None
    assert observe.threads_differ(same, 1) == "planned 1 thread per process, observed 2 on rank 0 and 1 more"
    mixed = observe.observed([report(0, 4, 1), report(1, 2, 2)])
    assert mixed["threads_per_process"] is None  # the ranks differ: no one count
    assert observe.threads_differ(mixed, 2) == "planned 2 threads per process, observed 4 on rank 0"
    alone = observe.observed([report(None, 3, 7)])
    assert observe.threads_differ(alone, 1) == "planned 1 thread per process, observed 3 on pid 7"
    assert observe.threads_differ(alone, None) is None and observe.threads_differ(None, 1) is None  # unknown
    assert observe.threads_differ(observe.observed([report(0, None, 1)]), 1) is None  # an observer that could not say


def test_a_command_gets_its_threads_per_process_in_every_variable_snakemake_set_for_the_job():
    """Snakemake gives a job of 2 threads MKL_NUM_THREADS=2 too, which torch reads over OMP_NUM_THREADS: each of the
    2 processes would run 2 threads on the job's 2 cores."""
    from hwsweep.contracts.command import THREAD_ENV
    from hwsweep.run import runner

    cfg, _ = config(0)
    cfg["trainer"]["command"] = ["python", "no_step.py"]
    cfg["hardware"]["cpu1"]["devices_per_node"] = 2
    cfg["recipe"]["micro_batch"] = 2
    spec = resolve(cfg).spec("s", "default", "cpu1", 0)
    job = dict.fromkeys(THREAD_ENV, "2")  # as snakemake's shell sets them
    given = runner.train_environment(spec, "spec.json", 2, base=job)
    assert "MKL_NUM_THREADS" in THREAD_ENV and {given[k] for k in THREAD_ENV} == {"1"}


def config(threads: int):
    """One process of a script that sets its own torch threads (a count, or 0: leaves the one it was given)."""
    script = (f"import torch\nif {threads}: torch.set_num_threads({threads})\n"
              "model = torch.nn.Linear(3, 1)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
              "for step in range(1, 5):\n    loss = model(torch.randn(4, 3)).pow(2).mean()\n    loss.backward()\n"
              "    optimizer.step()\n    optimizer.zero_grad()\n    print(f'step {step}: loss {loss.item():.4f}')\n")  # fmt: skip
    cfg = script_config({"command": ["python", "threads.py"]},
                        {"global_batch": 4, "micro_batch": 4, "schedule": {"steps": 4, "warmup_steps": 0}},
                        {"loss": {"goal": "min"}})  # fmt: skip
    return cfg, script


@pytest.mark.slow
@pytest.mark.parametrize("threads, check", [(0, None), (3, "observed: planned 1 thread per process, observed 3 on "
                                                             "pid")])  # fmt: skip
def test_a_script_that_sets_its_own_threads_is_flagged_and_runs_csv_has_both(tmp_path, threads, check):
    cfg, script = config(threads)
    cfg["trainer"]["workdir"] = str(tmp_path)
    (tmp_path / "threads.py").write_text(script)
    spec = resolve(cfg).spec("s", "default", "cpu1", 0)
    run = tmp_path / spec.run_dir
    run.mkdir(parents=True)
    (run / "spec.json").write_text(canonical_json(spec))
    job = os.environ | {"MKL_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}  # snakemake's for a job of 2 threads
    proc = subprocess.run([sys.executable, "-m", "hwsweep.run.launch", f"{spec.run_dir}/spec.json", "--threads", "1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=job)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]  # a flag, never a failure
    record = read(RunRecord, run / "train.json")
    assert record.observed["threads_per_process"] == (threads or 1)
    assert [c for c in record.checks if "thread" in c] == ([] if check is None else [record.checks[-1]])
    if check:
        assert record.checks[-1].startswith(check) and check in proc.stderr
    row = run_row(record, None, ["loss"])
    assert (row["threads_per_process"], row["observed_threads"]) == (1, threads or 1)  # the OMP_NUM_THREADS given
    assert list(json.loads((run / "train.json").read_text())["observed"]["threads"].values()) == [threads or 1]
