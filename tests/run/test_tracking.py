"""Trackers (config tracking:): checked config, a tracker that never holds the run, and real runs read back with
each tracker's own reader (TensorBoard's EventAccumulator, MLflow's MlflowClient, W&B's offline run folders)."""

import contextlib
import copy
import dataclasses
import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import BIN, SMALL, launcher, left_behind, one_thread, stopped_after_a_checkpoint

from hwsweep.contracts import io
from hwsweep.contracts.spec import TRACKING_FILE, canonical_json
from hwsweep.contracts.tracking import TrackingConfig, delivery_problem, run_id
from hwsweep.plan.config import ConfigError, resolve
from hwsweep.run import tracking
from hwsweep.run.preempt import EXIT_PREEMPTED

os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # the readers below open the local file store the runs wrote
SECRET = "not-a-real-key-0123456789abcdef0123456789abcdef"
ALL_TAKEN = {"state": "ok", "why": None, "dropped": 0, "undelivered": 0}  # a backend's status: it took every row


def _config(tracking_block, steps: int = 60) -> dict:
    cfg = copy.deepcopy(SMALL)
    cfg["recipe"]["schedule"] = {"steps": steps, "warmup_steps": 5}
    # strict: one and two processes train the same bits, so a tracked cpu2 run is compared with an untracked cpu1 one
    cfg["recipe"] |= {"log_every": 5, "checkpoint_every": 10, "reproducibility": "strict"}
    if tracking_block is not None:
        cfg["tracking"] = tracking_block
    return cfg


@pytest.mark.parametrize(
    "block, field",
    [
        (["tensorboard", "comet"], "tracking.backends: 'comet' is not a tracker"),
        ({"backends": ["mlflow"], "mlflow": {"uri": "htp://server:5000"}}, "tracking.mlflow.uri"),
        ({"backends": ["mlflow"], "mlflow": {"uri": "http://:5000"}}, "tracking.mlflow.uri"),
        ({"backends": ["mlflow"], "mlflow": {"uri": "http://host:port"}}, "tracking.mlflow.uri"),
        ({"backends": ["mlflow"], "mlflow": {"uri": "http://me:pw@host:5000"}}, "MLFLOW_TRACKING_PASSWORD"),
        ({"backends": ["mlflow"], "mlflow": {"uri": "::garbage::"}}, "tracking.mlflow.uri: '::garbage::' is neither a URI"),
        ({"backends": ["mlflow"], "mlflow": {"uri": "localhost:5000"}}, "which MLflow does not take; use http://host:5000"),
        ({"backends": ["mlflow"], "mlflow": {"uri": "not a uri"}}, "tracking.mlflow.uri: 'not a uri' holds a space"),
        ({"backends": ["mlflow"], "mlflow": {"uri": "sqlite://"}}, "tracking.mlflow.uri: 'sqlite://' names no path"),
        ({"backends": ["mlflow"], "mlflow": {"uri": "file://server/mlruns"}}, "file:///path (three slashes)"),
        ({"backends": ["mlflow"], "mlflow": {"uri": "postgresql:///db"}}, "use postgresql://host:port/database"),
        (["wandb"], "tracking.wandb.project: W&B needs a project"),
        ({"backends": ["wandb"], "wandb": {"project": "p", "api_key": "x"}}, "api_key"),
    ],
)
def test_bad_tracking_config_is_one_line(block, field):
    with pytest.raises(ConfigError) as e:
        resolve(_config(block))
    assert field in str(e.value) and "\n" not in str(e.value)


def test_tracking_block_stays_out_of_the_spec():
    off, on = resolve(_config(None)), resolve(_config(["tensorboard", "mlflow"]))
    assert off.tracking == TrackingConfig() and not off.tracking.on
    assert on.tracking.backends == ["tensorboard", "mlflow"] and on.tracking.mlflow.uri is None
    # turning tracking on changes no spec: a finished run is not retrained, a checkpoint still resumes
    assert canonical_json(on.spec("tiny", "default", "cpu2", 1)) == canonical_json(off.spec("tiny", "default", "cpu2", 1))
    target = tracking.run_target(on.spec("tiny", "default", "cpu2", 1), "results/tiny/default/cpu2/seed1")
    assert target.run_id == run_id("tiny", "default", "cpu2", 1) != run_id("tiny", "default", "cpu2", 0)
    assert target.results == Path("results").resolve()
    assert target.params["plan.global_batch"] == 32 and target.tags["gpu_type"] == "cpu"


class Good:
    """A tracker that takes everything at once."""

    name = "good"

    def __init__(self):
        self.rows, self.other, self.closed = [], [], None

    def open(self, target, config):
        pass

    def log(self, rows):
        self.rows += rows

    def final(self, step, values):
        self.other.append(("final", step, values))

    def artifact(self, path):
        self.other.append(("artifact", path.name))

    def close(self, failed=False):
        self.closed = "failed" if failed else "finished"


class Stuck(Good):
    """A tracker whose open does not return until the test lets it (a server that accepts and never answers)."""

    name = "stuck"
    release = threading.Event()

    def open(self, target, config):
        Stuck.release.wait(120)


class Broken(Good):
    name = "broken"

    def log(self, rows):
        raise ConnectionError("tracker down\nTraceback-like second line")


class Slow(Good):
    """A tracker that takes 0.3 s per evaluation: slower than the run, but it keeps taking them."""

    name = "slow"

    def final(self, step, values):
        time.sleep(0.3)
        super().final(step, values)


def _tracker(monkeypatch, tmp_path, names, system=False, **config):
    monkeypatch.setattr(tracking.worker, "BACKENDS", {b.name: b for b in (Good, Stuck, Broken, Slow)})
    monkeypatch.setattr(Stuck, "release", threading.Event())  # each test's stuck tracker is stuck until it says
    target = tracking.Target(run_id="x", experiment="s", name="n", group="g", job_type="j", folder=tmp_path, results=tmp_path)
    return tracking.Tracker(target, TrackingConfig(backends=names, **config), system=system, process=False)


