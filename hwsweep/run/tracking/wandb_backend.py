"""The W&B backend: one run per tracked run (online with a key, else offline in the run's folder); a resumed run
is sent only the steps past those W&B holds, the evaluation goes to its summary, tables as W&B tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hwsweep.contracts.tracking import TrackingConfig
from hwsweep.run.tracking.failure import first_line, warn
from hwsweep.run.tracking.tables import read_table
from hwsweep.run.tracking.target import Target

REPLACED_FOLDER = "replaced"  # under a run's wandb/: W&B offline attempts a fresh start replaced (kept, not synced)


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
