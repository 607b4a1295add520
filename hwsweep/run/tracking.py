"""Feed a run, live, to the trackers the config names (tracking: tensorboard, mlflow, wandb).

    tracker = Tracker.start(spec, run_dir, config, start_step)   # None when tracking is off; rank 0 only
    tracker.log(step, {"loss": 2.3, "lr": 1e-3})          # never blocks: a full queue drops and counts
    status = tracker.drain()                              # what the record keeps: each backend ok or why not
    tracker.close(artifacts=[record_path])

One background thread owns every client: opening the tracked run (which may reach a server), writing the
curves, sampling system metrics (CPU; GPU through NVML where present) every `system_every` seconds. The
training thread only puts plain floats into a bounded queue, so a slow, unreachable or misconfigured
tracker can neither fail, hold nor slow a run, and the trained numbers are the same with tracking on or off.
A backend that raises is dropped after one warning line on stderr (the run's log). Each run has one tracked
run, its id derived from (suite, variant, hardware, seed): a resumed run continues it (TensorBoard purges
the steps after the checkpoint, MLflow finds it by tag, W&B resumes the id). Torch-free: the runner of a
user's command uses it too; the trackers' clients are imported on the thread, only when named."""

from __future__ import annotations

import contextlib
import csv
import os
import queue
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from hwsweep.contracts.spec import RUN_DIR
from hwsweep.contracts.tracking import TrackingConfig, aggregate_id, run_id

FOLDER = "tensorboard"  # in each run's folder (and each suite's, for its tables)
MLFLOW_FOLDER = "mlruns"  # the default MLflow store, in results/
ID_TAG = "hwsweep_run_id"
OWNER_FILE = "tracking.owner"  # written by hwsweep.runtime in the run folder: the runner of a command leaves it the tracking
BATCH = 1000  # queued items a backend takes in one call
FINAL_PREFIX = "final/"  # the held-out evaluation's metrics, apart from the periodic evaluations' curves
TEXT_ROWS = 200  # rows of a table shown as text in TensorBoard


def warn(line: str) -> None:
    print(f"hwsweep: warning: {line}", file=sys.stderr, flush=True)


@dataclass
class Target:
    """Where one tracked run lives in each tracker."""

    run_id: str
    experiment: str  # MLflow experiment: the suite
    name: str  # the run's name: variant/hardware/seedN
    group: str  # W&B group: suite/variant
    job_type: str  # W&B job type: the hardware
    folder: Path  # TensorBoard event files and W&B's offline runs go under it
    results: Path  # results/: the default MLflow store is results/mlruns
    start_step: int = 0  # a resumed run continues after this step
    params: dict = field(default_factory=dict)
    tags: dict = field(default_factory=dict)
    gpu: int | None = None  # the NVML index of the run's GPU; None: no GPU metrics


def _flat(value, prefix: str, out: dict) -> dict:
    if isinstance(value, dict):
        for k, v in value.items():
            _flat(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, (list, tuple)):
        out[prefix] = ",".join(map(str, value))
    else:
        out[prefix] = value
    return out


def _results(folder: Path, layout: str) -> Path:
    """results/ above a folder laid out as `layout` (the folder itself when it is not so deep)."""
    depth = layout.count("/")
    return folder.parents[depth - 1] if len(folder.parents) >= depth else folder


def run_target(spec, run_dir, start_step: int = 0, gpu: int | None = None) -> Target:
    """The tracked run of `spec`: its plan as params (recipe, batch plan, sweep values) and its identity as tags."""
    folder = Path(run_dir).resolve()
    tags = {"suite": spec.suite, "variant": spec.variant, "hardware": spec.hardware_name, "seed": str(spec.seed),
            "gpu_type": spec.hardware.gpu_type}  # fmt: skip
    params = dict(tags) | _flat(spec.recipe.to_dict(), "recipe", {}) | _flat(spec.plan.__dict__, "plan", {})
    params |= {f"sweep.{k}": v for k, v in spec.sweep_values.items()}
    return Target(
        run_id=run_id(spec.suite, spec.variant, spec.hardware_name, spec.seed), experiment=spec.suite,
        name=f"{spec.variant}/{spec.hardware_name}/seed{spec.seed}", group=f"{spec.suite}/{spec.variant}",
        job_type=spec.hardware_name, folder=folder, results=_results(folder, RUN_DIR), start_step=start_step,
        params={k: v if isinstance(v, (bool, int, float, str)) else str(v) for k, v in params.items()},
        tags=tags, gpu=gpu,
    )  # fmt: skip


