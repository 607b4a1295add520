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
trackers' clients are imported in the tracker's process only, only when named.

Its parts: target (where a tracked run lives), tensorboard_backend, mlflow_backend, wandb_backend (a backend
each), tables (CSV tables as the trackers show them), system (system metrics), channel (one backend's thread
and queue), worker (the clients' side: every channel, the marks and the stop), process (the tracker's
process), tracker (the run's side), publish (what a job hands the trackers at its end), failure (the warning
line). Their public names are importable from here."""

# Re-exported: the runner, the runtime, the evaluate job, the workflow's scripts and the tests import them from here.
from hwsweep.run.tracking.channel import Channel  # noqa: F401
from hwsweep.run.tracking.failure import first_line, warn  # noqa: F401
from hwsweep.run.tracking.mlflow_backend import ID_TAG, MLFLOW_FOLDER, Mlflow  # noqa: F401
from hwsweep.run.tracking.process import PID_FILE, serve  # noqa: F401
from hwsweep.run.tracking.publish import FINAL_PREFIX, close_recorded, publish_evaluation, publish_tables  # noqa: F401
from hwsweep.run.tracking.system import System  # noqa: F401
from hwsweep.run.tracking.tables import TEXT_ROWS, markdown_table, read_table  # noqa: F401
from hwsweep.run.tracking.target import Target, aggregate_target, run_target, visible_gpu  # noqa: F401
from hwsweep.run.tracking.tensorboard_backend import FOLDER, TensorBoard  # noqa: F401
from hwsweep.run.tracking.tracker import OWNER_FILE, Tracker  # noqa: F401
from hwsweep.run.tracking.wandb_backend import REPLACED_FOLDER, Wandb  # noqa: F401
from hwsweep.run.tracking.worker import BACKENDS, BATCH, Worker, take  # noqa: F401
