"""The TensorBoard backend: event files in the tracked folder, the plan as hparams, tables as text; a resumed
run's curve continues after its checkpoint."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from hwsweep.contracts.tracking import TrackingConfig
from hwsweep.run.tracking.tables import markdown_table
from hwsweep.run.tracking.target import Target

FOLDER = "tensorboard"  # in each run's folder (and each suite's, for its tables)


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