def aggregate_target(suite: str, suite_dir) -> Target:
    """A suite's tables: one tracked 'run' per suite, beside its runs."""
    folder = Path(suite_dir).resolve()
    return Target(run_id=aggregate_id(suite), experiment=suite, name=f"{suite} tables", group=suite,
                  job_type="aggregate", folder=folder, results=_results(folder, "results/{suite}"), tags={"suite": suite, "kind": "aggregate"})  # fmt: skip


# -- the backends: each opens its tracked run, takes curves, texts and files, and closes --------------------
class TensorBoard:
    name = "tensorboard"

    def open(self, target: Target, config: TrackingConfig) -> None:
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        folder = target.folder / FOLDER
        if not target.start_step:  # a fresh start: an earlier attempt's curves are not this run's
            shutil.rmtree(folder, ignore_errors=True)
        self.writer = EventFileWriter(str(folder), flush_secs=5)
        # After a resume TensorBoard's reader drops the earlier events at and after this step: one curve. A
        # summary at a lower step would read as a restart and drop more, so the hparams are put at it too.
        first = target.start_step + 1 if target.start_step else 0
        if first:
            self._event(Event(step=first, session_log=SessionLog(status=SessionLog.START)))
        if target.params:
            from tensorboard.plugins.hparams import summary_v2

            summary = summary_v2.hparams_pb(target.params, start_time_secs=time.time())
            self._event(Event(step=first, summary=summary))

    def _event(self, event) -> None:
        event.wall_time = event.wall_time or time.time()
        self.writer.add_event(event)

    def log(self, rows: list[tuple[int, dict]]) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        for step, values in rows:
            summary = Summary(value=[Summary.Value(tag=k, simple_value=v) for k, v in values.items()])
            self._event(Event(step=step, summary=summary))

    def text(self, name: str, path: Path) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.plugins.text import metadata
        from tensorboard.util import tensor_util

        tensor = tensor_util.make_tensor_proto(markdown_table(path).encode(), shape=[])
        value = Summary.Value(tag=name, metadata=metadata.create_summary_metadata(name, ""), tensor=tensor)
        self._event(Event(step=0, summary=Summary(value=[value])))

    def final(self, step: int, values: dict) -> None:
        self.log([(step, values)])

    def artifact(self, path: Path) -> None:
        pass  # TensorBoard keeps no files; the record is beside the event files already

    def close(self, failed: bool = False) -> None:
        self.writer.close()


