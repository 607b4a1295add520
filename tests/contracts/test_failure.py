"""Why a run failed, in one line (hwsweep.contracts.failure), on real torchrun logs: each log under
tests/data/failure_logs/ is the output of the script of the same name in scripts/ under
`torchrun --standalone --nproc_per_node 2` on CPU with gloo (generate.sh makes them again); and
end to end, the runner's message and `status`'s problem column carry the same line."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO

from hwsweep.contracts.failure import MAX, log_reason, reason

LOGS = REPO / "tests" / "data" / "failure_logs"
SHARD = "ValueError: shape mismatch: batch of 7 samples, expected 8 (rank 1's shard)"

CAUSES = {
    # rank 0's error, above rank 1's "Connection reset by peer" and torchrun's SIGABRT summary
    "attr_rank0": "AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'",
    # the exception under its `raise FloatingPointError(verdict)` source line
    "fpe": "FloatingPointError: loss is nan at step 4: lower recipe.optimizer.lr",
    "tee_role": "FloatingPointError: loss is nan at step 4: lower recipe.optimizer.lr",  # [trainer0]:[rank0]: prefixes
    # sys.exit("…") prints no traceback: its line, not rank 1's consequential RuntimeError
    "sysexit": "train.py: --data ./missing does not exist",
    "chained": "RuntimeError: cannot read the dataset config /nonexistent/dataset.json (caused by "
    "FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/dataset.json')",
    "chained_implicit": "ValueError: config has no learning_rate (did you mean lr?) "
    "(while handling KeyError: 'learning_rate')",
    "rank1_then_collective": SHARD,
    # rank 0's collective failed (and printed) before rank 1 printed the error that caused it
    "rank1_cleanup": SHARD,
    # rank 1 was killed before it printed anything: the timeout is all the log knows
    "rank1_late": "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
    "Timed out waiting 3000ms for recv operation to complete",
    "keyboard": "KeyboardInterrupt",
    # a bare torchrun stopped by SIGTERM: no worker said anything, the agent's signal is the cause
    "sigterm": "torch.distributed.elastic.multiprocessing.api.SignalException: Process 26661 got signal: 15",
}


@pytest.mark.parametrize("name", sorted(CAUSES))
def test_the_real_cause_of_a_torchrun_failure(name):
    assert log_reason(LOGS / f"{name}.log") == CAUSES[name]


def test_every_stored_log_has_its_expected_cause():
    assert sorted(p.stem for p in LOGS.glob("*.log")) == sorted(CAUSES)


def test_torchruns_report_is_what_the_old_heuristic_showed_and_is_skipped():
    lines = (LOGS / "fpe.log").read_text().splitlines()
    assert any("To enable traceback see" in x for x in lines) and any("ChildFailedError" in x for x in lines)
    report = lines[lines.index(next(x for x in lines if x.startswith("W1125"))):]  # the agent's lines only
    assert len(report) > 30 and reason(report) is None


def test_a_traceback_cut_above_its_header_never_gives_its_source_line():
    lines = ["[rank0]:     raise FloatingPointError(verdict)", "[rank0]:            ^^^^^^^^^^",
             "[rank0]: FloatingPointError: loss blew up at step 7", "step 8"]  # fmt: skip
    assert reason(lines) == "FloatingPointError: loss blew up at step 7"
    assert reason(["  File \"t.py\", line 3, in <module>", "    raise SystemExit(2)"]) is None


def test_hwsweeps_own_verdict_wins_over_the_agent_and_consequential_errors():
    """The guard stopped a torchrun command: the agent's SignalException and a peer's broken collective
    follow, then the runner's line; status shows the guard's verdict without the run's name."""
    lines = (LOGS / "sigterm.log").read_text().splitlines() + [
        "[rank1]: RuntimeError: [../gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:4236",
        ("hwsweep: s/default/cpu2/seed0: loss blew up: 1.2e+04 at step 9, 10x its early level; lower "
         "recipe.optimizer.lr (stopped early; guard.action: fail; flag keeps such runs)"),
        "hwsweep: warning: the script logged global_batch 12, the plan says 32",
    ]
    assert reason(lines).startswith("loss blew up: 1.2e+04 at step 9")
    assert reason(["hwsweep config error: suites.s.recipe.lr: not a number", "bye"]) == \
        "hwsweep config error: suites.s.recipe.lr: not a number"  # fmt: skip


def test_plain_logs_and_limits(tmp_path):
    assert reason(["step 1", "killed by the scheduler"]) == "killed by the scheduler"  # the last plain line
    # A log that just stops (no traceback, no error, no verdict): killed from outside; its last line shows where.
    (tmp_path / "killed.log").write_text("steps 6 (warmup 2) = 0.08 epochs; fresh start\ntrain:  50%|#####| 3/6\n")
    assert log_reason(tmp_path / "killed.log") == \
        "stopped without a failure line (killed?); its last line: steps 6 (warmup 2) = 0.08 epochs; fresh start"  # fmt: skip
    assert reason([]) is None and reason(["", "   "]) is None
    long = reason(["Traceback (most recent call last):", '  File "x"', "ValueError: " + "x" * 500])
    assert len(long) == MAX and long.endswith("…")
    assert log_reason(tmp_path / "none.log") == "no log"
    (tmp_path / "empty.log").write_text("\n")
    assert log_reason(tmp_path / "empty.log") == "empty log"


