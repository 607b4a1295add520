"""Feed a run, live, to the trackers the config names (tracking: tensorboard, mlflow, wandb).

    tracker = Tracker.start(spec, run_dir, config, start_step)   # None when tracking is off; rank 0 only
    tracker.log(step, {"loss": 2.3, "lr": 1e-3})          # never blocks: a full queue drops and counts
    status = tracker.drain()                              # what the record keeps: each backend's delivery
    tracker.close(artifacts=[record_path])

The clients run in the tracker's own process, fed through a pipe, on the CPUs the run's processes left spare
(where there are any): the training thread only puts plain floats into a bounded queue, so a slow,
unreachable or misconfigured tracker can neither fail, hold nor slow a run, the clients' Python never holds
the run's interpreter lock, and the trained numbers are the same with tracking on or off. In that process each
backend has a thread and a queue of its own (Channel): it opens its tracked run (which may reach a server),
writes and closes whatever the others do, so a slow or failing one never delays or drops another's rows. System
metrics (CPU; GPU through NVML where present) are sampled every `system_every` seconds from the start and once
at the end. The end of a job waits while each backend keeps taking rows (close_timeout without progress gives
it up, close_limit bounds the wait); a backend that raises or is given up is one warning line on stderr (the
job's log) and its status says so. Each run has one tracked run, its id derived from (suite, variant,
hardware, seed): a resumed run continues it (TensorBoard purges the steps after the checkpoint, MLflow and W&B
are sent only the steps past those they hold). Torch-free: the runner of a user's command uses it too; the
trackers' clients are imported in the tracker's process only, only when named."""

from __future__ import annotations

import collections
import contextlib
import csv
import functools
import json
import logging
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from hwsweep.contracts import io
from hwsweep.contracts.spec import RUN_DIR
from hwsweep.contracts.tracking import TrackingConfig, aggregate_id, rows_text, run_id

FOLDER = "tensorboard"  # in each run's folder (and each suite's, for its tables)
MLFLOW_FOLDER = "mlruns"  # the default MLflow store, in results/
ID_TAG = "hwsweep_run_id"
REPLACED_FOLDER = "replaced"  # under a run's wandb/: W&B offline attempts a fresh start replaced (kept, not synced)
PID_FILE = "tracking.pid"  # in the tracked folder: the tracker's process that writes there now
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
    gpu: int | str | None = None  # the run's GPU: NVML's index, or its UUID; None: no GPU metrics


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


