"""Every GPU claim of hwsweep measured in one command, within 8 minutes on one CUDA GPU (issue 39).

The two commands, from the repository root:

    # 1. here, where PyPI is reachable, with the project's venv: the packages the check needs beyond torch,
    #    for the GPU machine's Python 3.12 on x86_64 Linux, into .gpu-wheels/ (ignored by git; about 28 MiB)
    .venv/bin/python bench/gpu_check.py --wheels .gpu-wheels

    # 2. there, on the GPU machine, from a copy of the repository with .gpu-wheels/ sent along (it is ignored by
    #    git: a copy of the tracked files leaves it out), with the machine's own python3 and torch, offline;
    #    allow it 10 minutes; $OUT: any folder, where the results go
    PYTHONUNBUFFERED=1 python3 bench/gpu_check.py --from-wheels .gpu-wheels --out $OUT

The second installs .gpu-wheels/ into a fresh venv that sees the machine's own packages (torch among them),
then runs the check there. It writes to --out: gpu_check.json (every row, with the device, driver, CUDA and
torch versions), gpu_check.md (the table for docs/benchmarks.md) and gpu_check.log (everything the sections
printed). Sections (docs/benchmarks.md, "GPU check", says what each measures and why):

    speed     trainer vs a bare hand-written loop, three sizes, fp32 and bf16-mixed, eager and compiled (>= 0.97)
    memory    the plan vs max_memory_allocated, DDP and FSDP at world size 1 (+-15%); micro_batch auto (>= 70%)
    mfu       MFU of the built-in transformer at the large size against the catalog's peak for this GPU
    workflow  the local default recipe on this GPU through snakemake, 2 seeds: provenance, NVML metrics in
              TensorBoard, evaluation on the GPU, a deterministic repeat bitwise equal
    hrm       the HRM family: train + evaluate steps on the GPU, its FLOPs per step and step time against the plan
    startup   a GPU run's startup beyond a bare script's first training step (import torch, CUDA init, NCCL,
              one AdamW step: torch's lazy costs, which any script pays) (<= 3 s)

Each section runs in a process of its own with its own time budget: one over it is stopped and said so (its
finished rows kept, each row in progress with what it had reached), one that fails never stops the others; hrm
and workflow run side by side. A program a section starts (snakemake, the launcher, the evaluator, torchrun)
that fails or is stopped puts the last 40 lines of its log into gpu_check.log. The work folder (printed on a line
of its own; deleted at the end unless --keep-work) is /tmp/hwsweep-gpu-check-*, the venv of --from-wheels
/tmp/hwsweep-venv-for-gpu-check. `--smoke` runs every section's code path at tiny sizes on whatever device this
is (a CPU in the tests): its figures mean nothing. A shorter run: `--sections` picks sections, `--speed-rows` the
speed section's rows (e.g. `--speed-rows "medium fp32 eager" "large bf16-mixed eager"`), `--deadline` the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(HERE), str(REPO)]

from gpucheck import proc as proc_tools  # noqa: E402  (stdlib only)
from gpucheck import wheels  # noqa: E402  (stdlib only: runs before the install)

DEADLINE_S = 480  # the whole check, the offline install included (issue 39: 8 minutes)
GRACE_S = 10  # between the stop signal and the kill of a section over its budget


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    budget_s: float  # on a GPU; the sum over the stages (sections run side by side count once) stays under DEADLINE_S
    smoke_budget_s: float  # --smoke on a loaded 2-core CPU
    beside: str | None = None  # runs at the same time as this section (the one before it), in one stage


# Run in this order: the short ones first, the trainer-vs-loop pairs last (they take whatever time is left;
# rows they do not reach are listed as skipped). hrm and workflow check what runs, not how fast: they run side by
# side (each waits mostly on its programs' start: Python, torch, CUDA). Budgets from the first H100 run
# (2026-11-26, docs/history/benchmarks.md): memory took 33-43 s, mfu 28 s; startup, hrm and workflow did not finish in
# theirs, speed finished 6 of 12 rows in 236 s; in the third (680f5e6) memory took 34 s (its micro_batch auto rows
# now probe more micro-batches: 50 s), mfu 18 s. The table lists them in issue 39's order (ORDER).
SECTIONS = [
    Section("startup", "startup of a GPU run", 50, 120),
    Section("memory", "memory plan vs measured peak", 50, 120),
    Section("mfu", "MFU at the large size", 30, 90),
    Section("hrm", "HRM family on the GPU", 75, 150),
    Section("workflow", "local default recipe through the workflow", 90, 240, beside="hrm"),
    Section("speed", "trainer vs bare loop", 230, 240),
]
ORDER = ["speed", "memory", "mfu", "workflow", "hrm", "startup"]
# The speed section's rows by name (gpucheck.speed runs the sizes of bench/trainer_vs_bare_loop.py): --speed-rows.
SPEED_ROWS = [f"{size} {precision} {mode}" for size in ("tiny", "medium", "large") for precision in ("fp32", "bf16-mixed")
              for mode in ("eager", "compiled")]  # fmt: skip


def stages(chosen: list[Section]) -> list[list[Section]]:
    """The sections in the stages they run in: one each, but a section `beside` the one before it shares its stage."""
    out: list[list[Section]] = []
    for section in chosen:
        if out and section.beside in [s.key for s in out[-1]]:
            out[-1].append(section)
        else:
            out.append([section])
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="folder for gpu_check.json, gpu_check.md and gpu_check.log")
    parser.add_argument("--smoke", action="store_true", help="every section at tiny sizes on this device (CPU: tests)")
    parser.add_argument("--sections", nargs="+", choices=[s.key for s in SECTIONS], help="only these (default: all)")
    parser.add_argument("--speed-rows", nargs="+", metavar="ROW", help="speed: only these rows, each 'SIZE PRECISION "
                        "eager|compiled' (e.g. 'medium fp32 eager'); default: all 12")  # fmt: skip
    parser.add_argument("--deadline", type=float, help=f"seconds for the whole check (default {DEADLINE_S}; --smoke: "
                        "the sum of the smoke budgets)")  # fmt: skip
    parser.add_argument("--wheels", type=Path, metavar="DIR", help="download the packages the check needs into DIR")
    parser.add_argument("--python-version", default="3.12", help="--wheels: the GPU machine's Python (default 3.12)")
    parser.add_argument("--from-wheels", type=Path, metavar="DIR", help="install DIR offline into a venv, run there")
    parser.add_argument("--keep-work", action="store_true", help="keep the sections' folders (runs, logs, checkpoints)")
    parser.add_argument("--section", help=argparse.SUPPRESS)  # one section, in its own process
    parser.add_argument("--context", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.wheels:
        return wheels.download(args.wheels, args.python_version)
    if args.from_wheels:
        rest = _without(argv, "--from-wheels")
        return wheels.bootstrap(args.from_wheels, REPO, [str(Path(__file__).resolve()), *rest])
    if args.section:
        from gpucheck import sections

        return sections.run(args.section, args.context)
    if not args.out:
        parser.error("--out DIR is required (or --wheels DIR)")
    unknown = [row for row in args.speed_rows or [] if row not in SPEED_ROWS]
    if unknown:
        parser.error(f"--speed-rows: {unknown[0]!r} is no row of the speed section; use one of "
                     f"{', '.join(repr(r) for r in SPEED_ROWS)}")  # fmt: skip
    return check(args)


def _without(argv: list[str], flag: str) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == flag:
            skip = True
        elif not arg.startswith(flag + "="):
            out.append(arg)
    return out


class Log:
    """Lines to the console and to gpu_check.log; the sections' own output to the log only."""

    def __init__(self, path: Path):
        self.path = path
        self.file = open(path, "a", buffering=1)

    def say(self, line: str) -> None:
        print(line, flush=True)
        self.file.write(line + "\n")