def test_a_scripts_escape_sequences_never_reach_the_line(tmp_path):
    """Colour, bold, a cursor move and a hyperlink in a script's traceback and message: the line is their text."""
    lines = ["\x1b[1;31mTraceback (most recent call last):\x1b[0m", '  File "train.py", line 3, in <module>',
             "[rank0]: \x1b[31mValueError\x1b[0m: batch \x1b[1mof 7\x1b[22m samples\x1b[K, see "
             "\x1b]8;;https://x.org\x1b\\the docs\x1b]8;;\x1b\\ \x1b(B"]  # fmt: skip
    assert reason(lines) == "ValueError: batch of 7 samples, see the docs"
    (tmp_path / "train.log").write_text("step 1\n\x1b[33mwarning: slow\x1b[0m\n\x1b[31merror: cannot open x\x1b[0m\n")
    assert log_reason(tmp_path / "train.log") == "error: cannot open x"
    assert "\x1b" not in reason(["\x1b[31m\x1b[0m", "\x1b7 killed \x1b8"])


def test_a_long_log_is_read_from_its_end(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("step 0: a first line with an Error in it\n" + "step 1: loss 0.5\n" * 50_000 +
                   (LOGS / "attr_rank0.log").read_text())  # fmt: skip
    assert log_reason(log) == CAUSES["attr_rank0"]


def test_the_progress_bar_in_a_log_ends_a_line_at_each_redraw(tmp_path):
    """Where stderr is a log, not a terminal, each redraw of the trainer's bar is a line of its own: what passes
    output on by whole lines (srun, in every SLURM job) shows it as it comes, not when the run ends; and no
    progress line is read as the cause of the failure that follows it."""
    from tqdm import tqdm

    from hwsweep.run.runtime import LogLines

    log = tmp_path / "train.log"
    with open(log, "w") as stream:
        bar = tqdm(total=3, desc="train", file=LogLines(stream), mininterval=0, miniters=1)
        for _ in range(3):
            bar.update()
            stream.flush()
            assert log.read_text().endswith("\n")  # every redraw so far a whole line
        bar.close()
        stream.write("RuntimeError: the cause\n")
    lines = log.read_text().splitlines()
    assert "\r" not in log.read_text() and len(lines) >= 5, lines
    assert all(line.startswith("train:") for line in lines[:-1]) and "0/3" in lines[0] and "3/3" in lines[-2]
    assert log_reason(log) == "RuntimeError: the cause"


# -- end to end: the runner's message and status's problem column ---------------------------


def _state(status, spec, evaluated: bool) -> tuple[str, str]:
    """status's state and problem columns for the run, where no scheduler knows it."""
    row = status.run_status(spec, evaluated, set(), status.Scheduler(ask=lambda: []))
    return row["state"], row["problem"]


def test_the_runner_and_status_name_the_cause_of_a_failed_torchrun_command(tmp_path, capsys, monkeypatch):
    """A command whose output is a real torchrun failure (replayed, so no torchrun starts): the job's last
    line says the exit code and the cause; `status` reads the job's log to the same cause."""
    from test_command import matrix, run_stage

    from hwsweep.analysis import status
    from hwsweep.analysis.validation import FAILED
    from hwsweep.contracts.spec import LOG_DIR

    replay = f"import sys\nsys.stdout.write(open({str(LOGS / 'rank1_cleanup.log')!r}).read())\nsys.exit(1)\n"
    code, path = run_stage(tmp_path, replay)
    out, err = capsys.readouterr()
    assert code == 1 and not path.exists()
    assert err.strip().splitlines()[-1] == f"hwsweep: s/default/cpu1/seed0: the command exited 1: {SHARD}"

    monkeypatch.chdir(tmp_path)  # the workflow's logs/ folder is relative to where snakemake runs
    spec = matrix(tmp_path).spec("s", "default", "cpu1", 0)
    spec = type(spec).from_dict(spec.to_dict() | {"run_dir": str(tmp_path / "run")})
    log = Path(LOG_DIR.format(suite="s", variant="default", hardware="cpu1", seed=0)) / "train.log"
    log.parent.mkdir(parents=True)
    log.write_text("hwsweep.run.launch [node 0]: python script.py\n" + out + err)  # the train rule's > log 2>&1
    assert _state(status, spec, False) == (FAILED, SHARD)


def test_status_names_why_an_evaluation_failed(tmp_path, capsys, monkeypatch):
    from test_command import matrix, run_stage

    from hwsweep.analysis import status
    from hwsweep.analysis.validation import TRAINED
    from hwsweep.contracts.spec import LOG_DIR

    code, _ = run_stage(tmp_path, "print('step 1: val_loss 0.5 acc 0.5')")
    assert code == 0
    monkeypatch.chdir(tmp_path)
    spec = matrix(tmp_path).spec("s", "default", "cpu1", 0)
    spec = type(spec).from_dict(spec.to_dict() | {"run_dir": str(tmp_path / "run")})
    log = Path(LOG_DIR.format(suite="s", variant="default", hardware="cpu1", seed=0)) / "evaluate.log"
    log.parent.mkdir(parents=True)
    assert _state(status, spec, True) == (TRAINED, "")  # evaluation not started: nothing to say
    log.write_text((LOGS / "chained.log").read_text())
    assert _state(status, spec, True) == (TRAINED, CAUSES["chained"])