@contextlib.contextmanager
def _store_lock(uri: str):
    """Held while a run finds or creates its experiment in a file store (the local default): the store does
    not refuse a second experiment of the same name, so runs starting together each made one. A lock file
    beside the store (store.lock); a server or database store enforces the name itself."""
    if not uri.startswith("file:"):
        yield
        return
    import fcntl
    from urllib.parse import unquote, urlparse

    store = Path(unquote(urlparse(uri).path))
    store.parent.mkdir(parents=True, exist_ok=True)
    with open(store.with_name(store.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class Mlflow:
    name = "mlflow"

    def open(self, target: Target, config: TrackingConfig) -> None:
        # A server that does not answer costs a few seconds on this thread, not minutes of retries. MLflow 3
        # refuses its file store unless told: it is the local default because it needs nothing installed or
        # started (a database store needs the full mlflow) and runs in parallel write their own folders.
        for key, value in (("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2"), ("MLFLOW_HTTP_REQUEST_TIMEOUT", "10"),
                           ("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1"), ("MLFLOW_ALLOW_FILE_STORE", "true")):  # fmt: skip
            os.environ.setdefault(key, value)
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        uri = config.mlflow.uri or (target.results / MLFLOW_FOLDER).as_uri()
        self.client = client = MlflowClient(tracking_uri=uri)
        with _store_lock(uri):
            experiment = client.get_experiment_by_name(target.experiment)
            if experiment is None:
                try:
                    experiment_id = client.create_experiment(target.experiment)
                except Exception:  # a server's other client created it meanwhile (it refuses a second)
                    experiment = client.get_experiment_by_name(target.experiment)
                    if experiment is None:
                        raise
                    experiment_id = experiment.experiment_id
            else:
                experiment_id = experiment.experiment_id
        found = client.search_runs([experiment_id], filter_string=f"tags.{ID_TAG} = '{target.run_id}'")
        if found and not target.start_step:  # a fresh start replaces what an earlier attempt logged
            for run in found:
                client.delete_run(run.info.run_id)
            found = []
        self.logged: dict[str, int] = {}  # curve -> the last step the store has of it
        if found:
            self.run = found[0].info.run_id
            client.update_run(self.run, "RUNNING")
            # A resumed attempt repeats the steps between its checkpoint and the kill (bitwise the same values):
            # the store keeps every entry, so those already there are not sent again.
            for key in client.get_run(self.run).data.metrics:
                self.logged[key] = max((m.step for m in client.get_metric_history(self.run, key)), default=-1)
            return
        self.run = client.create_run(experiment_id, run_name=target.name, tags=target.tags | {ID_TAG: target.run_id}).info.run_id
        params = [Param(k, str(v)[:6000]) for k, v in target.params.items()]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 params a batch
            client.log_batch(self.run, params=params[i : i + 100])

    def log(self, rows: list[tuple[int, dict]], again: bool = False) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, step) for step, values in rows for k, v in values.items()
                   if again or step > self.logged.get(k, -1)]  # fmt: skip
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(self.run, metrics=metrics[i : i + 1000])

    def final(self, step: int, values: dict) -> None:
        self.log([(step, values)], again=True)  # an evaluation done again replaces the last one's values

    def text(self, name: str, path: Path) -> None:
        self.artifact(path)

    def artifact(self, path: Path) -> None:
        self.client.log_artifact(self.run, str(path))

    def close(self, failed: bool = False) -> None:
        self.client.set_terminated(self.run, "FAILED" if failed else "FINISHED")


class Wandb:
    name = "wandb"

    def open(self, target: Target, config: TrackingConfig) -> None:
        import wandb

        c = config.wandb
        mode = c.mode if c.mode != "auto" else ("online" if os.environ.get("WANDB_API_KEY") else "offline")
        self.run = wandb.init(
            project=c.project, entity=c.entity, group=target.group, job_type=target.job_type, name=target.name,
            id=target.run_id, resume="allow", config=target.params, dir=str(target.folder), mode=mode,
            # hwsweep samples the system itself (tracker thread): W&B's own sampler would be a second one.
            settings=wandb.Settings(console="off", silent=True, init_timeout=60, x_disable_stats=True,
                                    disable_job_creation=True),
        )  # fmt: skip

    def log(self, rows: list[tuple[int, dict]]) -> None:
        for step, values in rows:
            self.run.log(values, step=step)

    def final(self, step: int, values: dict) -> None:
        # W&B's history only moves forward, and its run table compares runs by their summary: the summary.
        self.run.summary.update(values)

    def text(self, name: str, path: Path) -> None:
        import wandb

        header, rows = read_table(path)
        self.run.log({name: wandb.Table(columns=header, data=rows)})

    def artifact(self, path: Path) -> None:
        pass  # the record stays in the run's folder beside W&B's own; its numbers are the curves

    def close(self, failed: bool = False) -> None:
        self.run.finish(exit_code=1 if failed else 0)


BACKENDS = {b.name: b for b in (TensorBoard, Mlflow, Wandb)}


def read_table(path: Path) -> tuple[list[str], list[list]]:
    """A CSV table's header and rows, numbers as floats."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))

    def cell(text: str):
        try:
            return float(text)
        except ValueError:
            return text

    return (rows[0] if rows else []), [[cell(c) for c in row] for row in rows[1:]]


def markdown_table(path: Path) -> str:
    """A CSV table as Markdown (what TensorBoard's text view renders), its first TEXT_ROWS rows."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return "(empty table)"
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1 : TEXT_ROWS + 1]]
    if len(rows) > TEXT_ROWS + 1:
        lines.append(f"\n({len(rows) - 1 - TEXT_ROWS} more rows in {Path(path).name})")
    return "\n".join(lines)