def test_system_metrics_are_sampled_from_the_start_and_at_the_end_while_a_tracker_is_stuck(monkeypatch, tmp_path):
    """A run shorter than system_every still has its system metrics: a second in, and at its end. A tracker
    stuck in its open holds none of them back."""
    tracker = _tracker(monkeypatch, tmp_path, ["stuck", "good"], system=True, system_every=60, close_timeout=1)
    for step in range(1, 16):
        tracker.log(step, {"loss": 1 / step})
        time.sleep(0.1)
    tracker.close()
    Stuck.release.set()
    sampled = [step for step, values in _backend(tracker, "good").rows if "system/cpu_percent" in values]
    assert len(sampled) == 2 and sampled[0] < 15 and sampled[-1] == 15, sampled
    assert {"system/process_cpu_percent", "system/memory_percent", "system/process_memory_gb"} <= set(
        next(values for _, values in _backend(tracker, "good").rows if "system/cpu_percent" in values))


def _backend(tracker, name):
    return next(c.backend for c in tracker.worker.channels if c.name == name)


# Spins while fewer tasks than the cores + 1 run beside it (/proc/loadavg's running count, itself left out), sleeps
# otherwise: alone, two of them make a test's machine as busy as two CPU-bound loops do; inside the suite, whose other
# workers already keep more tasks than cores running, they take those tests' CPU only where it would be idle.
BUSY = """
import os, time
cores = len(os.sched_getaffinity(0))
while True:
    with open("/proc/loadavg") as f:
        others = int(f.read().split()[3].split("/")[0]) - 1
    until = time.monotonic() + 0.05
    if others > cores:
        time.sleep(0.05)
    while others <= cores and time.monotonic() < until:
        pass
"""


@pytest.fixture
def loaded():
    """A busy 2-core node beside the test: at least one task more running than there are cores (two loops beside a
    test that runs alone; the suite's other workers where they keep it that busy): what must hold there is timed
    under that load."""
    loops = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(2)]
    yield
    for loop in loops:
        loop.kill()
        loop.wait()


def test_a_run_over_before_the_tracker_started_still_has_a_cpu_sample(monkeypatch, tmp_path):
    """Everything, the stop included, was queued before the clients' side ran (a short run beside a tracker
    process slow to start): its one system sample, at the end, still measures the CPU over an interval."""
    monkeypatch.setattr(tracking.worker, "BACKENDS", {"good": Good})
    # The machine's CPU counters as a coarse clock would have them: they move every 0.2 s (the kernel's, 0.01 s)
    monkeypatch.setattr(tracking.System, "_machine", staticmethod(lambda: (float(int(time.monotonic() * 5)), 0.0)))
    target = tracking.Target(run_id="x", experiment="s", name="n", group="g", job_type="j", folder=tmp_path, results=tmp_path)
    items = queue.Queue()
    for step in (1, 2, 3):
        items.put(("log", [step, {"loss": 1 / step}]))
    items.put(("stop", [False, 1]))
    worker = tracking.Worker(target, TrackingConfig(backends=["good"], system_every=60), True, os.getpid(), lambda *_: None)
    worker.run(lambda timeout: items.get(timeout=timeout))
    (sampled,) = [values for _, values in worker.channels[0].backend.rows if "system/memory_percent" in values]
    assert "system/cpu_percent" in sampled and "system/process_cpu_percent" in sampled, sampled


def test_a_full_queue_drops_and_counts_and_never_holds_the_training_thread(monkeypatch, tmp_path, loaded):
    tracker = _tracker(monkeypatch, tmp_path, ["stuck", "good"], queue_size=5, close_timeout=0.5)
    t0 = time.perf_counter()
    for step in range(1, 101):
        tracker.log(step, {"loss": 1.0 / step, "mfu": None})
    assert time.perf_counter() - t0 < 0.5  # 100 steps queued while a tracker hangs in its open
    status = tracker.close()  # gives up on the stuck tracker once it took nothing for close_timeout
    stuck, good = status["backends"]["stuck"], status["backends"]["good"]
    assert stuck["state"] == "failed" and "took nothing for 0.5 s (tracking.close_timeout) while opening" in stuck["why"]
    # each backend's queue holds 5 rows: what the stuck one never took is counted, dropped or undelivered
    assert stuck["undelivered"] == 5 and stuck["dropped"] == 95, status
    rows = _backend(tracker, "good").rows  # the other one never waited for it
    assert good == {"state": "ok", "why": None, "dropped": 100 - len(rows), "undelivered": 0}
    assert [s for s, _ in rows] == sorted(s for s, _ in rows) and rows[0] == (1, {"loss": 1.0})
    Stuck.release.set()


def test_each_backend_opens_and_takes_rows_on_its_own(monkeypatch, tmp_path, capsys):
    """A tracker stuck in its open (longer than close_timeout) and a failing one cost the others nothing: they
    take every row, the evaluation and the record, the stuck one is given up at the end, each is one warning
    line, and the status names both."""
    tracker = _tracker(monkeypatch, tmp_path, ["stuck", "broken", "good"], close_timeout=3)
    for step in (1, 2, 3):
        tracker.log(step, {"loss": float(step)})
    tracker.final(3, {"final/accuracy": 0.5})
    drained = tracker.drain()  # waits for the good one only as long as it takes; the stuck one is late
    assert drained["backends"]["good"] == {"state": "ok", "why": None, "dropped": 0, "undelivered": 0}
    assert drained["backends"]["stuck"]["state"] == "late" and drained["backends"]["stuck"]["undelivered"] == 4
    assert drained["backends"]["broken"] == {"state": "failed", "why": "ConnectionError: tracker down",
                                             "dropped": 0, "undelivered": 4}  # fmt: skip
    t0 = time.perf_counter()
    status = tracker.close(artifacts=[tmp_path / "train.json"])
    assert time.perf_counter() - t0 < 2  # the drain waited close_timeout for the stuck one: not again
    Stuck.release.set()
    good = _backend(tracker, "good")
    assert [s for s, _ in good.rows] == [1, 2, 3] and good.closed == "finished"
    assert good.other == [("final", 3, {"final/accuracy": 0.5}), ("artifact", "train.json")]
    assert status["backends"]["good"]["state"] == "ok"
    assert status["backends"]["stuck"] == {"state": "failed", "dropped": 0, "undelivered": 5,
                                           "why": "took nothing for 3 s (tracking.close_timeout) while opening"}  # fmt: skip
    assert status["backends"]["broken"]["undelivered"] == 5
    err = capsys.readouterr().err
    assert err.count("hwsweep: warning: tracking:") == 2, err
    assert err.count("tracking: broken failed (ConnectionError: tracker down); 4 rows undelivered") == 1, err
    assert err.count("tracking: stuck failed (took nothing for 3 s (tracking.close_timeout) while opening)") == 1