def check(args) -> int:
    from hwsweep.contracts import io

    from gpucheck import table

    t0 = float(os.environ.get(wheels.T0_ENV, time.time()))
    chosen = [s for s in SECTIONS if not args.sections or s.key in args.sections]
    deadline_s = args.deadline or (sum(s.smoke_budget_s for s in chosen) + 60 if args.smoke else DEADLINE_S)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / "gpu_check.log")
    work = Path(tempfile.mkdtemp(prefix="hwsweep-gpu-check-"))
    log.say(f"bench/gpu_check.py{' --smoke' if args.smoke else ''}: sections {', '.join(s.key for s in chosen)}; "
            f"{deadline_s:.0f} s in all; work folder {work}")  # fmt: skip
    log.say(f"work folder: {work}")  # on a line of its own, for `ls` (--keep-work keeps it after the check)
    device, hardware, problem = _device(work, log)
    if not problem and not args.smoke and hardware["accelerator"] != "cuda":
        problem = "no CUDA device visible here; the check's sizes need one (--smoke runs its code at tiny sizes on a CPU)"
        log.say(f"bench/gpu_check.py: {problem}")
    result = {"check": "bench/gpu_check.py", "smoke": args.smoke, "started": time.strftime("%Y-%m-%d %H:%M:%S %Z",
              time.localtime(t0)), "deadline_seconds": deadline_s, "device": device, "hardware": hardware,
              "git_commit": _git_commit(), "sections": []}  # fmt: skip
    budget = (lambda s: s.smoke_budget_s) if args.smoke else (lambda s: s.budget_s)
    planned = stages(chosen)
    for i, stage in enumerate(planned):
        later = sum(max(budget(s) for s in st) for st in planned[i + 1 :])
        left = t0 + deadline_s - time.time()
        runs = []
        for section in stage:
            # Its own budget, or more where the later stages' budgets leave more; never past the deadline.
            allowed = min(left, max(budget(section), left - later))
            if problem:
                result["sections"].append(_skipped(section, f"not run: {problem}"))
            elif allowed < 5:
                result["sections"].append(_skipped(section, f"not run: {allowed:.0f} s of the check's "
                                                            f"{deadline_s:.0f} s were left"))  # fmt: skip
            else:
                runs.append((section, allowed, budget(section)))
        if runs:
            result["sections"] += _run_stage(runs, work, args.smoke, device, hardware, log,
                                             {"speed_rows": args.speed_rows})  # fmt: skip
        result["seconds"] = round(time.time() - t0, 1)
        io.write_json(out / "gpu_check.json", _ordered(result))  # after every stage: a killed check keeps them
    result = _ordered(result)
    result["summary"] = table.summary(result)
    io.write_json(out / "gpu_check.json", result)
    markdown = table.markdown(result)
    io.write_text(out / "gpu_check.md", markdown)
    log.say("\n" + markdown)
    log.say(f"bench/gpu_check.py: {result['seconds']:.0f} s; wrote {out / 'gpu_check.json'} and gpu_check.md")
    if not args.keep_work:  # its runs' checkpoints are GBs at the large size; the sections' output is in the log
        shutil.rmtree(work, ignore_errors=True)
    clean = all(s["status"] in ("ok", "goals missed") for s in result["sections"])
    return 0 if clean else 1