# -- system metrics, sampled on the tracker's thread ------------------------------------------------------
class System:
    """CPU utilisation of the machine and of this process (and its children waited for), and the run's GPU
    (utilisation, memory, power) through NVML when nvidia-ml-py is installed and a GPU is given."""

    def __init__(self, gpu: int | None):
        self.last = (self._machine(), self._process(), time.monotonic())
        self.nvml = None
        if gpu is not None:
            try:
                import pynvml

                pynvml.nvmlInit()
                self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(gpu)
            except Exception:  # no NVML here: CPU metrics only
                self.nvml = None

    @staticmethod
    def _machine() -> tuple[float, float] | None:
        try:
            fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):
            return None
        return sum(fields), fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # total, idle + iowait

    @staticmethod
    def _process() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def sample(self) -> dict:
        machine, process, now = self._machine(), self._process(), time.monotonic()
        (m0, p0, t0), self.last = self.last, (machine, process, now)
        out = {}
        if now > t0:
            out["system/process_cpu_percent"] = 100 * (process - p0) / (now - t0)
        if machine and m0 and machine[0] > m0[0]:
            out["system/cpu_percent"] = 100 * (1 - (machine[1] - m0[1]) / (machine[0] - m0[0]))
        if self.nvml:
            try:
                n, h = self.nvml, self.handle
                out["system/gpu_utilisation_percent"] = float(n.nvmlDeviceGetUtilizationRates(h).gpu)
                out["system/gpu_memory_gb"] = n.nvmlDeviceGetMemoryInfo(h).used / 2**30
                out["system/gpu_power_w"] = n.nvmlDeviceGetPowerUsage(h) / 1000
            except Exception:
                pass  # a GPU that stops answering NVML: the curves go on without it
        return out