def test_a_slow_tracker_that_keeps_taking_rows_is_waited_for_up_to_close_limit(monkeypatch, tmp_path, loaded):
    """Nine items of 0.3 s each: 2.7 s in all, longer than close_timeout, but never that long without progress."""
    tracker = _tracker(monkeypatch, tmp_path, ["slow"], close_timeout=1, close_limit=60)
    for step in range(1, 10):
        tracker.final(step, {"final/accuracy": step / 10})
    status = tracker.close()
    assert status["backends"]["slow"] == {"state": "ok", "why": None, "dropped": 0, "undelivered": 0}
    assert [step for _, step, _ in _backend(tracker, "slow").other] == list(range(1, 10))

    tracker = _tracker(monkeypatch, tmp_path, ["slow"], close_timeout=1, close_limit=1)  # the bound in all
    for step in range(1, 10):
        tracker.final(step, {"final/accuracy": step / 10})
    status = tracker.close()
    slow = status["backends"]["slow"]
    assert slow["state"] == "failed" and slow["why"] == "still sending after 1 s (tracking.close_limit)", slow
    assert slow["undelivered"] == 9 - len(_backend(tracker, "slow").other) > 0


def test_the_status_phrase_names_each_backend_that_did_not_take_everything():
    assert delivery_problem(None) == "" and delivery_problem({"backends": {"tensorboard": ALL_TAKEN}}) == ""
    status = {"backends": {"tensorboard": ALL_TAKEN | {"dropped": 3},
                           "mlflow": {"state": "failed", "why": "MlflowException: down", "dropped": 0, "undelivered": 12},
                           "wandb": ALL_TAKEN | {"state": "late", "undelivered": 2}}}  # fmt: skip
    assert delivery_problem(status) == ("tensorboard: 3 rows dropped; mlflow failed (MlflowException: down), 12 rows "
                                        "undelivered; wandb late, 2 rows undelivered")  # fmt: skip
    earlier = {"backends": {"mlflow": "ConnectionError: down", "tensorboard": "ok"}}  # an earlier hwsweep's record
    assert delivery_problem(earlier) == "mlflow failed (ConnectionError: down)"


def test_status_reads_what_each_record_says_its_trackers_took(tmp_path):
    """`status`'s tracking column, from the stored records: the training's and the evaluation's, each named."""
    from hwsweep.analysis.status import tracking_problem

    spec = resolve(_config(["tensorboard", "mlflow"])).spec("tiny", "default", "cpu1", 0)
    spec = type(spec).from_dict(spec.to_dict() | {"run_dir": str(tmp_path)})
    assert tracking_problem(spec, evaluated=True) == ""  # nothing recorded yet
    failed = {"state": "failed", "why": "MlflowException: down", "dropped": 0, "undelivered": 12}
    io.write_json(tmp_path / "train.json", {"tracking": {"id": "x", "backends": {"tensorboard": ALL_TAKEN, "mlflow": failed}}})
    io.write_json(tmp_path / "eval.json", {"tracking": {"id": "x", "backends": {"tensorboard": ALL_TAKEN, "mlflow": ALL_TAKEN}}})
    assert tracking_problem(spec, evaluated=True) == "train: mlflow failed (MlflowException: down), 12 rows undelivered"
    io.write_json(tmp_path / "eval.json", {"tracking": {"id": "x", "backends": {"tensorboard": ALL_TAKEN | {"state": "late", "undelivered": 1}}}})
    assert tracking_problem(spec, evaluated=True).endswith(" | eval: tensorboard late, 1 row undelivered")
    assert "eval" not in tracking_problem(spec, evaluated=False)


def test_system_memory_counts_the_run_s_children_but_not_the_tracker_s_process(monkeypatch):
    """system/process_memory_gb: the run's process and its descendants (a command's processes), less the
    tracker's own process (a child of the run's) and its children (W&B's service)."""
    child = subprocess.Popen([sys.executable, "-c", "x = b'1' * (300 * 2**20); print(flush=True); import time; time.sleep(120)"],
                             stdout=subprocess.PIPE)  # fmt: skip
    try:
        child.stdout.readline()  # its 300 MiB are written
        run, system = os.getpid(), tracking.System(None, os.getpid())
        with_it = system.sample()
        monkeypatch.setattr(os, "getpid", lambda: child.pid)  # as if the child were the tracker's process
        without = system.sample()
        assert with_it["system/process_memory_gb"] - without["system/process_memory_gb"] > 0.29, (with_it, without)
        assert 0 < with_it["system/memory_percent"] < 100 and system.pid == run
    finally:
        child.kill()
        child.wait()