def _ordered(result: dict) -> dict:
    rank = {key: i for i, key in enumerate(ORDER)}
    return result | {"sections": sorted(result["sections"], key=lambda s: rank[s["key"]])}


def _git_commit() -> str | None:
    from hwsweep.contracts import host

    return host.git(REPO, "rev-parse", "--short", "HEAD")


def _device(work: Path, log: Log) -> tuple[dict, dict | None, str | None]:
    """(device facts, hardware entry, None) from a process of its own (the check itself holds no CUDA context
    while the sections measure memory); on failure (device facts, None, the reason)."""
    path = work / "device.json"
    cmd = [sys.executable, "-c", "import json, sys; sys.path[:0] = sys.argv[2:]; from gpucheck import device; "
           "facts, entry = device.facts(); open(sys.argv[1], 'w').write(json.dumps([facts, entry]))",
           str(path), str(HERE), str(REPO)]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return {}, None, "the device did not answer within 120 s (import torch, CUDA init)"
    if proc.returncode or not path.exists():
        lines = (proc.stderr.strip() or "no output").splitlines()
        log.file.write(proc.stderr)
        return {}, None, f"reading the device failed: {lines[-1]}"
    facts, entry = json.loads(path.read_text())
    from gpucheck.device import line

    log.say(line(facts))
    return facts, entry, None


def _skipped(section: Section, reason: str) -> dict:
    return {"key": section.key, "title": section.title, "status": "skipped", "line": reason, "rows": [], "notes": []}


@dataclass
class _Started:
    section: Section
    allowed: float
    budget: float
    folder: Path
    proc: subprocess.Popen
    output: object  # the section's output file, open while it runs
    t0: float


def _run_stage(runs: list[tuple[Section, float, float]], work: Path, smoke: bool, device: dict, hardware: dict,
               log: Log, options: dict | None = None) -> list[dict]:  # fmt: skip
    """The sections of one stage, started together, each stopped after its own allowed seconds; their results.
    `options`: what the command line chose within sections (gpucheck.context.Context's speed_rows)."""
    started = [_start_section(section, allowed, budget, work, smoke, device, hardware, log, options=options)
               for section, allowed, budget in runs]  # fmt: skip
    return [_finish_section(s, log) for s in started]


def _run_section(section: Section, allowed: float, budget: float, work: Path, smoke: bool, device: dict,
                 hardware: dict, log: Log, cmd: list[str] | None = None) -> dict:  # fmt: skip
    """Run one section in its own process group (`cmd`: another program in its place, for the tests), stopped
    after `allowed` seconds; its rows as it left them."""
    return _finish_section(_start_section(section, allowed, budget, work, smoke, device, hardware, log, cmd), log)


