"""bench/census.py: every process started while it watches, with its CPU, kind and test, including those a process
tree's accounting misses."""

import importlib.util
import os
import signal
import subprocess
import sys
import time

from conftest import REPO

spec = importlib.util.spec_from_file_location("census", REPO / "bench" / "census.py")
census = importlib.util.module_from_spec(spec)
spec.loader.exec_module(census)

# Leaves a child nobody waits for (re-parented to init, as a SLURM job is the daemons' child): forked, it keeps its
# parent's arguments and environment for 0.3 s before its exec, then burns 0.6 CPU-s and sleeps until it is killed.
ORPHAN = """
import os, sys, time
burn = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.6: pass\\ntime.sleep(60)"
pid = os.fork()
if pid == 0:
    os.setsid()
    quiet = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(quiet, fd)
    time.sleep(0.3)  # the census reads it here, with its parent's command
    os.execv(sys.executable, [sys.executable, "-c", burn])
print(pid, flush=True)
time.sleep(1.2)  # alive through the first second, in which the census reads its arguments again after its exec
os._exit(0)
"""


def test_a_killed_orphan_is_counted_with_its_cpu_kind_and_test():
    watch = census.Census(period=0.05).start()
    env = os.environ | {"PYTEST_CURRENT_TEST": "tests/test_x.py::test_y (call)"}
    mine = f"run-{os.getpid()}-{time.monotonic_ns()}"  # this test's parent among whatever else the machine starts
    out = subprocess.run([sys.executable, "-c", ORPHAN, "tests/fake_helper.py", mine], capture_output=True, text=True,
                         env=env, timeout=60, check=True)  # fmt: skip
    pid = int(out.stdout.split()[0])
    deadline = time.monotonic() + 60
    while census.stat(pid)["cpu"] < 0.6 and time.monotonic() < deadline:  # burning
        time.sleep(0.1)
    time.sleep(1.0)  # the census reads it, asleep, about 20 times
    os.kill(pid, signal.SIGKILL)  # never reaped by anything this test waits for
    watch.stop()
    (orphan,) = [p for p in watch.processes.values() if p["pid"] == pid]
    assert orphan["cpu"] >= 0.5 and orphan["test"] == "tests/test_x.py::test_y", orphan
    assert "process_time" in orphan["argv"][-1]  # its own command, not its parent's from before its exec
    (parent,) = [p for p in watch.processes.values() if p["argv"][-1:] == [mine]]
    assert census.kind(parent["argv"], parent["comm"]) == "test helper: fake_helper.py"
    assert watch.busy >= orphan["cpu"] - 0.05  # the machine's busy CPU meanwhile holds what was seen
    # Nothing that started before the census began (init, whatever started this test's process).
    assert not {1, os.getppid()} & {p["pid"] for p in watch.processes.values()}


def test_each_kind_of_the_suite_s_processes_is_named():
    venv = "/r/.venv/bin/python3"
    cases = {
        ("torchrun agent", f"{venv} /r/.venv/bin/torchrun --standalone --nproc_per_node 2 -m hwsweep.run.train s.json"),
        ("torchrun agent", f"{venv} -m hwsweep.run.torchrun --standalone --nproc_per_node 2 -m hwsweep.run.tether"),
        ("trainer rank", f"{venv} -u -m hwsweep.run.train results/a/spec.json --threads 1"),
        ("evaluation", f"{venv} -m hwsweep.run.evaluate results/a/spec.json"),
        ("tracker process", "python -c import sys; from hwsweep.run.tracking import serve; serve()"),
        ("workflow script: plot", f"{venv} /w/.snakemake/scripts/tmpab_1x.plot.py"),
        ("snakemake job step", f"{venv} -m snakemake --snakefile Snakefile --target-jobs train:suite=a --allowed-rules"),
        ("snakemake", "/r/.venv/bin/snakemake --cores 2 all"),
        ("hwsweep command", "/r/.venv/bin/python /r/.venv/bin/hwsweep plan --configfile c.yaml"),
        ("bench: fsdp.py", f"{venv} -u bench/fsdp.py --worker"),
        ("example script: lightning", "python examples/lightning/train.py --devices 2"),
        ("pytest-xdist worker", "python -u -c import sys;exec(eval(sys.stdin.readline()))"),
        ("other: cc1plus", "/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus -quiet"),
        ("pytest", "/r/.venv/bin/python -m pytest -m not slow"),
        ("other: python", "/r/.venv/bin/python /tmp/pytest-of-root/pytest-7/popen-gw1/test_x0/spend.py"),
    }
    for expected, line in cases:
        comm = line.split()[0].rsplit("/", 1)[-1]
        assert census.kind(line.split(" "), comm) == expected, line
    forked = f"{venv} -m hwsweep.run.torchrun --standalone --start-method fork -m hwsweep.run.train s.json"
    assert census.kind(forked.split(" "), "hwsweep-rank1") == "trainer rank"  # a worker forked from the agent


def test_the_tables_add_up_by_kind_and_by_test():
    processes = [{"argv": ["python", "-m", "hwsweep.run.train"], "comm": "python", "test": "t::a", "cpu": 3.0},
                 {"argv": ["python", "-m", "hwsweep.run.train"], "comm": "python", "test": "t::b", "cpu": 1.0},
                 {"argv": ["snakemake"], "comm": "snakemake", "test": "", "cpu": 1.0}]  # fmt: skip
    text = census.tables(processes, busy=10.0)
    assert text.startswith("3 processes, 5.0 CPU-s (50% of the machine's 10.0 busy CPU-s meanwhile)")
    assert "| 4.0 | 80.0% | 2 | 2.00 | trainer rank |" in text and "| 1.0 | 20.0% | 1 | 1.00 | snakemake |" in text
    assert "| 3.0 | 60.0% | 1 | 3.00 | t::a |" in text and "| 1.0 | 20.0% | 1 | 1.00 | (none) |" in text
