"""Run a user's command for one stage of a run (train or evaluate) and write that stage's record.

The command runs as a child in its own process group: its output is passed through to the
job's log line by line and parsed for the declared metrics as it comes (or its JSON-lines
metrics file is read at the end); a preemption signal is forwarded to the whole group as the
signal the script asked for; the child dies with this process (PDEATHSIG), so killing the
workflow leaves no trainer behind. Success means: exit 0 and every declared metric of the
stage found, finite and within its bounds. Torch-free, so it adds little to a run's start."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from hwsweep.contracts import failure, guard, host, io, secrets
from hwsweep.contracts.command import (
    THREAD_ENV,
    Invocation,
    as_passed,
    command_argv,
    expression_value,
    logged_number,
    not_passed,
    plan_values,
    render,
    script_provenance,
)
from hwsweep.contracts.metrics import TextParser, parse_jsonl_line, problems, summarise
from hwsweep.contracts.records import EvalRecord, RunRecord, read
from hwsweep.contracts.spec import CHECKPOINT_DIR, CHECKPOINTS, EVAL_RECORD, TRAIN_RECORD, RunSpec, inside
from hwsweep.contracts.tracking import TrackingConfig
from hwsweep.run import allocator, observe, tether, tracking
from hwsweep.run.preempt import EXIT_PREEMPTED
ATTEMPTS_FILE = "attempts.jsonl"  # one line per start of the command, for restarts and resume
PARSED_FILE = "parsed_metrics.jsonl"  # observations parsed from the output, kept across attempts
TAIL = 5  # lines a message quotes when the output says nothing more precise


class RunFailed(Exception):
    """The stage failed; the message is the one line the user sees."""


class Stage:
    """One run of a user's command with its output parsed for `metrics`."""

    def __init__(self, spec: RunSpec, invocation: Invocation, metrics, argv: list[str], env: dict, cwd: str | None = None):
        self.spec, self.invocation, self.metrics = spec, invocation, metrics
        self.argv, self.env, self.cwd = argv, env, cwd or invocation.workdir
        self.tail = collections.deque(maxlen=failure.KEEP)  # enough to hold the traceback above torchrun's report
        self.parser = TextParser(metrics, invocation.step_pattern) if invocation.metrics_file is None else None
        self.observations: list[dict] = []
        self.first_step_seconds = None
        self.signalled = None
        self.stopped = None  # the guard's verdict that stopped the command early
        self._metrics_offset = 0  # how far the metrics file has been read while the command runs

    def _forward(self, signum, frame) -> None:
        self.signalled = signum
        if self.child is None:
            return
        # The script gets the signal it asked for. torchrun's agent is left out: it ignores the stop
        # signals (tether.agent_preexec) and exits when its workers do.
        targets = descendants(self.child.pid) + ([] if self.skip_launcher else [self.child.pid])
        for pid in targets:
            try:
                os.kill(pid, self.forward_as)
            except ProcessLookupError:
                pass

    def _fresh_file_observations(self) -> list[dict]:
        """Observations in the lines the script appended to its metrics file since the last call."""
        path = inside(self.spec.run_dir, self.invocation.metrics_file)
        if path is None:
            return []  # a link out of the run folder: results() names it
        try:
            with open(path, "rb") as f:
                f.seek(self._metrics_offset)
                chunk = f.read()
        except OSError:
            return []
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written is read next time
        self._metrics_offset += len(complete)
        lines = complete.decode(errors="replace").splitlines()
        return [o for line in lines for o in parse_jsonl_line(line, self.metrics)]

    def _stop(self, verdict: str) -> None:
        """The watcher's verdict: stop the whole command now (its process group), not at its end."""
        self.stopped = verdict
        # torchrun's agent ignores SIGTERM (tether.agent_preexec): its workers get it, and it exits when they do.
        for pid in descendants(self.child.pid, depth=1) if self.skip_launcher else [-self.child.pid]:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def run(self, forward_as: int, on_line=None, skip_launcher: bool = False, watch=None,
            on_metrics=None) -> tuple[int, float]:  # fmt: skip
        """Start, stream, wait. Returns (exit code, seconds). `watch(observations)` sees the metrics as
        they come (parsed from the output, or read from the metrics file at each output line) and
        returns a verdict line that stops the command, or None; `on_metrics(observations)` sees them too
        (the trackers)."""
        self.child, self.forward_as, self.skip_launcher = None, forward_as, skip_launcher
        handlers = {s: signal.signal(s, self._forward) for s in (signal.SIGTERM, signal.SIGUSR2, signal.SIGINT)}
        try:  # the config's secrets reach the command's own arguments only (hwsweep.contracts.secrets)
            argv = secrets.unseal(self.argv, self.env)
        except secrets.SecretMissing as e:
            raise SystemExit(f"hwsweep: {e}") from None
        hidden = secrets.known(self.env)  # what the command may echo of its arguments or environment
        t0 = time.perf_counter()
        try:
            self.child = subprocess.Popen(
                argv, cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1,
                process_group=0,
                preexec_fn=tether.agent_preexec() if skip_launcher else tether.preexec(signal.SIGTERM),
            )  # fmt: skip
            # torchrun's agent ignores SIGTERM: killed, its tethered workers die with it.
            tether.stop_when_workflow_ends(self.child, signal.SIGKILL if skip_launcher else signal.SIGTERM)
            for line in self.child.stdout:
                line = secrets.mask_known(line, hidden)
                sys.stdout.write(line)
                self.tail.append(line.rstrip("\n"))
                if on_line:
                    on_line(line)
                found = []
                if self.parser:
                    found = self.parser.feed(line)
                    self.observations += found
                    if self.first_step_seconds is None and any(o["step"] is not None for o in found):
                        self.first_step_seconds = time.perf_counter() - t0
                elif watch or on_metrics:
                    found = self._fresh_file_observations()
                if on_metrics and found:
                    on_metrics(found)
                verdict = watch(found) if watch and found and self.stopped is None else None
                if verdict:
                    self._stop(verdict)
            code = self.child.wait()
        finally:
            for s, h in handlers.items():
                signal.signal(s, h)
        sys.stdout.flush()
        return code, time.perf_counter() - t0

    def where(self) -> str:
        inv = self.invocation
        return f"metrics file {inv.metrics_file}" if inv.metrics_file else "its output"

    def last_lines(self) -> str:
        return " | ".join(list(self.tail)[-TAIL:]) or "(no output)"

    def _inside_longer(self, name: str) -> str:
        """' (metric loss printed only inside longer names: ...)' where the output held the metric's name only as the
        end of longer ones (a default pattern matches whole names: `test loss` is not `loss`), else ''."""
        longer = sorted(self.parser.longer.get(name, ())) if self.parser else []
        if not longer:
            return ""
        return (f" (metric {name} printed only inside longer names: {', '.join(longer)}; declare those, e.g. "
                f"{longer[0].replace(' ', '_')}, or give metrics.{name}.pattern)")  # fmt: skip

    def results(self, code: int, history: list[dict] | None = None) -> tuple[dict, dict]:
        """Final values and curves, or RunFailed with one line saying why."""
        if self.signalled is not None:
            raise RunFailed(f"stopped by signal {signal.Signals(self.signalled).name} (exit {code})")
        if code != 0:
            raise RunFailed(f"the command exited {code}: {failure.reason(list(self.tail)) or '(no output)'}")
        inv = self.invocation
        if inv.metrics_file:
            path = inside(self.spec.run_dir, inv.metrics_file)
            if path is None:
                raise RunFailed(f"metrics file {inv.metrics_file} is a link out of the run folder {self.spec.run_dir}; "
                                "write the metrics into the run folder itself")  # fmt: skip
            lines = path.read_text(errors="replace").splitlines() if path.exists() else []
            self.observations = [o for line in lines for o in parse_jsonl_line(line, self.metrics)]
        observations = (history or []) + self.observations
        if not observations:
            hints = "".join(self._inside_longer(m.name) for m in self.metrics)
            raise RunFailed(
                f"the command exited 0 but wrote no metrics (looked for {', '.join(m.name for m in self.metrics)} "
                f"in {self.where()}){hints}; last {TAIL} lines: {self.last_lines()}"
            )
        finals, curves = summarise(observations, self.metrics)
        for m in self.metrics:
            if m.name not in finals:
                raise RunFailed(f"metric {m.name} not found in {self.where()}{self._inside_longer(m.name)}; "
                                f"last {TAIL} lines: {self.last_lines()}")  # fmt: skip
        bad = problems(finals, self.metrics)
        if bad:
            raise RunFailed(f"{bad[0]}; last {TAIL} lines: {self.last_lines()}")
        return finals, curves