def visible_gpu() -> int | str:
    """The first GPU this process may use, as NVML names it, without torch (the runner of a command): the first
    entry of CUDA_VISIBLE_DEVICES (SLURM binds a job's GPUs so), an index or a UUID; 0 where it is unset."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else (first or 0)


def run_target(spec, run_dir, start_step: int = 0, gpu: int | str | None = None) -> Target:
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

            # The trial's id names the run (the HParams table's first column): by default a hash of the values.
            summary = summary_v2.hparams_pb(target.params, trial_id=f"{target.experiment}/{target.name}",
                                            start_time_secs=time.time())  # fmt: skip
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
    """Held while a run opens a file store (the local default) and finds or creates its experiment there: the
    store does not refuse a second experiment of the same name, so runs starting together each made one, and
    the first clients of a new store each write its default experiment (one failed: 'meta.yaml exists'). A lock file
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
        with _store_lock(uri):
            # A new file store makes its default experiment when the first client opens it: that races too.
            self.client = client = MlflowClient(tracking_uri=uri)
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
        self.offline = (c.mode if c.mode != "auto" else ("online" if os.environ.get("WANDB_API_KEY") else "offline")) == "offline"
        if self.offline and not target.start_step:  # a fresh start: an earlier attempt's folders are not this run's
            replaced = target.folder / "wandb" / REPLACED_FOLDER  # out of `wandb sync .../wandb/offline-run-*`
            for earlier in (target.folder / "wandb").glob(f"offline-run-*-{target.run_id}"):
                replaced.mkdir(parents=True, exist_ok=True)
                earlier.rename(replaced / earlier.name)
        self.run = wandb.init(
            project=c.project, entity=c.entity, group=target.group, job_type=target.job_type, name=target.name,
            id=target.run_id, resume="allow", config=target.params, dir=str(target.folder),
            mode="offline" if self.offline else "online",
            # hwsweep samples the system itself (tracker thread): W&B's own sampler would be a second one.
            settings=wandb.Settings(console="off", silent=True, init_timeout=60, x_disable_stats=True,
                                    disable_job_creation=True),
        )  # fmt: skip
        self.target, self.timeout = target, config.close_timeout
        self.held: int | None = None if target.start_step else -1  # the last step W&B has; None: not read yet

    def log(self, rows: list[tuple[int, dict]]) -> None:
        if self.held is None:  # read at the first row, not at the open: the evaluate job logs no rows
            self.held = self._held()
        for step, values in rows:
            if step > self.held:  # a resumed attempt repeats the steps between its checkpoint and the kill
                self.run.log(values, step=step)

    def _held(self) -> int:
        """The last step of this run's W&B history: online, the step the server resumed it after; offline, the
        newest step in the earlier attempts' run files (each attempt writes a folder of its own, with the same id,
        one run once synced), read with W&B's own reader (`wandb leet inspect --json`)."""
        if not self.offline:
            return self.run.starting_step - 1
        mine = Path(self.run.dir).resolve().parent
        held = -1
        for path in sorted((self.target.folder / "wandb").glob(f"offline-run-*-{self.target.run_id}/run-*.wandb")):
            if path.parent.resolve() == mine:
                continue
            try:
                out = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(path)],
                                     capture_output=True, text=True, timeout=self.timeout, check=True).stdout  # fmt: skip
            except (OSError, subprocess.SubprocessError) as e:
                warn(f"tracking: wandb: {path} is unreadable ({first_line(e)}); the steps it holds are sent again")
                continue
            for line in out.splitlines():
                record = json.loads(line)
                if record.get("type") == "history":  # protobuf's JSON leaves out a 0
                    held = max(held, int(record["history"].get("step", {}).get("num", 0)))
        return held

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
        import wandb

        self.run.finish(exit_code=1 if failed else 0)
        # finish() only asks W&B's service to close the run file; the service writes it out as it shuts down,
        # which atexit would wait for, and the tracker's process ends with os._exit: wait for it here.
        try:
            wandb.teardown()
        except SystemExit as e:  # the service's own failure, which W&B raises as the caller's exit
            raise RuntimeError(f"W&B's service ended with exit code {e.code}") from None


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