def test_the_clients_run_in_their_own_process_whose_end_is_one_warning(tmp_path, capfd):
    """The clients run in the tracker's process, on the CPUs it is given (those the run's processes left spare),
    so their Python never holds the run's interpreter lock. If that process dies, the run's close returns at
    once, with one warning line, and the status says why."""
    target = tracking.Target(run_id="p", experiment="s", name="n", group="g", job_type="j", folder=tmp_path, results=tmp_path)
    cpu = max(os.sched_getaffinity(0))
    tracker = tracking.Tracker(target, TrackingConfig(backends=["tensorboard"]), system=False, cpus=[cpu])
    tracker.log(1, {"loss": 2.0})
    assert tracker.drain(timeout=60)["backends"]["tensorboard"]["state"] == "ok"
    child = tracker._process
    assert child.pid != os.getpid() and os.sched_getaffinity(child.pid) == {cpu}
    assert "serve()" in Path(f"/proc/{child.pid}/cmdline").read_text()
    assert list((tmp_path / tracking.FOLDER).glob("events.out.tfevents.*"))  # the child's writer
    child.kill()
    t0 = time.perf_counter()
    tracker.log(2, {"loss": 1.0})
    status = tracker.drain(timeout=60)  # waiting as the process dies: its end wakes the wait
    assert time.perf_counter() - t0 < 10
    assert status["backends"]["tensorboard"]["state"] == "failed"
    assert status["backends"]["tensorboard"]["why"] == "the tracker's process ended with exit code -9"
    t0 = time.perf_counter()
    assert tracker.close(timeout=60) == status  # after its end: nothing to wait for
    assert time.perf_counter() - t0 < 10
    err = capfd.readouterr().err
    assert err.count("hwsweep: warning: tracking:") == 1, err


def _open_mlflow_run(results: str, index: int, barrier) -> None:
    target = tracking.Target(run_id=f"race{index}", experiment="race", name=f"v/cpu1/seed{index}", group="race/v",
                             job_type="cpu1", folder=Path(results), results=Path(results))  # fmt: skip
    barrier.wait()
    tracking.Mlflow().open(target, TrackingConfig(backends=["mlflow"]))


def _race_mlflow_opens(folders: list[str], count: int) -> None:
    """For each results folder in turn, `count` processes forked from this one (MLflow imported once, before the
    forks) open a run of one new experiment at the same moment; their exit codes go to <folder>.exitcodes.json."""
    import multiprocessing

    from mlflow.tracking import MlflowClient  # noqa: F401 - imported before the barrier: the opens race

    ctx = multiprocessing.get_context("fork")
    for results in folders:
        barrier = ctx.Barrier(count)
        workers = [ctx.Process(target=_open_mlflow_run, args=(results, i, barrier)) for i in range(count)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)
        Path(f"{results}.exitcodes.json").write_text(json.dumps([w.exitcode for w in workers]))


def test_runs_starting_together_share_one_mlflow_experiment(monkeypatch, tmp_path):
    """The file store does not refuse a second experiment of one name: runs of a suite starting at the same
    moment each made their own (seen in a test sweep: one run missing from the suite's experiment), and the
    first clients of a new store each wrote its default experiment (seen in a fresh clone: 'meta.yaml exists')."""
    import multiprocessing

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # the spawned process inherits it
    folders = [str(tmp_path / f"results{attempt}") for attempt in range(2)]
    # One process imports MLflow, then forks the 6 that race (12 spawned processes each importing it cost 13 s of CPU)
    racer = multiprocessing.get_context("spawn").Process(target=_race_mlflow_opens, args=(folders, 6))
    racer.start()
    racer.join(240)
    assert racer.exitcode == 0
    for results in folders:
        assert json.loads(Path(f"{results}.exitcodes.json").read_text()) == [0] * 6
        client = _mlflow(Path(results))
        named = [e for e in client.search_experiments() if e.name == "race"]
        assert len(named) == 1, [e.experiment_id for e in named]
        assert len(client.search_runs([named[0].experiment_id])) == 6


