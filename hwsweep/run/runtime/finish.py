"""Run's end: run.finish() writes train.json (the RunRecord, rank 0, atomically) and final.pt, after the
collectives every rank takes part in (each rank's memory, held against the plan; device names). A sharded model's
final checkpoint stays sharded (final/, hwsweep.run.checkpoint.link_final_sharded): no rank gathers the whole model."""

from __future__ import annotations

import json
import os

import torch.distributed as dist

from hwsweep.contracts import host, io, memory_check
from hwsweep.contracts.metrics import observations, summarise
from hwsweep.contracts.records import RunRecord
from hwsweep.contracts.spec import FINAL_CHECKPOINT, FINAL_SHARDS, METRICS_FILE, TRAIN_RECORD
from hwsweep.models.footprint import CUDA_CONTEXT_BYTES
from hwsweep.run import rank_memory, repro, shutdown, startup, tracking
from hwsweep.run.runtime.history import number
from hwsweep.run.runtime.throughput import steady_start
from hwsweep.run.startup import process_age


class Finish:
    """The part of Run (hwsweep.run.runtime.run) that ends the run; its state is set up in Run.__init__."""

    def finish(self, **metrics) -> None:
        """Log the final metrics (no step), link final.pt to the last checkpoint and write
        train.json (rank 0, atomically). Fails, naming it, when a declared metric was never logged."""
        if self.start is None:
            raise RuntimeError("hwsweep.runtime: run.finish() before run.steps(); nothing was trained")
        refused = []  # rank 0's writes the file system refused (full, read-only): every rank fails with it below

        def write(what) -> None:
            try:
                what()
            except io.StorageError as e:
                refused.append(str(e))

        write(lambda: self._write({}))  # values logged after the last step
        self._judge(self._guard.finish())
        final = {k: number(v) for k, v in (self._final | metrics).items()}
        # a collective: before rank 0 alone writes the record
        self.rank_memory = rank_memory.per_rank(self.device, self._memory_baseline)
        sharded = self.checkpoint.sharded
        if self.master and final and not refused:  # a line without a step: the run's value, not a point of a curve
            write(lambda: io.append_line(self.run_dir / METRICS_FILE, json.dumps(final)))
        gathered = [None] * self.world_size
        dist.all_gather_object(gathered, (f"{host.node_name()}:{self._device.name}", self.affinity["cpus"]))
        names = [name for name, _ in gathered]
        problem = [None]
        if self.master:
            if self.tracker is not None:
                if final:
                    self._to_track.setdefault(self.step or self.start, {}).update(final)
                self._send_tracked()
            status = self.tracker.drain() if self.tracker is not None else None
            try:
                if refused:
                    raise RuntimeError(refused[0])
                record = self._record(final, names, [cpus for _, cpus in gathered], status)
                if sharded is None:
                    self.checkpoint.link_final(self.run_dir / FINAL_CHECKPOINT)
                else:  # the last sharded checkpoint, as every rank wrote it
                    self.checkpoint.link_final_sharded(self.run_dir / FINAL_CHECKPOINT, self.run_dir / FINAL_SHARDS)
                io.write_json(self.run_dir / TRAIN_RECORD, record.to_dict())
            except (RuntimeError, io.StorageError) as e:  # said once, by rank 0; every rank fails with it below
                problem = [str(e)]
                if self.tracker is not None:
                    self.tracker.close(failed=True)
            else:
                if self.tracker is not None:
                    tracking.close_recorded(self.tracker, self.run_dir / TRAIN_RECORD, status)
        dist.broadcast_object_list(problem, src=0)
        dist.barrier()
        shutdown.leave(self._reduction)  # its worker threads joined now, not at the interpreter's teardown
        if self.affinity["pinned"]:  # a process that goes on after the run (a notebook, a test) gets its CPUs back
            os.sched_setaffinity(0, self._cpus_given)
        if problem[0]:
            raise SystemExit(f"hwsweep: {problem[0]}")

    def _contention_seen(self, cpus_per_rank: list) -> dict:
        """What else ran on the node, at the start and now (the larger of each), and the CPUs of each rank."""
        now = host.contention()
        seen = self._contention | {k: max(v for v in (self._contention[k], now[k]) if v is not None)
                                   for k in ("other_runs", "load_1m") if now[k] is not None}  # fmt: skip
        pinned = {k: self.affinity[k] for k in ("pinned", "reason")}
        return seen | {"affinity": pinned | {"cpus_per_rank": cpus_per_rank}}

    def _record(self, final: dict, device_names: list[str], cpus_per_rank: list, tracked: dict | None = None) -> RunRecord:
        declared = self.spec.metrics_of("train")
        lines = self.history["lines"]
        found = [o for line in lines + [final] for o in observations(line, declared)]
        finals, _ = summarise(found, declared)
        missing = [m for m in declared if m.name not in finals]
        if missing:
            key = missing[0].json_key
            raise RuntimeError(f"metric {missing[0].name} is declared but was never logged; "
                               f"call run.log({key}=...) or run.finish({key}=...)")  # fmt: skip
        curves = {}
        for line in lines:
            for key, value in line.items():
                if key != "step":
                    curve = curves.setdefault(key, {})
                    curve[line["step"]] = value  # a step logged twice keeps the later value
        curves = {k: {"steps": sorted(c), "values": [c[s] for s in sorted(c)]} for k, c in curves.items()}
        segments = self.history["segments"]
        step_seconds = self.history["step_seconds"]
        steady = self._throughput(step_seconds[steady_start(len(step_seconds)) :])
        s = self.spec
        return RunRecord(
            status="complete", suite=s.suite, variant=s.variant, hardware=s.hardware_name, seed=s.seed,
            trainer=s.trainer.kind, spec=s.to_dict(), plan=self.plan.__dict__ | {"threads_per_process": self.threads},
            metrics=finals, curves=curves, train_seconds=sum(step_seconds),
            startup_seconds=sum(g["startup_seconds"] for g in segments), wall_seconds=process_age(),
            startup_parts=startup.total(segments),
            samples_per_second=steady["samples_per_second"],
            data_order=self._data_order, segments=segments, restarts=len(segments) - 1,
            resumed_from_step=segments[-1]["start_step"] or None,
            provenance=repro.provenance(device_names) | {"contention": self._contention_seen(cpus_per_rank),
                                                         "compile": self.recipe.compile,
                                                         "activation_checkpointing": self.recipe.activation_checkpointing,
                                                         "optimizer_kernel": self.optimizer_kernel},
            checkpoint=FINAL_CHECKPOINT, step_seconds=step_seconds, flops_per_step=self.flops_per_step,
            periodic_eval_seconds=self.history.get("eval_seconds", []), stopped_at_step=self.history.get("stopped_at"),
            samples_per_second_per_device=steady["samples_per_second_per_device"],
            tflops_per_device=steady["tflops_per_device"], mfu=steady["mfu"], checks=self._checks(),
            seeded=True,  # init() seeded every rank from the run's seed
            planned_memory_gb=self.plan.est_memory_gb, memory_budget_gb=self.plan.memory_gb,
            peak_memory_gb=max(r["peak_gb"] for r in self.rank_memory), rank_memory=self.rank_memory,
            peak_memory_source=rank_memory.source(self.device), tracking=tracked,
        )  # fmt: skip

    def _checks(self) -> list[str]:
        """The run's checks: the loop's (divergence) and, where a rank used more memory than the plan allows, that."""
        over = memory_check.over_plan(self.plan.est_memory_gb, self.device.type, CUDA_CONTEXT_BYTES, self.rank_memory,
                                      self.recipe.compile)  # fmt: skip
        return list(self.history["checks"]) + ([over] if over else [])