# -- the tracker -----------------------------------------------------------------------------------------------
class Tracker:
    def __init__(self, target: Target, config: TrackingConfig, system: bool = True):
        self.target, self.config = target, config
        self.queue: queue.Queue = queue.Queue(maxsize=config.queue_size)
        self.dropped = 0
        self.failed: dict[str, str] = {}  # backend -> why it was dropped
        self.backends = [BACKENDS[name]() for name in config.backends]
        self.step = target.start_step  # the newest step logged: system samples are put at it
        self.busy_seconds = 0.0  # CPU time the thread spent on the trackers after opening them (bench/)
        self._system = system
        self._thread = threading.Thread(target=self._work, name="hwsweep-tracking", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, spec, run_dir, config: TrackingConfig, start_step: int = 0, gpu: int | None = None,
              system: bool = True) -> "Tracker | None":  # fmt: skip
        """The tracker of a run (`config`: its folder's, TrackingConfig.of_run), or None when it names no tracker."""
        return cls(run_target(spec, run_dir, start_step, gpu), config, system) if config.on else None

    # -- the training thread's side: never waits ------------------------------------------------------
    def log(self, step: int, values: dict) -> None:
        """Curves at `step` (None values are left out). Dropped, and counted, when the queue is full."""
        row = {k: float(v) for k, v in values.items() if v is not None}
        if row:
            self._put(("log", (int(step), row)))

    def _put(self, item) -> bool:
        try:
            self.queue.put_nowait(item)
            return True
        except queue.Full:
            self.dropped += 1
            return False

    def _wait(self, item, timeout: float) -> bool:
        """Queue `item` and wait for the thread to take everything before it, at most `timeout` seconds."""
        done = threading.Event()
        deadline = time.monotonic() + timeout
        try:
            self.queue.put(item + (done,), timeout=max(0.0, timeout))
        except queue.Full:
            return False
        return done.wait(max(0.0, deadline - time.monotonic()))

    def drain(self, timeout: float | None = None) -> dict:
        """Wait (at most close_timeout seconds) for what is queued to reach the trackers; the status the record
        keeps: each backend "ok" or why it failed, the steps dropped, the run's id."""
        timeout = self.config.close_timeout if timeout is None else timeout
        if not self._wait(("mark", None), timeout):
            self._late("drain", timeout)
        return self.status()

    def status(self) -> dict:
        return {"id": self.target.run_id, "dropped": self.dropped,
                "backends": {b.name: self.failed.get(b.name, "ok") for b in self.backends}}  # fmt: skip

    def final(self, step: int, values: dict) -> None:
        """A run's held-out evaluation (eval.json), at its last step: a scalar each in TensorBoard and MLflow,
        W&B's run summary."""
        self._put(("final", (int(step), {k: float(v) for k, v in values.items() if v is not None})))

    def close(self, artifacts=(), texts: dict | None = None, failed: bool = False, timeout: float | None = None) -> dict:
        """Hand over files (the record) and tables, close every tracked run, and wait at most close_timeout."""
        timeout = self.config.close_timeout if timeout is None else timeout
        for name, path in (texts or {}).items():
            self._put(("text", (name, Path(path))))
        for path in artifacts:
            self._put(("artifact", Path(path)))
        if not self._wait(("stop", failed), timeout):
            self._late("close", timeout)
        return self.status()

    def _late(self, what: str, timeout: float) -> None:
        warn(f"tracking: the trackers did not take what was queued within {timeout:g} s (tracking.close_timeout); "
             "the run goes on without waiting")  # fmt: skip

    # -- the thread's side ---------------------------------------------------------------------------------
    def _fail(self, backend, error: BaseException) -> None:
        reason = " ".join(f"{type(error).__name__}: {error}".split())[:300]
        self.failed[backend.name] = reason
        warn(f"tracking: {backend.name} failed ({reason}); the run goes on without it")

    def _each(self, method: str, *args) -> None:
        for backend in self.backends:
            if backend.name in self.failed:
                continue
            try:
                getattr(backend, method)(*args)
            except Exception as e:  # any failure of a tracker is the tracker's, never the run's
                self._fail(backend, e)

    def _work(self) -> None:
        self._each("open", self.target, self.config)
        system = System(self.target.gpu) if self._system else None
        next_sample = time.monotonic() + self.config.system_every
        while True:
            wait = max(0.0, next_sample - time.monotonic()) if system else None
            try:
                items = [self.queue.get(timeout=wait)]
            except queue.Empty:
                items = []
            while items and items[-1][0] == "log" and len(items) < BATCH:
                try:
                    items.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            busy = time.thread_time()
            if system and time.monotonic() >= next_sample:
                next_sample = time.monotonic() + self.config.system_every
                self._each("log", [(self.step, system.sample())])
            rows = [item[1] for item in items if item[0] == "log"]
            if rows:
                self.step = max(self.step, max(step for step, _ in rows))
                self._each("log", rows)
            for item in items:
                kind = item[0]
                if kind == "text":
                    self._each("text", *item[1])
                elif kind == "final":
                    self._each("final", *item[1])
                elif kind == "artifact":
                    self._each("artifact", item[1])
                elif kind == "mark":
                    self.busy_seconds += time.thread_time() - busy
                    busy = time.thread_time()
                    item[-1].set()
                elif kind == "stop":
                    self._each("close", item[1])
                    item[-1].set()
                    return
            self.busy_seconds += time.thread_time() - busy


def publish_evaluation(spec, run_dir, step: int, metrics: dict, record) -> dict | None:
    """The evaluate job's metrics to the run's tracked run (the same id: after its training, at its last step,
    under final/<metric>) with eval.json as an artifact. Waits at most close_timeout; failures are warnings.
    None when the run is not tracked."""
    tracker = Tracker.start(spec, run_dir, TrackingConfig.of_run(run_dir), start_step=step, system=False)
    if tracker is None:
        return None
    tracker.final(step, {f"{FINAL_PREFIX}{k}": v for k, v in metrics.items()})
    return tracker.close(artifacts=[record])


def publish_tables(suite: str, suite_dir, config: TrackingConfig, tables: dict) -> dict | None:
    """A suite's tables (name -> CSV path) to every tracker: MLflow artifacts, a W&B table each, TensorBoard
    text. Waits at most close_timeout; failures are warnings. None when tracking is off."""
    if not config.on:
        return None
    tracker = Tracker(aggregate_target(suite, suite_dir), config, system=False)
    return tracker.close(texts=tables)