def test_a_resumed_run_sends_mlflow_only_the_steps_it_lacks(monkeypatch, tmp_path):
    """A hard kill after the checkpoint at 20 but after the loss at 25 and 30 reached the store: the resumed
    attempt repeats 25 and 30 (bitwise the same values), and the store keeps each step once."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    config = TrackingConfig(backends=["mlflow"])
    target = tracking.Target(run_id="resumed", experiment="resume", name="v/cpu1/seed0", group="resume/v",
                             job_type="cpu1", folder=tmp_path, results=tmp_path)  # fmt: skip
    killed = tracking.Mlflow()
    killed.open(target, config)
    killed.log([(s, {"loss": 1 / s}) for s in range(5, 31, 5)])  # never closed: killed
    resumed = tracking.Mlflow()
    resumed.open(dataclasses.replace(target, start_step=20), config)
    resumed.log([(s, {"loss": 1 / s, "lr": 0.1}) for s in range(25, 41, 5)])
    resumed.final(40, {"final/exact_accuracy": 0.5})
    resumed.close()
    time.sleep(0.01)  # a later millisecond: MLflow's latest value is the newest entry at the same step
    evaluated_again = tracking.Mlflow()  # the evaluate job, run again, continues the run at its last step
    evaluated_again.open(dataclasses.replace(target, start_step=40), config)
    evaluated_again.final(40, {"final/exact_accuracy": 0.25})
    evaluated_again.close()
    client = _mlflow(tmp_path)
    (run,) = client.search_runs([client.get_experiment_by_name("resume").experiment_id])
    history = client.get_metric_history(run.info.run_id, "loss")
    assert sorted(m.step for m in history) == list(range(5, 41, 5))  # each step once
    assert {m.step: m.value for m in history} == {s: 1 / s for s in range(5, 41, 5)}
    assert [m.step for m in client.get_metric_history(run.info.run_id, "lr")] == [25, 30, 35, 40]  # new: all sent
    assert run.data.metrics["final/exact_accuracy"] == 0.25  # an evaluation done again is sent again


def _mlflow(results: Path):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=(results / "mlruns").as_uri())


def _scalars(folder: Path) -> dict:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}, events


def _run(tmp_path, name: str, block, kill_after_checkpoint: bool = False, steps: int = 60, env=None, hardware="cpu1",
         hard_kill_after: int | None = None, checkpoint_every: int = 10):  # fmt: skip
    """The built-in trainer on one spec in `tmp_path/name`, laid out as results/ is; a kill (SIGTERM once the first
    checkpoint is written; or SIGKILL once metrics.jsonl is past step `hard_kill_after`) and a rerun that resumes
    it when asked. Returns the run folder and the last output."""
    run_dir = tmp_path / name / f"results/tiny/default/{hardware}/seed0"
    cfg = _config(block, steps)
    cfg["recipe"]["checkpoint_every"] = checkpoint_every
    matrix = resolve(cfg)
    spec = matrix.spec("tiny", "default", hardware, 0).to_dict() | {"run_dir": str(run_dir)}
    path = tmp_path / f"{name}.json"
    io.write_json(path, spec)
    io.write_json(run_dir / TRACKING_FILE, matrix.tracking.to_dict())  # what the workflow writes
    cmd = [*launcher(spec["plan"]["devices_per_node"]), "-m", "hwsweep.run.train", str(path)]
    env = one_thread() | (env or {})
    if kill_after_checkpoint:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out, _ = stopped_after_a_checkpoint(proc, run_dir / "checkpoints")
        assert proc.returncode == EXIT_PREEMPTED, out[-3000:]
    if hard_kill_after is not None:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline, last = time.monotonic() + 180, 0
        while last <= hard_kill_after and proc.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError, IndexError, KeyError):
                last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])["step"]
            time.sleep(0.01)
        proc.kill()
        proc.wait()
        assert hard_kill_after < last < steps, last  # killed between a checkpoint and the next one
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return run_dir, done.stderr


@pytest.fixture(scope="module")
def untracked(tmp_path_factory):
    """The same run with tracking off: the numbers a tracked run must equal."""
    run_dir, _ = _run(tmp_path_factory.mktemp("untracked"), "off", None)
    return json.loads((run_dir / "train.json").read_text())


@pytest.mark.slow
def test_killed_and_resumed_run_is_one_tracked_run_in_every_tracker(tmp_path, untracked):
    block = {"backends": ["tensorboard", "mlflow", "wandb"], "wandb": {"project": "hwsweep-test", "mode": "offline"}}
    run_dir, err = _run(tmp_path, "on", block, kill_after_checkpoint=True, env={"WANDB_API_KEY": SECRET})
    record = json.loads((run_dir / "train.json").read_text())
    assert record["restarts"] == 1 and record["resumed_from_step"]
    # bitwise the same training with tracking on (and a kill) as off
    assert record["curves"] == untracked["curves"] and record["metrics"] == untracked["metrics"]
    assert record["tracking"]["backends"] == {name: ALL_TAKEN for name in ("tensorboard", "mlflow", "wandb")}, err
    loss = dict(zip(record["curves"]["loss"]["steps"], record["curves"]["loss"]["values"]))  # every step
    logged = list(range(5, 61, 5))  # the trackers get the loss at the log steps (log_every 5)

    scalars, events = _scalars(run_dir / "tensorboard")  # one curve: the killed attempt's later steps purged
    assert [s for s, _ in scalars["loss"]] == logged
    assert [v for _, v in scalars["loss"]] == pytest.approx([loss[s] for s in logged], rel=1e-6)  # float32 there
    assert {"lr", "grad_norm", "samples_per_second_per_device", "peak_memory_gb"} <= set(scalars)
    assert [s for s, _ in scalars["lr"]] == list(range(5, 61, 5))
    assert events.PluginTagToContent("hparams")  # the plan as hparams

    client = _mlflow(tmp_path / "on/results")
    experiment = client.get_experiment_by_name("tiny")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1  # the resumed attempt continued the same run
    run = runs[0]
    assert run.info.run_name == "default/cpu1/seed0" and run.info.status == "FINISHED"
    assert {k: run.data.tags[k] for k in ("suite", "variant", "hardware", "seed", "gpu_type")} == {
        "suite": "tiny", "variant": "default", "hardware": "cpu1", "seed": "0", "gpu_type": "cpu"}  # fmt: skip
    assert run.data.tags[tracking.ID_TAG] == record["tracking"]["id"]
    assert run.data.params["plan.global_batch"] == "32" and run.data.params["recipe.model.width"] == "32"
    # One entry per step. SIGTERM checkpoints at the step it stops, so nothing repeats here; a hard kill's
    # repeated steps: test_a_resumed_run_sends_mlflow_only_the_steps_it_lacks.
    for key in ("loss", "lr"):
        assert sorted(m.step for m in client.get_metric_history(run.info.run_id, key)) == logged, key
    history = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "loss")}
    assert history == {s: loss[s] for s in logged}
    assert "train.json" in [a.path for a in client.list_artifacts(run.info.run_id)]

    offline = sorted((run_dir / "wandb").glob(f"offline-run-*-{record['tracking']['id']}"))
    assert len(offline) == 2 and all(list(d.glob("*.wandb")) for d in offline)  # one per attempt, same id: one run once synced

    # The evaluate job adds the held-out metrics to the same tracked run, at the last step.
    env = one_thread() | {"WANDB_API_KEY": SECRET}
    done = subprocess.run([sys.executable, "-m", "hwsweep.run.evaluate", str(tmp_path / "on.json")], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr[-3000:]
    held_out = {k: v for k, v in json.loads((run_dir / "eval.json").read_text())["metrics"].items() if v is not None}
    assert len(client.search_runs([experiment.experiment_id])) == 1
    run = client.get_run(run.info.run_id)
    assert run.info.status == "FINISHED" and "eval.json" in [a.path for a in client.list_artifacts(run.info.run_id)]
    final = {k.removeprefix(tracking.FINAL_PREFIX): v for k, v in run.data.metrics.items() if k.startswith("final/")}
    assert final == pytest.approx(held_out) and "token_accuracy" in final
    assert [m.step for m in client.get_metric_history(run.info.run_id, "final/token_accuracy")] == [60]
    scalars, _ = _scalars(run_dir / "tensorboard")
    assert scalars["final/token_accuracy"] == [(60, pytest.approx(held_out["token_accuracy"], rel=1e-6))]
    assert [s for s, _ in scalars["loss"]] == logged  # still one curve
    offline = sorted((run_dir / "wandb").glob(f"offline-run-*-{record['tracking']['id']}"))
    assert len(offline) == 3 and b"final/token_accuracy" in next(offline[-1].glob("*.wandb")).read_bytes()

    for path in [p for p in (tmp_path / "on").rglob("*") if p.is_file()]:  # W&B's own folders included
        assert SECRET.encode() not in path.read_bytes(), path  # the key stays in the environment


def _wandb(run_dir: Path, run_id: str) -> list[list[dict]]:
    """Each W&B attempt's records (its offline-run-*-ID folders, oldest first), read with W&B's own reader."""
    return [_wandb_attempt(folder) for folder in sorted((run_dir / "wandb").glob(f"offline-run-*-{run_id}"))]


def _wandb_attempt(folder: Path) -> list[dict]:
    (path,) = folder.glob("run-*.wandb")
    out = subprocess.run([str(BIN / "wandb"), "leet", "inspect", "--json", str(path)], capture_output=True, text=True,
                         check=True, timeout=120).stdout  # fmt: skip
    return [json.loads(line) for line in out.splitlines()]


def _wandb_steps(records: list[dict], key: str) -> list[int]:
    return [r["history"].get("step", {}).get("num", 0) for r in records if r["type"] == "history" and key in r["history"]["item"]]


def _ended(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wandb_summary(records: list[dict]) -> dict:
    return {k: v for r in records if r["type"] == "summary" for k, v in r["summary"].get("update", {}).items()}


@pytest.mark.slow
def test_a_hard_killed_and_resumed_run_holds_every_step_once_in_every_tracker(tmp_path):
    """kill -9 after the loss at steps past the checkpoint reached the trackers: the resumed attempt repeats those
    steps (bitwise the same values), and each tracker still holds each step once: TensorBoard's reader purges them,
    MLflow and W&B are not sent what they hold (W&B offline: what the killed attempt's run file holds). Neither
    attempt's tracker leaves anything in its TMPDIR (the clients' folders: W&B makes two), though the run's
    process, killed or finished, ends before the tracker's process does."""
    block = {"backends": ["tensorboard", "mlflow", "wandb"], "wandb": {"project": "hwsweep-test", "mode": "offline"}}
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    run_dir, err = _run(tmp_path, "killed", block, steps=120, checkpoint_every=60, hard_kill_after=65,
                        env={"TMPDIR": str(temporary)})  # fmt: skip
    deadline = time.monotonic() + 60  # the last tracker's process ends after the run's
    while left_behind(temporary) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left_behind(temporary) == []
    record = json.loads((run_dir / "train.json").read_text())
    assert record["restarts"] == 1 and record["resumed_from_step"] == 60
    assert record["tracking"]["backends"] == {name: ALL_TAKEN for name in block["backends"]}, err
    logged = list(range(5, 121, 5))
    loss = dict(zip(record["curves"]["loss"]["steps"], record["curves"]["loss"]["values"]))

    scalars, _ = _scalars(run_dir / "tensorboard")
    assert [s for s, _ in scalars["loss"]] == logged
    assert "system/cpu_percent" in scalars and "system/process_cpu_percent" in scalars  # at each attempt's end

    client = _mlflow(tmp_path / "killed/results")
    (run,) = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "loss")) == logged
    assert run.info.status == "FINISHED"  # the killed attempt's tracker closed it as failed before this one began

    killed, resumed = _wandb(run_dir, record["tracking"]["id"])
    sent = _wandb_steps(killed, "loss")
    # Steps past the checkpoint (60) reached W&B before the kill; how many depends on how far the trainer got
    # between the kill's poll and the signal (65 alone, on a fast poll: it once read "> 65" and failed so).
    assert max(sent) > 60 and _wandb_steps(resumed, "loss")[0] > max(sent)  # the repeated steps were held back
    assert sent + _wandb_steps(resumed, "loss") == logged
    values = {r["history"]["step"]["num"]: r["history"]["item"]["loss"] for r in killed + resumed
              if r["type"] == "history" and "loss" in r["history"]["item"]}  # fmt: skip
    assert values == pytest.approx({s: loss[s] for s in logged}, rel=1e-6)
    assert _wandb_steps(resumed, "system/cpu_percent")


