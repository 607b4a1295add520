"""The MLflow backend: one run per tracked run in the experiment of its suite (a file store in results/ by
default, or the configured server), found again by its id tag; a resumed run is sent only the steps the store lacks."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from hwsweep.contracts.tracking import TrackingConfig
from hwsweep.run.tracking.target import Target

MLFLOW_FOLDER = "mlruns"  # the default MLflow store, in results/
ID_TAG = "hwsweep_run_id"


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