def _start_section(section: Section, allowed: float, budget: float, work: Path, smoke: bool, device: dict,
                   hardware: dict, log: Log, cmd: list[str] | None = None, options: dict | None = None) -> _Started:  # fmt: skip
    folder = work / section.key
    folder.mkdir()
    context = folder / "context.json"
    context.write_text(json.dumps({"smoke": smoke, "hardware": hardware, "device": device, "work": str(folder),
                                   "ends": time.time() + allowed, "rows": str(folder / "rows.json"),
                                   "key": section.key} | (options or {})))  # fmt: skip
    log.say(f"[{section.key}] {section.title}: up to {allowed:.0f} s (budget {budget:.0f} s)")
    cmd = (cmd or [sys.executable, str(Path(__file__).resolve()), "--section", section.key]) + [
        "--context",
        str(context),
    ]
    output = open(folder / "output.log", "w")
    proc = subprocess.Popen(cmd, stdout=output, stderr=subprocess.STDOUT, start_new_session=True, cwd=folder,
                            env=os.environ | {"PYTHONUNBUFFERED": "1"})  # fmt: skip
    return _Started(section, allowed, budget, folder, proc, output, time.monotonic())


def _finish_section(started: _Started, log: Log) -> dict:
    section, allowed, budget, folder, proc = started.section, started.allowed, started.budget, started.folder, started.proc
    over = False
    try:
        proc.wait(timeout=max(0.0, started.t0 + allowed - time.monotonic()))
    except subprocess.TimeoutExpired:
        over = True
        _stop(proc)
    started.output.close()
    seconds = time.monotonic() - started.t0
    text = (folder / "output.log").read_text(errors="replace")
    log.file.write(f"----- [{section.key}] output -----\n{text}\n")
    notes_left = []
    for path, tail in proc_tools.leftovers(folder):  # programs the section left running: stopped, their logs' tails
        log.file.write(f"----- [{section.key}] {path.relative_to(folder)} was still running when the section "
                       f"ended: its last {proc_tools.TAIL} lines -----\n{tail or '(empty)'}\n-----\n")  # fmt: skip
        last = tail.splitlines()[-1] if tail else "(empty)"
        notes_left.append(f"stopped while {path.name} ran (its tail is in gpu_check.log); its last line: {last[:200]}")
    rows_path = folder / "rows.json"
    found = json.loads(rows_path.read_text()) if rows_path.exists() else {"rows": [], "notes": []}
    rows, notes = found["rows"], found["notes"] + notes_left
    why_pending = (f"not reached: the section's {allowed:.0f} s were over" if over else
                   "not reached: the section ended before it")  # fmt: skip
    for row in rows:
        if row["status"] == "pending":  # what it had reached (a pending row's detail), after why it stopped
            row.update(status="skipped", detail=why_pending + (f"; reached: {row['detail']}" if row.get("detail") else ""))
    statuses = {r["status"] for r in rows}
    if over:
        status, line = "over budget", f"stopped after {seconds:.0f} s (its budget {budget:.0f} s)"
    elif proc.returncode:
        tail = [x for x in text.strip().splitlines() if x.strip()][-1:] or ["no output"]
        status, line = "error", f"exit {proc.returncode}: {tail[0][:300]}"
    elif "error" in statuses:
        status, line = "error", "; ".join(f"{r['name']}: {r['detail']}" for r in rows if r["status"] == "error")
    elif "fail" in statuses:
        status, line = "goals missed", "; ".join(f"{r['name']}: {r['shown']}" for r in rows if r["status"] == "fail")
    elif not rows:
        status, line = "error", "no rows recorded"
    else:
        status, line = "ok", ""
    if status != "ok":
        log.say(f"[{section.key}] {status}: {line}")
    log.say(f"[{section.key}] {seconds:.0f} s: " + ", ".join(f"{sum(r['status'] == s for r in rows)} {s}"
                                                         for s in ("pass", "fail", "info", "skipped", "error")
                                                         if any(r["status"] == s for r in rows)))  # fmt: skip
    return {"key": section.key, "title": section.title, "status": status, "line": line, "seconds": round(seconds, 1),
            "budget_seconds": budget, "allowed_seconds": round(allowed), "rows": rows, "notes": notes,
            "output_tail": text[-3000:] if status not in ("ok", "goals missed") else ""}  # fmt: skip


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the section's process group (a run checkpoints and exits), SIGKILL after GRACE_S."""
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 30)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


if __name__ == "__main__":
    sys.exit(main())