@pytest.mark.slow
def test_a_fresh_start_moves_earlier_w_b_attempts_out_of_the_sync(tmp_path, monkeypatch):
    """A run started again from scratch (its checkpoints lost) replaces its tracked run, as TensorBoard and MLflow
    do: the earlier W&B offline attempts move to wandb/replaced/, out of `wandb sync .../wandb/offline-run-*`.
    Each attempt's file is whole when its close answers, and its process leaves no temporary folder behind."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    block = {"backends": ["wandb"], "wandb": {"project": "hwsweep-test", "mode": "offline"}}
    config = TrackingConfig.from_dict(block, "tracking")
    target = tracking.Target(run_id="fresh0", experiment="s", name="v/cpu1/seed0", group="s/v", job_type="cpu1",
                             folder=tmp_path, results=tmp_path)  # fmt: skip
    for steps in ((5, 10, 15), (5, 10)):  # the second starts again from scratch
        tracker = tracking.Tracker(target, config, system=False)
        for step in steps:
            tracker.log(step, {"loss": 1 / step})
        tracker.drain()
        services = psutil.Process(tracker._process.pid).children(recursive=True)  # W&B's service writes the file
        assert services and tracker.close()["backends"]["wandb"] == ALL_TAKEN
        assert all(map(_ended, services))  # by the close's answer, not later, or the file may never be whole
        time.sleep(1.1)  # W&B names an attempt's folder by the second it started
        tracker._process.wait(timeout=30)
        assert not list(temporary.iterdir())  # gone by its end (it removes its own; so does this side, seeing it end)
    attempts = _wandb(tmp_path, "fresh0")  # what `wandb sync` takes
    assert [_wandb_steps(a, "loss") for a in attempts] == [[5, 10]]
    (replaced,) = (tmp_path / "wandb" / tracking.REPLACED_FOLDER).glob("offline-run-*-fresh0")
    assert _wandb_steps(_wandb_attempt(replaced), "loss") == [5, 10, 15]  # kept, apart


@pytest.mark.slow
def test_a_stuck_tracker_costs_the_others_nothing_in_the_tracker_s_process(tmp_path, monkeypatch, capfd, loaded):
    """The real clients in the tracker's process on a loaded machine: MLflow's server accepts connections and never
    answers, so its open takes longer than close_timeout. TensorBoard and W&B take every row, the system metrics
    (sampled from the start and at the end) and the evaluation; the close gives up on MLflow alone, one warning
    line, and the status names it."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "300")  # the client would wait minutes for this server
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        # close_timeout: W&B's open took 12 s here beside two busy loops on a machine loaded to 20
        block = {"backends": ["tensorboard", "mlflow", "wandb"], "close_timeout": 30, "system_every": 0.5,
                 "mlflow": {"uri": f"http://127.0.0.1:{server.getsockname()[1]}"},
                 "wandb": {"project": "hwsweep-test", "mode": "offline"}}  # fmt: skip
        config = TrackingConfig.from_dict(block, "tracking")
        folder = tmp_path / "run"
        target = tracking.Target(run_id="stuck0", experiment="s", name="v/cpu1/seed0", group="s/v", job_type="cpu1",
                                 folder=folder, results=tmp_path, params={"seed": 0})  # fmt: skip
        tracker = tracking.Tracker(target, config)
        for step in range(1, 21):
            tracker.log(step, {"loss": 1 / step})
            time.sleep(0.05)
        tracker.final(20, {"final/accuracy": 0.75})
        t0 = time.monotonic()
        status = tracker.close()
        assert time.monotonic() - t0 < 90
    mlflow = status["backends"]["mlflow"]
    assert mlflow["state"] == "failed" and mlflow["why"] == "took nothing for 30 s (tracking.close_timeout) while opening"
    assert mlflow["undelivered"] >= 22  # 20 rows, the system samples, the evaluation
    assert status["backends"]["tensorboard"] == status["backends"]["wandb"] == ALL_TAKEN, status
    err = capfd.readouterr().err
    assert err.count("warning") == 1 and "tracking: mlflow failed (took nothing for 30 s" in err, err

    scalars, _ = _scalars(folder / "tensorboard")
    assert [s for s, _ in scalars["loss"]] == list(range(1, 21))
    assert scalars["final/accuracy"] == [(20, 0.75)]
    assert {"system/cpu_percent", "system/process_cpu_percent", "system/memory_percent", "system/process_memory_gb"} <= set(scalars)
    (attempt,) = _wandb(folder, "stuck0")
    assert _wandb_steps(attempt, "loss") == list(range(1, 21)) and _wandb_steps(attempt, "system/cpu_percent")
    assert _wandb_summary(attempt)["final/accuracy"] == 0.75


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_unreachable_tracking_server_is_one_warning_and_the_same_numbers(tmp_path, untracked, monkeypatch):
    """MLflow's server refuses connections: training and evaluation are the same as untracked, each job's log has
    one warning line, TensorBoard still gets the curves, the system metrics and the evaluation, and both records
    and `status` name MLflow."""
    uri = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    block = {"backends": ["mlflow", "tensorboard"], "mlflow": {"uri": uri}}
    run_dir, err = _run(tmp_path, "down", block, hardware="cpu2")  # two ranks: only rank 0 tracks
    record = json.loads((run_dir / "train.json").read_text())
    assert record["curves"] == untracked["curves"]
    assert err.count("warning") == 1 and "tracking: mlflow failed (MlflowException: " in err, err
    mlflow = record["tracking"]["backends"]["mlflow"]
    assert mlflow["state"] == "failed" and mlflow["why"].startswith("MlflowException: ") and mlflow["undelivered"] > 12
    assert record["tracking"]["backends"]["tensorboard"] == ALL_TAKEN
    scalars, _ = _scalars(run_dir / "tensorboard")
    spread = [v for _, v in scalars["rank_step_time_spread"]]  # the slowest of the two ranks against the median
    assert len(spread) == 12 and all(v >= 1 for v in spread)
    assert [s for s, _ in scalars["system/cpu_percent"]][-1] == 60  # sampled at the end too

    done = subprocess.run([sys.executable, "-m", "hwsweep.run.evaluate", str(tmp_path / "down.json")], capture_output=True,
                          text=True, timeout=300, env=one_thread())  # fmt: skip
    assert done.returncode == 0 and done.stderr.count("warning") == 1, done.stderr[-3000:]
    evaluated = json.loads((run_dir / "eval.json").read_text())
    assert evaluated["tracking"]["backends"]["mlflow"]["state"] == "failed"
    assert evaluated["tracking"]["backends"]["tensorboard"] == ALL_TAKEN
    scalars, _ = _scalars(run_dir / "tensorboard")
    assert scalars["final/token_accuracy"] == [(60, pytest.approx(evaluated["metrics"]["token_accuracy"], rel=1e-6))]

    from hwsweep.analysis.status import write_status

    monkeypatch.chdir(tmp_path / "down")
    status = write_status(resolve(_config(block)))
    row = status[(status.hardware == "cpu2") & (status.seed == 0)].iloc[0]
    assert row.tracking.startswith("train: mlflow failed (MlflowException: ") and " | eval: mlflow failed (" in row.tracking
    assert "tensorboard" not in row.tracking and set(status[status.seed == 1].tracking) == {""}