def _env(spec: RunSpec, spec_path: str, threads: int, base: dict | None = None, reveal: bool = True) -> dict:
    plan = spec.plan
    per_process = max(1, threads // plan.devices_per_node)
    base = os.environ if base is None else base
    # trainer.env: never one of the variables below; a sealed secret's value from the job's environment (`reveal`),
    # else its placeholder (a command shown, not run)
    own = {k: render(v) for k, v in spec.trainer.env.items()}
    if reveal:
        own = dict(zip(own, secrets.unseal(list(own.values()), base)))
    return base | own | {
        "HWSWEEP_SPEC": str(Path(spec_path).resolve()),
        "HWSWEEP_RUN_DIR": str(Path(spec.run_dir).resolve()),
        "PYTHONUNBUFFERED": "1",  # lines as they happen, for parsing and for the log
    } | dict.fromkeys(THREAD_ENV, str(per_process))


def train_environment(spec: RunSpec, spec_path: str, threads: int, base: dict | None = None,
                      reveal: bool = True) -> dict:  # fmt: skip
    """The environment the training command gets (`base`: the job's own, default this process's; `reveal`: False
    to show it, its secrets left sealed), with the malloc settings the plan assumes (hwsweep.run.allocator)."""
    env = allocator.environment(_env(spec, spec_path, threads, base, reveal), spec.plan.accelerator)
    return observe.environment(Path(spec.run_dir), spec.trainer, env) if spec.trainer.observe != "off" else env


def train_folder(spec: RunSpec) -> str:
    """Where the training command runs (trainer.cwd)."""
    return str(Path(spec.run_dir).resolve()) if spec.trainer.cwd == "run_dir" else spec.trainer.invocation.workdir


def _provenance(spec: RunSpec, invocation: Invocation, env: dict) -> dict:
    try:
        from importlib import metadata  # here: only a finished run's record needs it

        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = None
    here = Path(__file__).resolve().parent
    status = host.git(here, "status", "--porcelain")
    return {
        "torch": torch_version,
        "cuda": None,
        "nccl": None,
        "python": sys.version.split()[0],
        "host": host.node_name(),
        "devices": [f"{host.node_name()}:{spec.plan.accelerator}"] * spec.plan.world_size,
        "git_commit": host.git(here, "rev-parse", "HEAD"),
        "git_dirty": bool(status) if status is not None else None,
        "env": host.recorded_env(env),  # what the command was given, not this launcher's own
        "script": script_provenance(invocation),
    }


def _plan_checks(spec: RunSpec, seen: dict) -> list[str]:
    """Where the script's own log says it ran something else than the plan (trainer.plan_check)."""
    values, out = plan_values(spec), []
    for name, check in spec.trainer.plan_check.items():
        if name not in seen:
            out.append(f"plan_check {name}: the script never logged it")
            continue
        want, got = expression_value(check["equals"], values, spec.recipe.args), seen[name]
        number = logged_number(got)
        if number is None or abs(number - want) > 1e-9 * max(1.0, abs(want)):
            said = f"{want:g}" if check["equals"] == name else f"{check['equals']} = {want:g}"
            out.append(f"the script logged {name} {got}, the plan says {said}: it does not follow the plan")
    return out


def _observed(spec: RunSpec, run_dir: Path, steps: int | None,
              threads: int | None = None) -> tuple[dict | None, list[str], list[str]]:  # fmt: skip
    """What the command's processes reported (hwsweep.run.observe), where it departs from the plan, and the flags
    that fail nothing: what could not be verified, and threads per process other than `threads`. A run in which no
    process reported (no torch backward pass or optimizer step seen: not a Python torch script) is unverified: a
    departure for a plan of several processes (their group is the point), a flag for one."""
    if spec.trainer.observe == "off":
        return None, [], []
    reports = observe.read(run_dir)
    if not reports:
        n = spec.plan.world_size
        what = f"its {n} processes, devices, batch and steps are" if n > 1 else "its device, batch and steps are"
        unseen = (f"unverified: no process of the command ran a torch backward pass or optimizer step hwsweep could "
                  f"see, so {what} unverified")  # fmt: skip
        return None, ([unseen] if n > 1 else []), ([] if n > 1 else [unseen])
    summary = observe.observed(reports)
    other_threads = observe.threads_differ(summary, threads)
    return summary, observe.differences(summary, spec.plan, steps), [f"observed: {other_threads}"] if other_threads else []


def loss_metric(metrics) -> str | None:
    """The train-stage metric the divergence guard watches: the one named or keyed loss, else the first
    whose name ends in loss; None when the script reports no loss."""
    train = [m for m in metrics if m.stage == "train"]
    named = [m for m in train if "loss" in (m.name, m.json_key)] or [m for m in train if m.name.endswith("loss")]
    return named[0].name if named else None


def live_guard(spec: RunSpec, history: list[dict]):
    """A watcher for Stage.run that stops a diverging command as soon as the guard says so (guard.action
    fail; under flag the run goes on and is judged at its end). Earlier attempts' losses are fed first."""
    name = loss_metric(spec.metrics)
    if spec.guard.action != "fail" or name is None:
        return None
    watcher = guard.Guard(spec.guard)

    def watch(observations: list[dict]) -> str | None:
        verdicts = [watcher.feed(o["step"], o["value"]) for o in observations if o["metric"] == name and o["step"]]
        return next((v for v in verdicts if v), None)

    watch(history)
    return watch


def divergence(spec: RunSpec, curves: dict) -> str | None:
    """The guard's verdict on the parsed loss series (earlier attempts included), or None."""
    name = loss_metric(spec.metrics)
    if spec.guard.action == "off" or name is None or name not in curves:
        return None
    return guard.judge(spec.guard, curves[name]["steps"], curves[name]["values"])


def train(spec: RunSpec, spec_path: str, argv: list[str], threads: int) -> int:
    """Run the training command on the first node and write train.json."""
    trainer, run_dir = spec.trainer, Path(spec.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    attempts_path, history_path = run_dir / ATTEMPTS_FILE, run_dir / PARSED_FILE
    resuming = bool(trainer.resume_when) and any(
        inside(run_dir, str(p.relative_to(run_dir))) for p in run_dir.glob(trainer.resume_when))  # fmt: skip
    # A runtime-API script resumes from its own checkpoints: then this attempt's step count is its own too.
    fresh = not resuming and not any(Path(run_dir, CHECKPOINT_DIR).glob(CHECKPOINTS))
    if not resuming:  # a fresh start forgets earlier attempts of this run
        for path in (attempts_path, history_path):
            path.unlink(missing_ok=True)
    history = _read_jsonl(history_path)  # parsed output of earlier attempts (empty with a metrics file)
    attempts = _read_jsonl(attempts_path)
    first_step = max((o["step"] for o in history if o.get("step") is not None), default=0)
    io.append_line(attempts_path, json.dumps({"start_step": first_step, "resumed": resuming}))

    started = time.time()
    checks = {name: re.compile(check["pattern"]) for name, check in trainer.plan_check.items()}
    seen = {}

    def on_line(line: str) -> None:
        for name, rx in checks.items():
            m = rx.search(line)
            if m:
                seen[name] = m.group(1)

    contention = host.contention()
    resume = [a.replace("{run_dir}", str(run_dir.resolve())) for a in trainer.resume_args] if resuming else []
    env = train_environment(spec, spec_path, threads)
    observe.reset(run_dir)
    stage = Stage(spec, trainer.invocation, spec.metrics_of("train"), argv + resume, env, train_folder(spec))
    launcher = trainer.launcher(spec.plan.world_size)
    tracked = TrackingConfig.of_run(run_dir)
    feed = TrackerFeed(spec, run_dir, tracked, first_step if resuming else 0, started)
    code, seconds = stage.run(getattr(signal, f"SIG{trainer.signal}"), on_line, launcher == "torchrun",
                              live_guard(spec, history), feed if tracked.on else None)  # fmt: skip
    contention["other_runs"] = max(contention["other_runs"], host.other_runs())
    for o in stage.observations:  # the parsed output is kept, so a resumed run keeps its earlier steps
        io.append_line(history_path, json.dumps(o))
    try:
        if stage.stopped:
            raise RunFailed(f"{stage.stopped} (stopped early; guard.action: fail; flag keeps such runs)")
        finals, curves = stage.results(code, history)
        verdict = divergence(spec, curves)
        if verdict and spec.guard.action == "fail":
            raise RunFailed(f"{verdict} (guard.action: fail; flag keeps such runs)")
        own = _own_record(spec, started)  # a runtime-API script's, which may have stopped at its targets
        planned = (own and own.stopped_at_step) or spec.plan.steps
        # The threads a process was to run: the runtime's own count, else the OMP_NUM_THREADS a command is given.
        threads = own.plan.get("threads_per_process") if own else int(env["OMP_NUM_THREADS"])
        seen_run, departures, unverified = _observed(spec, run_dir, planned if fresh else None, threads)
        if departures and trainer.observe == "fail":
            raise RunFailed(f"what trained is not the plan: {'; '.join(departures)} (trainer.observe: flag keeps such runs)")
        if own is not None:  # a runtime-API script wrote the full RunRecord itself; what the observer saw joins it
            own = dataclasses.replace(own, observed=seen_run,
                                      checks=own.checks + [f"observed: {d}" for d in departures] + unverified)
            io.write_json(spec.path(TRAIN_RECORD), own.to_dict())
            feed.close()
            return 0
    except RunFailed as e:
        print(f"hwsweep: {spec.suite}/{spec.variant}/{spec.hardware_name}/seed{spec.seed}: {e}", file=sys.stderr)
        feed.close(failed=stage.signalled is None, preempted=stage.signalled is not None)
        # A runtime-API script resumes from its own checkpoints without trainer.resume.
        resumable = trainer.resume_when or any(Path(spec.run_dir, CHECKPOINT_DIR).glob(CHECKPOINTS))
        return EXIT_PREEMPTED if stage.signalled is not None and resumable else 1
    startup = stage.first_step_seconds  # None: the script printed no step, so where startup ends is unknown
    train_seconds = max(seconds - (startup or 0.0), 1e-9)
    segments = attempts + [{"start_step": first_step, "resumed": resuming}]
    plan, spec_dict = as_passed(spec)
    record = RunRecord(
        status="complete", suite=spec.suite, variant=spec.variant, hardware=spec.hardware_name, seed=spec.seed,
        trainer="command", spec=spec_dict, plan=plan | {"threads_per_process": threads},  # OMP_NUM_THREADS given
        metrics=finals, curves=curves, train_seconds=train_seconds, startup_seconds=startup, wall_seconds=seconds,
        samples_per_second=spec.plan.global_batch * (spec.plan.steps - first_step) / train_seconds,
        data_order={"sampler": "script", "dataset_size": None, "num_workers": spec.recipe.num_workers},
        segments=segments, restarts=len(segments) - 1, resumed_from_step=first_step if resuming else None,
        provenance=_provenance(spec, trainer.invocation, env) | {"contention": contention},
        checks=_plan_checks(spec, seen) + ([f"divergence: {verdict}"] if verdict else [])
        + [f"observed: {d}" for d in departures] + unverified,
        observed=seen_run, not_passed=not_passed(trainer, spec.recipe.args),
        # The script's own GPU memory is not visible from here: its largest process's host memory is.
        planned_memory_gb=spec.plan.est_memory_gb, peak_memory_gb=host.peak_rss_bytes(children=True) / 2**30,
        peak_memory_source="host_rss", tracking=feed.drain(),
    )  # fmt: skip
    io.write_json(spec.path(TRAIN_RECORD), record.to_dict())
    feed.close(record=spec.path(TRAIN_RECORD))
    for check in record.checks:
        print(f"hwsweep: warning: {check}", file=sys.stderr)
    return 0


class TrackerFeed:
    """The trackers' view of a command's run: the metrics the runner parses, at their steps, plus system metrics.
    Started at the first metric unless the command is a runtime-API script that feeds the trackers itself
    (it writes tracking.OWNER_FILE in the run folder when it starts)."""

    def __init__(self, spec: RunSpec, run_dir: Path, config: TrackingConfig, start_step: int, since: float):
        self.spec, self.run_dir, self.config, self.start_step, self.since = spec, run_dir, config, start_step, since
        self.tracker = None
        self.theirs = False  # the script's own runtime tracks
        self.drained: dict | None = None  # the status drain() gave the record

    def __call__(self, observations: list[dict]) -> None:
        if self.tracker is None and not self.theirs:
            owner = Path(self.run_dir, tracking.OWNER_FILE)
            self.theirs = owner.exists() and owner.stat().st_mtime >= self.since
            if self.theirs:
                return
            gpu = tracking.visible_gpu() if self.spec.plan.accelerator == "cuda" else None
            self.tracker = tracking.Tracker.start(self.spec, self.run_dir, self.config, self.start_step, gpu)
        if self.tracker is None:
            return
        by_step: dict[int, dict] = {}
        for o in observations:
            if o["step"] is not None:
                by_step.setdefault(o["step"], {})[o["metric"]] = o["value"]
        for step, values in sorted(by_step.items()):
            self.tracker.log(step, values)

    def close(self, record=None, failed: bool = False, preempted: bool = False) -> None:
        """Close the tracked run; with `record` (train.json, just written with drain()'s status) sent as an
        artifact and its tracking status brought up to date. Preempted, it waits at most close_timeout: the
        scheduler's notice is for the checkpoint."""
        if self.tracker is None:
            return
        if record is None:
            self.tracker.close(failed=failed, timeout=self.config.close_timeout if preempted else None)
        else:
            tracking.close_recorded(self.tracker, record, self.drained)

    def drain(self) -> dict | None:
        self.drained = self.tracker.drain() if self.tracker is not None else None
        return self.drained


def evaluate(spec: RunSpec, spec_path: str, threads: int) -> int:
    """Run the evaluation command and write eval.json."""
    inv = spec.evaluation.invocation
    stage = Stage(spec, inv, spec.metrics_of("eval"), command_argv(spec, inv), _env(spec, spec_path, threads))
    code, seconds = stage.run(signal.SIGTERM)
    try:
        finals, _ = stage.results(code)
    except RunFailed as e:
        print(f"hwsweep: evaluation of {spec.run_dir}: {e}", file=sys.stderr)
        return 1
    record = EvalRecord(suite=spec.suite, variant=spec.variant, hardware=spec.hardware_name, seed=spec.seed,
                        evaluator="command", metrics=finals, eval_seconds=seconds)  # fmt: skip
    io.write_json(spec.path(EVAL_RECORD), record.to_dict())
    return 0


def _own_record(spec: RunSpec, since: float) -> RunRecord | None:
    """The train.json the script wrote during this attempt (it must name this run), or None."""
    path = spec.path(TRAIN_RECORD)
    if not path.exists() or path.stat().st_mtime < since:
        return None
    record = read(RunRecord, path)
    if (record.suite, record.variant, record.hardware, record.seed) != (spec.suite, spec.variant, spec.hardware_name, spec.seed):
        raise RunFailed(f"{path} was written for another run; remove it and rerun")
    return record


def descendants(pid: int, depth: int | None = None) -> list[int]:
    """Every process below `pid` (Linux /proc), children first; `depth` 1: its children only."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [(pid, 0)]
    while todo:
        parent, level = todo.pop(0)
        if depth is not None and level >= depth:
            continue
        kids = parents.get(parent, [])
        out += kids
        todo += [(kid, level + 1) for kid in kids]
    return out


def _read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by a kill
    return out