# -- system metrics, sampled where the clients run ----------------------------------------------------
class System:
    """CPU utilisation and memory in use of the machine and of the run's process `pid` (CPU: with its children
    waited for; memory: with its live descendants, the tracker's own process left out), and the run's GPU
    (utilisation, memory, power) through NVML when nvidia-ml-py is installed and a GPU is given."""

    def __init__(self, gpu: int | str | None, pid: int):
        self.pid = pid
        self.last = (self._machine(), self._process(), time.monotonic())
        self.nvml = None
        if gpu is not None:
            try:
                import pynvml

                pynvml.nvmlInit()
                by = pynvml.nvmlDeviceGetHandleByIndex if isinstance(gpu, int) else pynvml.nvmlDeviceGetHandleByUUID
                self.nvml, self.handle = pynvml, by(gpu)
            except Exception:  # no NVML here: CPU metrics only
                self.nvml = None

    @staticmethod
    def _machine() -> tuple[float, float] | None:
        try:
            fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):
            return None
        return sum(fields), fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # total, idle + iowait

    def _process(self) -> float | None:
        """CPU seconds of the run's process and its waited-for children (utime, stime, cutime, cstime)."""
        try:  # the command's name, field 2, may hold spaces: the fields counted after its ')'
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return sum(float(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    @staticmethod
    def _memory() -> float | None:
        """Percent of the machine's memory in use (not available to a new process)."""
        try:
            fields = {k: float(v.split()[0]) for k, v in (line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())}
            return 100 * (1 - fields["MemAvailable"] / fields["MemTotal"])
        except (OSError, ValueError, KeyError, IndexError, ZeroDivisionError):
            return None

    def _resident(self) -> float | None:
        """GB resident of the run's process and its live descendants (a command's, dataloader workers), this
        tracker's process and its own (W&B's service) left out."""
        total, todo, seen = 0, [self.pid], set()
        while todo:
            pid = todo.pop()
            if pid in seen or (pid == os.getpid() and pid != self.pid):
                continue
            seen.add(pid)
            try:
                found = re.search(r"^VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
                total += int(found.group(1)) * 1024 if found else 0
                for task in Path(f"/proc/{pid}/task").iterdir():
                    todo += [int(child) for child in (task / "children").read_text().split()]
            except (OSError, ValueError):
                if pid == self.pid:
                    return None  # the run's process is gone
        return total / 2**30

    def sample(self, least: float = 0.0) -> dict:
        """The metrics since the last sample, at least `least` seconds after it (a CPU share needs an interval: the
        end of a run shorter than the tracker's start-up is its only sample)."""
        time.sleep(max(0.0, self.last[2] + least - time.monotonic()))
        machine, process, now = self._machine(), self._process(), time.monotonic()
        (m0, p0, t0), self.last = self.last, (machine, process, now)
        out = {}
        memory, resident = self._memory(), self._resident()
        if memory is not None:
            out["system/memory_percent"] = memory
        if resident is not None:
            out["system/process_memory_gb"] = resident
        if now > t0 and process is not None and p0 is not None:
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


# -- the clients' side --------------------------------------------------------------------------------------
def take(get, timeout: float | None) -> list:
    """What is queued, in order: the first item (waited for at most `timeout` s; None: until one comes; none
    in time: []), then the rows right behind it, up to BATCH, so that they go in one call (or one write)."""
    try:
        items = [get(timeout)]
    except queue.Empty:
        return []
    while items[-1][0] == "log" and len(items) < BATCH:
        try:
            items.append(get(0))
        except queue.Empty:
            break
    return items


def first_line(error: BaseException) -> str:
    """Why a client failed, as the record and the warning say it: its type and the first line of its message."""
    text = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {text}"[:300] if text else type(error).__name__


class Channel:
    """One backend on a thread of its own, with its own queue: it opens, takes what is queued for it in order,
    and closes, whatever the others do, so a slow or failing backend never delays or drops another's rows. Its
    rows wait here until it took them or failed (at most queue_size of them: past it new ones are dropped for
    it and counted). Its fields are read and written under the worker's `changed` condition."""

    def __init__(self, backend, worker: "Worker"):
        self.backend, self.name, self.worker = backend, backend.name, worker
        self.items: collections.deque = collections.deque()  # (seq, kind, payload)
        self.rows = 0  # log rows waiting in items
        self.pending = 0  # what it was given and has not taken yet: a row, an evaluation, a table, a file each
        self.dropped = 0  # rows its full queue dropped
        self.undelivered = 0  # what it was given and never took: it failed, or was given up at the end
        self.why: str | None = None  # failed: why (the first line)
        self.doing = "opening"  # what its client is at: opening, sending, closing, closed
        self.taken = 0  # the sequence number of the last item it took (or passed over, failed)
        self.progress = time.monotonic()  # when its client last returned
        self.busy = 0.0  # CPU seconds its client spent after opening (bench/)
        self.thread = threading.Thread(target=self._run, name=f"hwsweep-tracking-{self.name}", daemon=True)

    def put(self, seq: int, kind: str, payload) -> None:
        """Queue an item for this backend (the worker's `changed` held)."""
        size = len(payload) if kind == "log" else int(kind in ("text", "final", "artifact"))
        if self.why is not None:
            self.undelivered += size
            return
        if kind == "log" and self.rows + size > self.worker.config.queue_size:
            keep = max(0, self.worker.config.queue_size - self.rows)
            self.dropped += size - keep
            payload, size = payload[:keep], keep
            if not payload:
                return
        self.rows += size if kind == "log" else 0
        self.pending += size
        self.items.append((seq, kind, payload))

    def status(self) -> dict:
        state = "failed" if self.why is not None else "late" if self.pending else "ok"
        return {"state": state, "why": self.why, "dropped": self.dropped, "undelivered": self.undelivered + self.pending}

    def fail(self, why: str) -> None:
        """Drop this backend (the worker's `changed` held): what it holds is undelivered; one warning line."""
        if self.why is None:
            self.why = why
            self.undelivered += self.pending
            self.pending = self.rows = 0
            self.items.clear()
            lost = f"; {rows_text(self.undelivered)} undelivered" if self.undelivered else ""
            warn(f"tracking: {self.name} failed ({why}){lost}; the run goes on without it")

    def _call(self, method: str, *args) -> None:
        if self.why is None:
            try:
                getattr(self.backend, method)(*args)
            except Exception as e:  # any failure of a tracker is the tracker's, never the run's
                with self.worker.changed:
                    self.fail(first_line(e))
        with self.worker.changed:
            self.progress = time.monotonic()
            self.worker.changed.notify_all()

    def _run(self) -> None:
        changed = self.worker.changed
        self._call("open", self.worker.target, self.worker.config)
        cpu = time.thread_time()
        while True:
            with changed:
                while not self.items:
                    changed.wait()
                batch = [self.items.popleft()]
                while batch[-1][1] == "log" and self.items and self.items[0][1] == "log":
                    batch.append(self.items.popleft())
                seq, kind, payload = batch[-1]
                size = sum(len(p) for _, k, p in batch if k == "log")
                self.rows -= size
                size += int(kind in ("text", "final", "artifact"))
                self.doing = "closing" if kind == "close" else "sending"
            if kind == "log":
                self._call("log", [row for _, _, rows in batch for row in rows])
            elif kind == "close":
                self._call("close", payload)
            elif kind != "mark":
                self._call(kind, *payload)
            with changed:
                if self.why is None:  # failed meanwhile: fail() counted these undelivered
                    self.pending -= size
                self.taken, self.busy = seq, time.thread_time() - cpu
                self.doing = "closed" if kind == "close" else self.doing
                changed.notify_all()
            if kind == "close":
                return


class Worker:
    """Owns every client: a Channel (thread and queue) per backend, fed in order with rows, evaluations, tables
    and files, and system metrics sampled every system_every seconds from its start and once at the end. Items
    are JSON-able (kind, payload) pairs: they cross a pipe to the tracker's process. A mark (drain) or the stop
    is answered once every backend took what came before it, failed, or took nothing for close_timeout seconds,
    and at most close_limit seconds after it came; at the stop, a backend still holding rows is given up (one
    warning line; the status counts them undelivered)."""

    def __init__(self, target: Target, config: TrackingConfig, system: bool, pid: int, done):
        self.target, self.config = target, config
        self.changed = threading.Condition()
        self.channels = [Channel(BACKENDS[name](), self) for name in config.backends]
        # The newest step logged: system samples are put at it. After a resume, at the first step this attempt
        # owns: TensorBoard would read a lower one as a restart and drop the curves after it.
        self.step = target.start_step + 1 if target.start_step else 0
        self.seq = 0  # items given to the channels, numbered in order
        self._short: dict = {}  # the backends the last wait ended short of: since when they took nothing
        self._system, self._pid = system, pid
        self._done = done  # done(token, stopped): a mark or the stop was reached

    @property
    def busy_seconds(self) -> float:
        return sum(c.busy for c in self.channels)

    def status(self) -> dict:
        with self.changed:
            return {c.name: c.status() for c in self.channels}

    def _put(self, kind: str, payload=None) -> int:
        with self.changed:
            self.seq += 1
            for channel in self.channels:
                channel.put(self.seq, kind, payload)
            self.changed.notify_all()
            return self.seq

    def _wait(self, seq: int) -> list:
        """Wait while a backend that has not taken item `seq` yet still takes something within close_timeout,
        at most close_limit in all; the backends still short of it (too slow or stuck), with why. A backend short
        at the last wait too (the close after the record's drain) is timed from that one: a stuck backend costs
        the job close_timeout once, not per wait."""
        start, c = time.monotonic(), self.config
        with self.changed:
            while True:
                now = time.monotonic()
                short = [ch for ch in self.channels if ch.why is None and ch.taken < seq]
                since = {ch: max(ch.progress, self._short.get(ch, start)) for ch in short}
                moving = [ch for ch in short if now - since[ch] < c.close_timeout]
                if not moving or now - start >= c.close_limit:
                    self._short = since
                    if now - start >= c.close_limit:
                        return [(ch, f"still {ch.doing} after {c.close_limit:g} s (tracking.close_limit)") for ch in short]
                    return [(ch, f"took nothing for {c.close_timeout:g} s (tracking.close_timeout) while {ch.doing}")
                            for ch in short]  # fmt: skip
                wake = min([since[ch] + c.close_timeout for ch in moving] + [start + c.close_limit])
                self.changed.wait(max(0.01, wake - now))

    def _sample(self, system: "System", least: float = 0.0) -> None:
        values = system.sample(least)
        if values:
            self._put("log", [(self.step, values)])

    def run(self, get) -> None:
        """Take items from get(timeout) (which raises queue.Empty) until the stop, or the run's end ("eof": the
        run's process is gone without a stop; its tracked runs are closed as failed)."""
        for channel in self.channels:
            channel.thread.start()  # each opens now, on its own: sampling and rows do not wait for any open
        system = System(self.target.gpu, self._pid) if self._system else None
        # The first sample a second in (a CPU share needs an interval), whatever system_every: a run's start-up
        # and first steps are seen, as a short run's are.
        next_sample = time.monotonic() + min(1.0, self.config.system_every)
        while True:
            items = take(get, max(0.0, next_sample - time.monotonic()) if system else None)
            if system and time.monotonic() >= next_sample:
                next_sample = time.monotonic() + self.config.system_every
                self._sample(system)
            rows = [tuple(payload) for kind, payload in items if kind == "log"]
            if rows:
                self.step = max(self.step, max(step for step, _ in rows))
                self._put("log", rows)
            for kind, payload in items:
                if kind == "text":
                    self._put("text", (payload[0], Path(payload[1])))
                elif kind == "final":
                    self._put("final", tuple(payload))
                elif kind == "artifact":
                    self._put("artifact", (Path(payload),))
                elif kind == "mark":
                    self._wait(self._put("mark"))
                    self._done(payload, False)
                elif kind in ("stop", "eof"):
                    failed, token = payload if kind == "stop" else (True, None)
                    if system:  # the run's last moments, whatever the interval (a fifth of a second at least)
                        self._sample(system, least=0.2)
                    late = self._wait(self._put("close", failed))
                    with self.changed:
                        for channel, why in late:
                            channel.fail(why)
                    self._done(token, True)
                    return


def _follow(path: Path, limit: float) -> None:
    """Wait (at most `limit` s) until the tracker's process that last wrote `path` has ended, then write ours:
    a hard-killed run's tracker closes its tracked runs while the resumed attempt starts, and the resumed one must
    see what that one sent (W&B's last step) and close after it (MLflow's status)."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(path.read_text())
        deadline = time.monotonic() + limit
        while pid != os.getpid() and time.monotonic() < deadline:
            if "hwsweep.run.tracking import serve" not in Path(f"/proc/{pid}/cmdline").read_text():
                break  # raises OSError once that process is gone; another process with its number: not ours
            time.sleep(0.1)
    with contextlib.suppress(OSError):
        io.write_text(path, f"{os.getpid()}\n")


def serve() -> None:
    """The tracker's process (Tracker, process=True): its first line on stdin says what to track, each next line
    is an item; each mark and the stop are answered on stdout. Apart from the run's process so that the clients'
    Python never holds the run's interpreter lock, and on the CPUs the run left spare. It ends once the stop is
    answered; if its stdin ends first (the run is gone), it closes the tracked runs as failed, as far as the
    trackers take them within close_timeout (close_limit in all)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C or a scheduler's TERM is the run's to handle: it
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # checkpoints, then stops its tracker or ends (stdin closes)
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # a client library's prints go to the run's log, not into the answers
    # The clients' own retry chatter (urllib3's "Retrying ..." per attempt) is not the one warning line a
    # failing backend gets.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    first = sys.stdin.readline()
    if not first:  # the run ended before it said what to track
        return
    start = json.loads(first)
    if start["cpus"] and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, start["cpus"])
    t = start["target"]
    target = Target(**t | {"folder": Path(t["folder"]), "results": Path(t["results"])})
    config = TrackingConfig.from_dict(start["config"], "tracking")
    items: queue.Queue = queue.Queue()  # unbounded: each backend's channel bounds its own rows

    def read() -> None:  # takes stdin as it comes, so the run's writes never wait on a slow tracker
        for line in sys.stdin:
            items.put(json.loads(line))
        items.put(("eof", None))
        # A last resort: the worker gives up on the trackers within close_limit of the end.
        timer = threading.Timer(config.close_limit + config.close_timeout + 30, os._exit, (0,))
        timer.daemon = True
        timer.start()

    def done(token, stopped: bool) -> None:
        answer = {"done": token, "stopped": stopped, "backends": worker.status(), "busy": worker.busy_seconds}
        with contextlib.suppress(OSError):
            answers.write(json.dumps(answer) + "\n")
            answers.flush()

    worker = Worker(target, config, start["system"], start["pid"], done)
    threading.Thread(target=read, name="hwsweep-tracking-stdin", daemon=True).start()
    _follow(target.folder / PID_FILE, config.close_limit)
    worker.run(lambda timeout: items.get(timeout=timeout))
    sys.stderr.flush()
    shutil.rmtree(start["tmp"], ignore_errors=True)  # the run's process may end before it sees this one end
    os._exit(0)  # every client closed or given up: a given-up client's thread does not keep the process


# -- the run's side --------------------------------------------------------------------------------------------
class Tracker:
    """Rank 0's feed to the trackers. The training thread only puts plain floats into a bounded queue; the
    clients run in the tracker's process (process=False: on a thread of this one, as tests inject backends)."""

    def __init__(self, target: Target, config: TrackingConfig, system: bool = True, cpus=None, process: bool = True):
        self.target, self.config = target, config
        self.queue: queue.Queue = queue.Queue(maxsize=config.queue_size)
        self.dropped = 0  # rows this queue had no room for: lost to every backend
        self.backends: dict[str, dict] = {}  # each backend's status, as the clients' side last answered
        self.busy_seconds = 0.0  # CPU time the clients spent after opening (bench/)
        self._unanswered: str | None = None  # why the clients' side did not answer the last wait
        self._warned_late = False
        self._waiting: dict[int, threading.Event] = {}
        self._tokens = iter(range(1, 1 << 62))
        self._stopped = False
        self._gone = False  # the tracker's process ended: nothing waits for it any more
        if process:
            self.worker = None
            self._start_process(system, cpus)
            feed = self._feed
        else:
            self.worker = Worker(target, config, system, os.getpid(), self._answer_worker)
            feed = functools.partial(self.worker.run, self._get)
        self._thread = threading.Thread(target=feed, name="hwsweep-tracking", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, spec, run_dir, config: TrackingConfig, start_step: int = 0, gpu: int | str | None = None,
              system: bool = True, cpus=None) -> "Tracker | None":  # fmt: skip
        """The tracker of a run (`config`: its folder's, TrackingConfig.of_run), or None when it names no tracker.
        `cpus`: where its process runs (the CPUs the run's processes left spare); None: where the run does."""
        return cls(run_target(spec, run_dir, start_step, gpu), config, system, cpus) if config.on else None

    def _get(self, timeout: float | None):
        return self.queue.get(timeout=timeout)

    # -- the tracker's process ------------------------------------------------------------------------------
    def _start_process(self, system: bool, cpus) -> None:
        root = str(Path(__file__).resolve().parents[2])  # hwsweep's folder on the child's path, as on ours
        # Without the working folder on its path: a user's mlflow.py or wandb.py there is not the client.
        code = "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; " \
               "from hwsweep.run.tracking import serve; serve()"  # fmt: skip
        self._tmp = None
        try:
            # Its own temporary folder, removed once it ends: it ends with os._exit, so the clients' temporary
            # folders (W&B makes two at import) would otherwise stay behind in /tmp after every job.
            self._tmp = tempfile.mkdtemp(prefix="hwsweep-tracker-")
            env = os.environ | {"PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
                                "TMPDIR": self._tmp}  # fmt: skip
            self._process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, env=env, text=True)  # fmt: skip
        except OSError as e:
            if self._tmp:
                shutil.rmtree(self._tmp, ignore_errors=True)
            self._process, self._gone = None, True
            self._end(f"the tracker's process did not start ({e})")
            return
        target = {k: str(v) if isinstance(v, Path) else v for k, v in self.target.__dict__.items()}
        start = {"target": target, "config": self.config.to_dict(), "system": system, "pid": os.getpid(),
                 "cpus": sorted(cpus) if cpus else None, "tmp": self._tmp}  # fmt: skip
        self._write([start])
        threading.Thread(target=self._read, name="hwsweep-tracking-answers", daemon=True).start()

    def _write(self, lines: list) -> bool:
        if self._process is None:
            return False
        try:
            self._process.stdin.write("".join(json.dumps(line) + "\n" for line in lines))
            self._process.stdin.flush()
            return True
        except (OSError, ValueError):  # the tracker's process is gone: _read says so
            return False

    def _feed(self) -> None:
        """Queued items to the tracker's process, a batch of rows a write."""
        while True:
            items = take(self._get, None)
            self._write(items)
            if items[-1][0] == "stop":
                if self._process is not None:
                    with contextlib.suppress(OSError):
                        self._process.stdin.close()
                return

    def _read(self) -> None:
        """The tracker's process's answers; its end without a stop fails the backends that were still fine."""
        for line in self._process.stdout:
            answer = json.loads(line)
            self._stopped = self._stopped or answer["stopped"]
            self._answer(answer["done"], answer["backends"], answer["busy"])
        code = self._process.wait()
        shutil.rmtree(self._tmp, ignore_errors=True)  # it removes its own, unless it ended on its own
        self._gone = True
        if not self._stopped:
            self._end(f"the tracker's process ended with exit code {code}")
        for token in list(self._waiting):
            self._waiting.pop(token).set()

    def _end(self, why: str) -> None:
        """The tracker's process is gone before the stop: every backend still fine failed with it (one line)."""
        for name in self.config.backends:
            b = self.backends.get(name) or {"state": "ok", "why": None, "dropped": 0, "undelivered": 0}
            if b["state"] != "failed":
                self.backends[name] = b | {"state": "failed", "why": why}
        warn(f"tracking: {why}; the run goes on without the trackers")

    def _answer_worker(self, token, stopped: bool) -> None:
        self._answer(token, self.worker.status(), self.worker.busy_seconds)

    def _answer(self, token, backends: dict, busy: float) -> None:
        self.backends |= backends
        self.busy_seconds = busy
        event = self._waiting.pop(token, None)
        if event is not None:
            event.set()

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

    def _wait(self, kind: str, timeout: float, failed: bool = False) -> bool:
        """Queue a mark (or the stop) and wait for the tracker to take everything before it, at most `timeout` s."""
        token, done = next(self._tokens), threading.Event()
        self._waiting[token] = done
        deadline = time.monotonic() + timeout
        if self._gone:  # checked after the token is in _waiting: _read sets _gone, then wakes every token
            return True
        try:
            self.queue.put((kind, (failed, token) if kind == "stop" else token), timeout=max(0.0, timeout))
        except queue.Full:
            return False
        return done.wait(max(0.0, deadline - time.monotonic()))

    def drain(self, timeout: float | None = None) -> dict:
        """Wait for what is queued to reach the trackers (each backend as long as it takes something within
        close_timeout, close_limit in all; `timeout`: the most this side waits for the answer); the status the
        record keeps (status())."""
        self._unanswered = None if self._wait("mark", self._timeout(timeout)) else self._late(self._timeout(timeout))
        return self.status()

    def status(self) -> dict:
        """The run's id, and per backend: state (ok: it took every row it was given; late: it still holds some;
        failed: it raised, was given up at the end, or its process ended), why (failed: the first line of why),
        the rows it lost to a full queue (dropped) and those it was given but never took (undelivered)."""
        backends = {}
        for name in self.config.backends:
            b = self.backends.get(name) or {"state": "late", "why": None, "dropped": 0, "undelivered": 0}
            if self._unanswered and b["state"] != "failed":
                b = b | {"state": "late", "why": self._unanswered}
            backends[name] = b | {"dropped": b["dropped"] + self.dropped}
        return {"id": self.target.run_id, "backends": backends}

    def final(self, step: int, values: dict) -> None:
        """A run's held-out evaluation (eval.json), at its last step: a scalar each in TensorBoard and MLflow,
        W&B's run summary."""
        self._put(("final", (int(step), {k: float(v) for k, v in values.items() if v is not None})))

    def close(self, artifacts=(), texts: dict | None = None, failed: bool = False, timeout: float | None = None) -> dict:
        """Hand over files (the record) and tables, close every tracked run, and wait as drain() does: a backend
        still holding rows then is given up (one warning line) and counted so."""
        for name, path in (texts or {}).items():
            self._put(("text", (name, str(path))))
        for path in artifacts:
            self._put(("artifact", str(path)))
        self._unanswered = None if self._wait("stop", self._timeout(timeout), failed) else self._late(self._timeout(timeout))
        return self.status()

    def _timeout(self, timeout: float | None) -> float:
        """The most this side waits for an answer: the clients' side answers within close_limit of the mark."""
        return self.config.close_limit + 30 if timeout is None else timeout

    def _late(self, timeout: float) -> str:
        """Why the clients' side did not answer (status() says it for each backend); one warning line per job."""
        if not self._warned_late:
            self._warned_late = True
            warn(f"tracking: the tracker's process did not answer within {timeout:g} s; the run goes on without waiting")
        return f"the tracker's process did not answer within {timeout:g} s"


def close_recorded(tracker: Tracker, record, status: dict) -> dict:
    """Close `tracker` with `record` (train.json or eval.json, written with `status`, what drain() said) as an
    artifact, and bring the record's tracking up to date where the close changed it (a backend that failed or
    was given up at the end): the record says what each tracker finally holds."""
    closed = tracker.close(artifacts=[record])
    if closed != status:
        io.write_json(record, io.read_json(record) | {"tracking": closed})
    return closed


def publish_evaluation(spec, run_dir, step: int, metrics: dict, record) -> dict | None:
    """The evaluate job's metrics to the run's tracked run (the same id: after its training, at its last step,
    under final/<metric>) with eval.json (`record`) as an artifact; eval.json's tracking says what each backend
    took. Waits as Tracker.drain does; failures are warnings. None when the run is not tracked."""
    tracker = Tracker.start(spec, run_dir, TrackingConfig.of_run(run_dir), start_step=step, system=False)
    if tracker is None:
        return None
    tracker.final(step, {f"{FINAL_PREFIX}{k}": v for k, v in metrics.items()})
    status = tracker.drain()
    io.write_json(record, io.read_json(record) | {"tracking": status})
    return close_recorded(tracker, record, status)


def publish_tables(suite: str, suite_dir, config: TrackingConfig, tables: dict) -> dict | None:
    """A suite's tables (name -> CSV path) to every tracker: MLflow artifacts, a W&B table each, TensorBoard
    text. Waits as Tracker.close does; a backend that did not take them is one warning line in the job's log.
    None when tracking is off."""
    if not config.on:
        return None
    tracker = Tracker(aggregate_target(suite, suite_dir), config, system=False)
    return tracker.close(texts=tables)