@pytest.mark.slow
def test_suite_tables_reach_every_tracker(tmp_path):
    suite_dir = tmp_path / "results/tiny"
    suite_dir.mkdir(parents=True)
    tables = {}
    for name in ("comparison", "equivalence", "speedup"):
        tables[name] = suite_dir / f"{name}.csv"
        tables[name].write_text(f"hardware,{name}_value\ncpu1,1.0\ncpu2,0.5\n")
    config = TrackingConfig(backends=["tensorboard", "mlflow", "wandb"], close_timeout=120)
    config = TrackingConfig.from_dict(config.to_dict() | {"wandb": {"project": "hwsweep-test", "mode": "offline"}})
    status = tracking.publish_tables("tiny", suite_dir, config, tables)
    assert status["backends"] == {name: ALL_TAKEN for name in config.backends}, status
    client = _mlflow(tmp_path / "results")
    (run,) = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
    assert run.data.tags["kind"] == "aggregate"
    assert sorted(a.path for a in client.list_artifacts(run.info.run_id)) == [f"{n}.csv" for n in sorted(tables)]
    _, events = _scalars(suite_dir / "tensorboard")
    texts = events.PluginTagToContent("text")
    assert set(texts) == set(tables)
    speedup = events.Tensors("speedup")[0].tensor_proto.string_val[0].decode()
    assert "| cpu2 | 0.5 |" in speedup
    assert list((suite_dir / "wandb").glob("offline-run-*"))


