"""The end of a rank's process (hwsweep.run.shutdown): the process group's worker threads are joined when the run
leaves it, and a process whose threads outlived the group still exits with its status, never SIGABRT."""

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from conftest import REPO, launcher, one_thread
from torch.nn.parallel import DistributedDataParallel

from hwsweep.run import shutdown
from hwsweep.run.reduce import StandardReduction

HERE = REPO / "tests"  # its helper, late_release.py


def named_workers(at_least: int, within: float = 10.0) -> int:
    """shutdown.worker_threads() once it reaches `at_least` (or `within` seconds passed): a worker thread takes its
    name as it starts, a moment after the group is made."""
    end = time.monotonic() + within
    while (n := shutdown.worker_threads()) < at_least and time.monotonic() < end:
        time.sleep(0.01)
    return n


def test_leaving_joins_the_worker_threads_of_a_group_a_ddp_wrapper_held(tmp_path):
    """A group of one in this process: DDP holds it (its reducer, logger, attribute), so destroying the group alone
    would leave gloo's worker threads running into the interpreter's teardown."""
    before = shutdown.worker_threads()  # another test's group in this process may have left some
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    model = torch.nn.Linear(4, 2)
    reduction = StandardReduction(model, 1, None)
    reduction.model = DistributedDataParallel(model)  # what StandardReduction builds at 2 ranks or more
    assert named_workers(before + 1) > before  # the name this module counts is still torch's
    shutdown.leave(reduction)
    assert not dist.is_initialized() and shutdown.worker_threads() == before
    x = torch.randn(3, 4)
    out = reduction.model(x)  # the wrapper computes as the bare model; the backward reduces nothing
    out.sum().backward()
    assert torch.equal(out, model(x)) and model.weight.grad is not None


@pytest.mark.slow
def test_a_rank_whose_collective_is_released_late_still_exits_cleanly(tmp_path):
    """tests/late_release.py: rank 1's gloo worker thread releases a tensor made in Python (taking the GIL) only
    after rank 1 left the group, while its interpreter would be tearing down: before `leave` joined the threads
    (the group held by DDP, or by torch.distributed.nn imported after the group) rank 1 aborted with SIGABRT."""
    cmd = [*launcher(2), str(HERE / "late_release.py"), str(tmp_path / "note")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=one_thread())
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "terminate called" not in out, out[-3000:]
    assert "rank 0: 0 worker threads after leaving" in out and "rank 1: 0 worker threads after leaving" in out


def test_exit_after_is_sys_exit_where_no_worker_thread_runs():
    if shutdown.worker_threads():
        pytest.skip("a group another test left in this process still runs")
    gc.unfreeze()
    try:
        with pytest.raises(SystemExit) as e:
            shutdown.exit_after(lambda: 3)
        assert e.value.code == 3 and gc.get_freeze_count() > 0  # left out of the teardown's collections
    finally:
        gc.unfreeze()  # this is pytest's process, which goes on
    with pytest.raises(ValueError, match="as raised"):
        shutdown.exit_after(lambda: (_ for _ in ()).throw(ValueError("as raised")))


def test_a_process_whose_worker_threads_outlived_the_group_exits_with_its_status(tmp_path):
    """A group something still holds (here a global; FSDP's hold is torch's own): exit_after runs the exit handlers,
    flushes the output and ends the process with main's status, without the teardown."""
    script = tmp_path / "held.py"
    script.write_text(textwrap.dedent(f"""
        import atexit, sys, time
        from pathlib import Path
        import torch.distributed as dist
        from hwsweep.run import shutdown

        class TornDown:
            def __del__(self):  # in the interpreter's teardown, which such a process must not reach
                Path("{tmp_path / 'torn'}").write_text("torn down\\n")

        torn = TornDown()

        def main():
            global held
            dist.init_process_group("gloo", init_method="file://{tmp_path / 'store'}", rank=0, world_size=1)
            held = dist.group.WORLD
            while shutdown.worker_threads() < 2:  # named as they start
                time.sleep(0.01)
            dist.destroy_process_group()
            atexit.register(Path("{tmp_path / 'handled'}").write_text, "ran\\n")
            print(f"{{shutdown.worker_threads()}} worker threads", end="")  # no newline, no flush: exit's to do
            sys.exit("hwsweep: the record was refused")

        shutdown.exit_after(main)
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stdout == "2 worker threads", proc.stdout + proc.stderr
    assert proc.stderr.strip() == "hwsweep: the record was refused" and (tmp_path / "handled").read_text() == "ran\n"
    assert not (tmp_path / "torn").exists()


@pytest.mark.slow
def test_a_forked_worker_whose_worker_threads_outlived_the_group_ends_with_its_status(tmp_path):
    """A worker forked from torchrun's agent (hwsweep.run.torchrun) ends without the interpreter's teardown anyway;
    its status must reach the agent the way torch's function workers hand it over, or the agent waits forever."""
    (tmp_path / "held_forked.py").write_text(textwrap.dedent("""
        import time
        import torch.distributed as dist
        from hwsweep.run import shutdown

        def main():
            global held
            dist.init_process_group("gloo")
            held = dist.group.WORLD
            while shutdown.worker_threads() < 2:  # named as they start
                time.sleep(0.01)
            dist.destroy_process_group()
            print(f"{shutdown.worker_threads()} worker threads", flush=True)
            return 0

        if __name__ == "__main__":
            shutdown.exit_after(main)
    """))
    cmd = [sys.executable, "-m", "hwsweep.run.torchrun", "--standalone", "--nnodes", "1", "--nproc_per_node", "1",
           "--start-method", "fork", "-m", "held_forked"]  # fmt: skip
    env = one_thread() | {"PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the agent still waits for its worker 120 s on")
    assert proc.returncode == 0 and "2 worker threads" in out, out + err[-3000:]