def test_the_run_s_process_imports_no_tracker_client():
    """The module imports no tracker client itself (the tracker's process does): the runner of a command stays
    light (torch-free, client-free)."""
    code = "import sys, hwsweep.run.tracking, hwsweep.run.runner; print(sorted(m for m in ('mlflow','wandb','tensorboard','torch') if m in sys.modules))"  # noqa: E501
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert threading.current_thread() is threading.main_thread()


def test_a_damaged_tracking_file_is_one_warning_and_an_untracked_run(tmp_path, capsys):
    assert not TrackingConfig.of_run(tmp_path).on  # a spec launched by hand: no file, no trackers
    io.write_json(tmp_path / TRACKING_FILE, {"backends": ["tensorboard"]})
    assert TrackingConfig.of_run(tmp_path).backends == ["tensorboard"]
    (tmp_path / TRACKING_FILE).write_text('{"backends": ["tensorb')
    assert not TrackingConfig.of_run(tmp_path).on
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "hwsweep: warning: tracking:" in err and "delete it and rerun snakemake" in err


# The text a person sees, shadow roots included: TensorBoard's views are web components.
SEEN_TEXT = """(() => { const out = []; const walk = (n) => { if (n.shadowRoot) walk(n.shadowRoot);
    for (const c of n.childNodes) { if (c.nodeType === 3) out.push(c.textContent); else walk(c); } };
    walk(document.body); return out.join(' ').replace(/\\s+/g, ' '); })()"""


# The same, of the HParams table view alone.
TABLE_TEXT = SEEN_TEXT.replace("walk(document.body)", """const find = (n) => n.localName === 'tf-hparams-table-view' ? n :
    [...(n.shadowRoot ? [n.shadowRoot] : []), ...n.children].map(find).find(x => x) || null;
    const table = find(document.body); if (table) walk(table)""")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_tensorboard_shows_each_run_and_its_plan_in_a_browser(tmp_path):
    """Looked at as a user would: `tensorboard --logdir results/` opened in headless Chromium. The time series
    lists every run's folder and curve; the HParams view compares the runs by hardware and seed."""
    from browser import Browser, chromium

    binary = chromium()
    matrix, results = resolve(_config(["tensorboard"])), tmp_path / "results"
    runs = {("cpu1", 0): 2.0, ("cpu2", 1): 3.0}  # (hardware, seed): the run's loss at its last step
    for (hardware, seed), loss in runs.items():
        folder = results / "tiny/default" / hardware / f"seed{seed}"
        tracker = tracking.Tracker.start(matrix.spec("tiny", "default", hardware, seed), folder, matrix.tracking, system=False)
        for step in (5, 10):
            tracker.log(step, {"loss": loss * 10 / step})
        assert tracker.close()["backends"] == {"tensorboard": ALL_TAKEN}
    port, shots = _free_port(), tmp_path / "screenshots"
    shots.mkdir()
    with open(tmp_path / "tensorboard.log", "w") as log:
        server = subprocess.Popen([str(BIN / "tensorboard"), "--logdir", str(results), "--host", "127.0.0.1",
                                   "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        with Browser(binary, timeout=60) as b:
            for _ in range(120):  # the server starts (a few seconds)
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.5)
            b.open(f"http://127.0.0.1:{port}/#timeseries")
            names = [f"tiny/default/{hardware}/seed{seed}/tensorboard" for hardware, seed in runs]
            shown = b.until(f"(t => {' && '.join(f't.includes({n!r})' for n in ['loss', *names])})({SEEN_TEXT})", timeout=90)
            b.screenshot(shots / "timeseries.png")
            assert shown, b.evaluate(SEEN_TEXT)[:3000]
            b.evaluate("location.hash = '#hparams'")  # the HPARAMS tab: the same page, so no load event
            # The plan's values are its columns (and filters); the table has a row per run, named by the run
            # (trial id, not a hash of the values), with its hardware. The table's own text for the rows: the
            # filters beside it name every value too (issue 34: columns and filters were seen, but no rows).
            columns = ("hardware", "seed", "plan.global_batch", "cpu1", "cpu2")
            shown = b.until(f"(t => {' && '.join(f't.includes({c!r})' for c in columns)})({SEEN_TEXT})", timeout=90)
            assert shown, b.evaluate(SEEN_TEXT)[:3000]
            rows = [f"tiny/default/{hardware}/seed{seed}" for hardware, seed in runs] + ["cpu1", "cpu2"]
            shown = b.until(f"(t => {' && '.join(f't.includes({c!r})' for c in rows)})({TABLE_TEXT})", timeout=90)
            b.screenshot(shots / "hparams.png")
            assert shown, b.evaluate(TABLE_TEXT)[-3000:]
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_gpu_metrics_come_from_the_run_s_gpu_under_cuda_visible_devices(monkeypatch):
    """NVML counts the machine's GPUs, CUDA those CUDA_VISIBLE_DEVICES leaves (SLURM binds a job's GPUs so):
    the tracker samples the GPU the run trains on."""
    import torch

    from hwsweep.run import device

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert device.nvml_index(torch.device("cuda", 1)) == 5
    assert tracking.visible_gpu() == 3  # the runner of a command (torch-free): rank 0's, the first visible
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8d3c2f6e-1b2a-4c5d-9e8f-0a1b2c3d4e5f,GPU-0")
    assert tracking.visible_gpu() == "GPU-8d3c2f6e-1b2a-4c5d-9e8f-0a1b2c3d4e5f"  # NVML finds it by UUID
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert device.nvml_index(torch.device("cuda", 1)) == 1 and tracking.visible_gpu() == 0
