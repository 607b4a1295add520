"""What a command actually trained (hwsweep.run.observe and the observer in every process it starts),
against the plan: never a confident record of a run that did something else."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO, left_behind

from hwsweep.contracts.hardware import BatchPlan
from hwsweep.contracts.records import RunRecord, read
from hwsweep.plan.config import ConfigError, resolve
from hwsweep.run import observe

SCRIPTS = REPO / "tests" / "data" / "scripts"


def plan(world_size=2, global_batch=16, accelerator="cpu"):
    return BatchPlan(accelerator=accelerator, backend="gloo", gpu_type="cpu", nodes=1, devices_per_node=world_size,
                     world_size=world_size, global_batch=global_batch, micro_batch=4, accumulation=2, steps=10,
                     warmup_steps=0, epochs=None, lr=0.1, precision="fp32", tf32=False, reproducibility="comparable",
                     memory_gb=None, est_memory_gb=None, comparable=True, warnings=[])  # fmt: skip


def report(rank=None, world=None, samples=(8, 8, 8, 8), steps=10, device="cpu", pid=1, host="h"):
    group = None if rank is None else {"rank": rank, "world_size": world, "backend": "gloo"}
    return {"host": host, "pid": pid, "process_group": group, "env": {}, "device": device, "threads": 1,
            "samples_per_step": list(samples), "optimizer_steps": steps, "batch_dim": 0}  # fmt: skip


def differences(reports, p=None, steps=10):
    return observe.differences(observe.observed(reports), p or plan(), steps)


def test_a_run_that_follows_the_plan_has_no_differences():
    reports = [report(0, 2, pid=1), report(1, 2, pid=2)]
    summary = observe.observed(reports)
    assert summary["global_batch"] == 16 and summary["process_group"]["world_size"] == 2
    assert observe.differences(summary, plan(), 10) == []
    assert observe.differences(summary, plan(), 11) == []  # one step more: a loop's habit, not another plan


@pytest.mark.parametrize("reports, plan_, steps, words", [
    ([report(pid=1)], plan(), 10, "planned 2 processes in one process group, observed 1 training alone"),
    ([report(pid=1), report(pid=2)], plan(), 10, "observed 2 training alone (no torch.distributed process group)"),
    ([report(pid=1), report(pid=2)], plan(world_size=1, global_batch=8), 10, "planned 1 process, observed 2 processes"),
    ([report(0, 4, pid=1), report(1, 4, pid=2), report(2, 4, pid=3), report(3, 4, pid=4)], plan(global_batch=32), 10,
     "planned 2 processes, observed a process group of world size 4"),
    ([report(0, 2, samples=(4, 4, 4), pid=1), report(1, 2, samples=(4, 4, 4), pid=2)], plan(), 10,
     "planned global batch 16, observed 8 (4 samples per step on each of 2 processes)"),
    ([report(0, 2, device="cuda:0", pid=1), report(1, 2, device="cuda:0", pid=2)], plan(accelerator="cuda"), 10,
     "2 ranks share cuda:0"),
    ([report(0, 2, pid=1), report(1, 2, pid=2, device="cuda:1")], plan(), 10, "planned cpu, observed cuda:1 on rank 1"),
    ([report(0, 2, pid=1, steps=4), report(1, 2, pid=2, steps=4)], plan(), 10, "planned 10 optimizer steps, observed 4"),
    ([report(0, 2, pid=1), report(pid=2)], plan(), 10, "1 of 2 training processes outside the process group"),
])  # fmt: skip
def test_each_departure_from_the_plan_is_named(reports, plan_, steps, words):
    found = differences(reports, plan_, steps)
    assert any(words in d for d in found), found


def test_a_grad_scaler_skip_does_not_move_the_batch_and_other_nodes_are_extrapolated():
    assert observe.observed([report(0, 1, samples=(16, 8, 8, 8))])["samples_per_step"] == {"0": 8}
    half = observe.observed([report(0, 4, samples=(4, 4, 4, 4), pid=1), report(1, 4, samples=(4, 4, 4, 4), pid=2)])
    assert half["global_batch"] == 16 and half["global_batch_from"] == "2 of 4 ranks"


def by_hand(passes=24, samples=4, rank=None, world=None, pid=1):
    """A process that updated its weights itself: backward passes, no optimizer step."""
    return report(rank, world, samples=(), steps=0, pid=pid) | {"backward_passes": passes,
                                                                 "samples_per_backward": [samples] * min(passes, 64)}


def test_a_script_without_a_torch_optimizer_is_held_to_the_plan_by_its_backward_passes():
    one = plan(world_size=1, global_batch=8)  # micro-batch 4, accumulation 2: 2 backward passes a step
    summary = observe.observed([by_hand(passes=20)])
    assert summary["steps_from"].startswith("backward passes") and summary["samples_per_backward"] == {"pid 1": 4}
    assert observe.differences(summary, one, 10) == []  # 10 steps x 2 micro-batches
    assert observe.differences(observe.observed([by_hand(passes=22)]), one, 10) == []  # a step more: a loop's habit
    assert observe.differences(observe.observed([by_hand(passes=24)]), one, 10) == [
        "planned 10 steps x 2 micro-batches = 20 backward passes, observed 24 (no torch optimizer: steps read from "
        "backward passes)"]  # fmt: skip
    assert observe.differences(observe.observed([by_hand(passes=20, samples=8)]), one, 10) == [
        "planned micro-batch 4, observed 8 samples per backward pass (no torch optimizer: steps read from backward "
        "passes)"]  # fmt: skip
    two = observe.observed([by_hand(passes=20, rank=0, world=2, pid=1), by_hand(passes=20, rank=1, world=2, pid=2)])
    assert observe.differences(two, plan(), 10) == []  # the process group is checked as with an optimizer
    assert "observed 1 training alone" in observe.differences(observe.observed([by_hand(passes=20)]), plan(), 10)[0]
    assert observe.differences(observe.observed([by_hand(passes=50)]), one, None) == []  # resumed: its own start


def run_script(tmp_path, body: str, batch_dim="0") -> list[dict]:
    """`body` in a fresh interpreter with the observer on its path, as the runner starts commands."""
    (tmp_path / "script.py").write_text(textwrap.dedent(body))
    out = tmp_path / "observed"
    out.mkdir()
    env = os.environ | {"HWSWEEP_OBSERVE_DIR": str(out), "HWSWEEP_BATCH_DIM": batch_dim,
                        "PYTHONPATH": str(observe.OBSERVER)}  # fmt: skip
    subprocess.run([sys.executable, "script.py"], cwd=tmp_path, env=env, check=True, timeout=120)
    return [json.loads(p.read_text()) for p in out.glob("*.json")]


def test_the_observer_counts_training_forwards_per_step_and_every_step(tmp_path):
    reports = run_script(tmp_path, """
        import torch
        from torch import nn
        model, critic = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1)), nn.Linear(1, 1)
        opt, opt2 = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(critic.parameters(), lr=0.1)
        for step in range(7):
            for micro in range(3):  # accumulation: 3 x 5 samples per step
                model(torch.randn(5, 3)).sum().backward()
            with torch.no_grad():
                model(torch.randn(100, 3))  # evaluation: not training
            model.eval(); model(torch.randn(50, 3)); model.train()
            critic(torch.randn(2, 1)).sum().backward()  # another model: not the one that trains
            opt.step(); opt2.step(); opt.zero_grad()
    """)
    assert len(reports) == 1
    r = reports[0]
    assert r["samples_per_step"] == [15, 15, 15, 15] and r["optimizer_steps"] == 7
    assert r["process_group"] is None and r["device"] == "cpu"


def test_the_observer_counts_a_closure_optimizers_step_once_however_often_it_calls_the_closure(tmp_path):
    """torch's LBFGS forwards the same 97 samples some 20 times per step (time_sequence_prediction): 97 a step."""
    reports = run_script(tmp_path, """
        import torch
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        x, y = torch.randn(97, 3), torch.randn(97, 1)
        optimizer = torch.optim.LBFGS(model.parameters(), lr=0.8)
        calls = []
        def closure():
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            calls.append(1)
            return loss
        for step in range(5):
            optimizer.step(closure)
        assert len(calls) > 5 * 2, len(calls)  # the closure ran several times a step
    """)
    [r] = reports
    assert r["samples_per_step"] == [97] * 4 and r["optimizer_steps"] == 5 and r["backward_passes"] > 10


@pytest.mark.parametrize("style", ["closure", "first_step"])
def test_the_observer_counts_a_two_pass_update_once_and_accumulation_fully(tmp_path, style):
    """SAM: forward and backward, perturb the weights, forward the same batch again, step the base optimizer (in
    step(closure), or first_step/second_step by hand): one batch a step. Accumulation of micro-batches, weights
    unmoved between them, counts each."""
    update = ("optimizer.step(closure)" if style == "closure"
              else "optimizer.first_step(); closure(); optimizer.second_step()")  # fmt: skip
    reports = run_script(tmp_path, f"""
        import torch

        class SAM(torch.optim.Optimizer):
            def __init__(self, params, rho=0.05):
                super().__init__(params, dict(rho=rho))
                self.base = torch.optim.SGD(self.param_groups, lr=0.1)

            @torch.no_grad()
            def first_step(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        self.state[p]["e"] = e = group["rho"] * p.grad / (p.grad.norm() + 1e-12)
                        p.add_(e)

            @torch.no_grad()
            def second_step(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        p.sub_(self.state[p]["e"])
                self.base.step()

            def step(self, closure):
                self.first_step()
                with torch.enable_grad():
                    closure()
                self.second_step()

        model = torch.nn.Linear(3, 1)
        optimizer = SAM(model.parameters())
        for step in range(6):
            x = torch.randn(12, 3)
            def closure():
                optimizer.zero_grad()
                model(x).pow(2).mean().backward()
            closure()
            {update}
    """)
    [r] = reports
    assert r["samples_per_step"] == [12] * 4 and r["optimizer_steps"] == 6 and r["backward_passes"] == 12


def test_the_observer_counts_the_backward_passes_of_a_script_that_updates_its_weights_itself(tmp_path):
    reports = run_script(tmp_path, """
        import torch
        from torch.utils.checkpoint import checkpoint
        model = torch.nn.GRU(3, 4)
        for step in range(70):
            out, _ = model(torch.randn(5, 6, 3))  # (time, batch, features)
            # a reentrant checkpoint runs a backward inside the backward: still one pass
            checkpoint(torch.tanh, out, use_reentrant=True).pow(2).mean().backward()
            with torch.no_grad():
                model(torch.randn(5, 100, 3))  # evaluation: not training
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-20)
                p.grad = None
    """, batch_dim="1")
    [r] = reports
    assert r["optimizer_steps"] == 0 and r["backward_passes"] == 70
    assert r["samples_per_backward"] == [6] * 64  # the first 64 counted; then only counted


def test_the_observer_reads_the_batch_dimension_it_is_told_and_keeps_a_scripts_sitecustomize(tmp_path):
    own = tmp_path / "site"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import builtins\nbuiltins.OWN_SITE = True\n")
    (tmp_path / "script.py").write_text(textwrap.dedent("""
        import builtins, torch
        assert builtins.OWN_SITE
        rnn, opt = torch.nn.GRU(3, 4), None
        opt = torch.optim.SGD(rnn.parameters(), lr=0.1)
        for _ in range(4):
            rnn(torch.randn(7, 5, 3))[0].sum().backward()  # (time, batch, features)
            opt.step()
    """))
    out = tmp_path / "observed"
    out.mkdir()
    env = os.environ | {"HWSWEEP_OBSERVE_DIR": str(out), "HWSWEEP_BATCH_DIM": "1",
                        "PYTHONPATH": f"{observe.OBSERVER}:{own}"}  # fmt: skip
    subprocess.run([sys.executable, "script.py"], cwd=tmp_path, env=env, check=True, timeout=120)
    [r] = [json.loads(p.read_text()) for p in out.glob("*.json")]
    assert r["samples_per_step"] == [5, 5, 5, 5]


# -- planning refusals -----------------------------------------------------------------------


def nanogpt_config(**trainer):
    return {
        "trainer": {"command": ["python", "nanogpt_like.py"], "workdir": str(SCRIPTS),
                    "args": {"batch_size": "micro_batch", "gradient_accumulation_steps": "micro_batches_per_step",
                             "max_iters": "steps", "seed": "seed", "out_dir": "run_dir"},
                    "plan_check": {"tokens": {"pattern": r"tokens per iteration will be: ([\d,]+)",
                                              "equals": "global_batch * args.block_size"}}} | trainer,
        "recipe": {"global_batch": 16, "micro_batch": 4, "schedule": {"steps": 5, "warmup_steps": 0},
                   "args": {"block_size": 8}},
        "metrics": {"loss": {"goal": "min"}},
        "suites": {"s": {}},
        "seeds": [0],
        "hardware": {"cpu1": {"accelerator": "cpu"}, "cpu2": {"accelerator": "cpu", "devices_per_node": 2}},
        "baseline": "cpu1",
    }  # fmt: skip


@pytest.mark.parametrize("change, words", [
    ({"args": {"batch_size": "micro_batch", "max_iters": "steps"}},
     "trainer.args: only micro_batch reaches the script, but the plan accumulates 4 micro-batches per step"),
    ({"launch": "plain"}, "trainer.launch: plain starts one process, which must start the other 1 itself"),
    ({"plan_check": {"tokens": {"pattern": r"tokens: (\d+)", "equals": "global_batch * args.nope"}}},
     "trainer.plan_check.tokens.equals: args.nope is not in recipe.args"),
    ({"plan_check": {"tokens": {"pattern": r"tokens: (\d+)", "equals": "__import__('os')"}}},
     "trainer.plan_check.tokens.equals: \"__import__('os')\" is not allowed"),
])  # fmt: skip
def test_what_cannot_lock_the_plan_is_refused_at_planning(change, words):
    cfg = nanogpt_config(**change)
    with pytest.raises(ConfigError) as e:
        resolve(cfg)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_recipe_arg_that_would_override_a_mapped_flag_is_refused():
    cfg = nanogpt_config()
    cfg["recipe"]["args"] |= {"batch_size": 8}
    with pytest.raises(ConfigError, match=r"recipe\.args\.batch_size: trainer\.args already passes --batch_size"):
        resolve(cfg)


def test_recipe_settings_no_flag_receives_are_warned_and_a_flag_map_follows_its_flag():
    matrix = resolve(nanogpt_config())
    assert any("recipe.optimizer.weight_decay" in w and "not_passed" in w for w in matrix.warnings)
    cfg = nanogpt_config(args={"batch_size": "micro_batch", "gradient_accumulation_steps": "micro_batches_per_step",
                               "device": "device", "backend": "device", "weight_decay": "weight_decay",
                               "beta1": "beta1", "beta2": "beta2", "grad_clip": "grad_clip", "min_lr": "min_lr",
                               "lr": "lr", "warmup": "warmup_steps", "optim": "optimizer", "dtype": "precision"},
                         values={"backend": {"cpu": "gloo", "cuda": "nccl"}})  # fmt: skip
    matrix = resolve(cfg)
    assert not any("not_passed" in w for w in matrix.warnings)
    from hwsweep.contracts import command

    spec = matrix.spec("s", "default", "cpu2", 0)
    argv = command.command_argv(spec, spec.trainer.invocation)
    assert "--device=cpu" in argv and "--backend=gloo" in argv and "--weight_decay=0.01" in argv


# -- end to end: real torchrun, real scripts ------------------------------------------------


def launch(tmp_path, cfg, hardware):
    matrix = resolve(cfg)
    spec = matrix.spec("s", "default", hardware, 0).to_dict() | {"run_dir": str(tmp_path / "run")}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    (tmp_path / "tmp").mkdir()
    proc = subprocess.run([sys.executable, "-m", "hwsweep.run.launch", str(tmp_path / "spec.json"), "--threads", "2"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=os.environ | {"TMPDIR": str(tmp_path / "tmp")})  # fmt: skip
    assert left_behind(tmp_path / "tmp") == []  # torchrun's log folder included
    return proc


@pytest.mark.slow
def test_a_nanogpt_style_script_with_the_right_mapping_is_observed_to_follow_the_plan(tmp_path):
    proc = launch(tmp_path, nanogpt_config(), "cpu2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = read(RunRecord, tmp_path / "run" / "train.json")
    seen = record.observed
    assert seen["process_group"]["world_size"] == 2 and seen["global_batch"] == 16 and seen["optimizer_steps"] == 6
    assert record.checks == [] and "recipe.optimizer.weight_decay" in record.not_passed
    assert (tmp_path / "run" / "observed").is_dir() and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_global_accumulation_count_mapped_per_device_fails_with_planned_vs_observed(tmp_path):
    cfg = nanogpt_config()
    cfg["trainer"]["args"]["gradient_accumulation_steps"] = "accumulation"  # the script divides it again
    proc = launch(tmp_path, cfg, "cpu2")
    assert proc.returncode == 1 and not (tmp_path / "run" / "train.json").exists()
    last = proc.stderr.strip().splitlines()[-1]
    assert "what trained is not the plan: planned global batch 16, observed 8 (4 samples per step on each of 2" in last


@pytest.mark.slow
def test_plain_launch_of_a_script_that_ignores_its_device_flag_fails(tmp_path):
    cfg = nanogpt_config(launch="plain")
    cfg["trainer"]["args"] |= {"devices": "world_size"}
    proc = launch(tmp_path, cfg, "cpu2")
    assert proc.returncode == 1
    assert "planned 2 processes in one process group, observed 1 training alone" in proc.stderr


@pytest.mark.slow
def test_one_process_runs_plainly_and_a_script_that_needs_torchrun_says_why_in_one_line(tmp_path):
    proc = launch(tmp_path, nanogpt_config(), "cpu1")  # auto: no torchrun for one process, no DDP branch taken
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "torchrun" not in proc.stdout.splitlines()[0]
    assert read(RunRecord, tmp_path / "run" / "train.json").observed["process_group"] is None
    cfg = nanogpt_config(command=["python", "ddp_tutorial_like.py"], args={"batch_size": "per_device_batch"},
                         plan_check={})  # fmt: skip
    cfg["recipe"]["args"] = {}
    proc = launch(tmp_path / "tutorial", cfg, "cpu1") if (tmp_path / "tutorial").mkdir() is None else None
    assert proc.returncode == 1
    assert "RANK expected" in proc.stderr.strip().splitlines()[-1]  # the real cause, not torchrun's boilerplate


@pytest.mark.slow
def test_a_runtime_api_script_started_as_one_plain_process_makes_its_own_group(tmp_path):
    import yaml

    example = REPO / "examples" / "runtime_api"
    cfg = yaml.safe_load((example / "config.yaml").read_text())
    cfg["trainer"] = cfg["trainer"] | {"launch": "auto", "workdir": str(example)}
    cfg["recipe"] |= {"schedule": {"steps": 20, "warmup_steps": 2}, "args": {"hidden": 16, "eval_every": 10}}
    matrix = resolve(cfg)
    spec = matrix.spec(matrix.cells[0].suite, matrix.cells[0].variant, "cpu1", 0).to_dict() | {"run_dir": str(tmp_path / "run")}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    proc = subprocess.run([sys.executable, "-m", "hwsweep.run.launch", str(tmp_path / "spec.json"), "--threads", "1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "torchrun" not in proc.stdout.splitlines()[0]
    record = read(RunRecord, tmp_path / "run" / "train.json")
    assert record.trainer == "builtin" or record.data_order["sampler"] != "script"  # the runtime wrote it
    assert record.observed["optimizer_steps"] == 20 and record.observed["global_batch"] == 64  # and the observer saw it


def test_show_commands_prints_what_the_train_job_runs(tmp_path, capsys, monkeypatch):
    import yaml

    from hwsweep import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(nanogpt_config()))
    assert cli.main(["plan", "--configfile", str(tmp_path / "my.yaml"), "--show-commands"]) == 0
    out = capsys.readouterr().out.splitlines()
    one, two = out[out.index("s/default/cpu1/seed0:") + 1], out[out.index("s/default/cpu2/seed0:") + 1]
    assert "torchrun" not in one and f"{SCRIPTS}/nanogpt_like.py --batch_size=4 --gradient_accumulation_steps=4" in one
    assert "--nproc_per_node 2 -m hwsweep.run.tether" in two and "--block_size=8" in two
    cwd, env = out[out.index("s/default/cpu2/seed0:") + 2], out[out.index("s/default/cpu2/seed0:") + 3]
    assert cwd.endswith(str(tmp_path / "results/s/default/cpu2/seed0"))
    assert f"PYTHONPATH={observe.OBSERVER}:{SCRIPTS}" in env and "HWSWEEP_OBSERVE_DIR=" in env


# -- third-party-style scripts: one without a torch optimizer, one printing several losses ------------------


def word_lm_config(**trainer):
    return {
        "trainer": {"command": ["python", "word_lm_like.py"], "workdir": str(SCRIPTS),
                    "args": {"batch_size": "micro_batch", "seed": "seed"},
                    "step_pattern": r"\|\s*(\d+)/\s*\d+ batches", "batch_dim": 1, "observe": "flag"} | trainer,
        # 20 steps planned, the script's epoch is 24 batches; its own SGD lr of 20 through recipe.args
        "recipe": {"global_batch": 4, "micro_batch": 4, "schedule": {"steps": 20, "warmup_steps": 0},
                   "args": {"lr": 20}},
        "metrics": {"loss": {"goal": "min"}, "test_loss": {"goal": "min"}},
        "suites": {"lm": {}},
        "seeds": [0],
        "hardware": {"cpu1": {"accelerator": "cpu"}},
        "baseline": "cpu1",
    }  # fmt: skip


def test_the_lr_bound_fits_the_optimizer_and_recipe_args_stand_for_the_plan():
    cfg = word_lm_config(args={"batch_size": "micro_batch", "seed": "seed", "lr": "lr"})
    cfg["recipe"] |= {"optimizer": {"lr": 20}, "args": {}}
    matrix = resolve(cfg)  # a script's own SGD at 20: passed, with a warning
    assert any(w.startswith("recipe.optimizer.lr: 20 is above 10: usual for plain SGD") for w in matrix.warnings)
    assert not any("recipe.optimizer.lr" in w and "not_passed" in w for w in matrix.warnings)
    with pytest.raises(ConfigError) as e:  # the built-in trainer's AdamW still refuses it, in one line
        resolve({"recipe": {"optimizer": {"lr": 20}}} | {k: v for k, v in word_lm_config().items()
                                                           if k in ("suites", "seeds", "hardware", "baseline")})
    assert str(e.value).startswith("recipe.optimizer.lr: 20 is above 10") and "\n" not in str(e.value)
    neither = word_lm_config()
    neither["recipe"]["args"] = {}
    assert any(w.startswith("recipe.optimizer.lr, recipe.optimizer.weight_decay") and "not_passed" in w
               for w in resolve(neither).warnings)  # fmt: skip
    assert not any(w.startswith("recipe.optimizer.lr") for w in resolve(word_lm_config()).warnings)  # args.lr
    from hwsweep.contracts import command

    trainer = resolve(word_lm_config()).trainer  # a recipe setting's name is on record; the plan's locks are not
    assert command.args_values(trainer, {"lr": 20, "steps": 5, "bptt": 8, "seed": 3}) == {"lr": 20}


@pytest.mark.slow
def test_a_script_without_a_torch_optimizer_through_snakemake_is_observed_and_keeps_its_metrics_apart(tmp_path):
    """The word-language-model-style script through the real snakemake CLI: its hand-written SGD is seen through its
    backward passes (24 in its epoch against the plan's 20 steps: flagged), its `loss` is the training loss and not
    the `test loss` line, and the lr it got through recipe.args is the one on record."""
    import csv

    from conftest import snakemake

    proc = snakemake(tmp_path, word_lm_config(), "--cores", "1")
    assert proc.returncode == 0, proc.stderr[-4000:]
    run = tmp_path / "results" / "lm" / "default" / "cpu1" / "seed0"
    record = read(RunRecord, run / "train.json")
    seen = record.observed
    assert (seen["backward_passes"], seen["optimizer_steps"]) == (24, 0)
    assert list(seen["samples_per_backward"].values()) == [4]  # batch_dim 1: sequence first
    departure = ("observed: planned 20 steps = 20 backward passes, observed 24 (no torch optimizer: steps read from "
                 "backward passes)")  # fmt: skip
    assert record.checks == [departure]
    log = (tmp_path / "logs" / "lm" / "default" / "cpu1" / "seed0" / "train.log").read_text()
    progress = [float(line.split("| loss")[1].split("|")[0]) for line in log.splitlines() if "| loss " in line]
    test = float(log.split("test loss")[1].split("|")[0])
    assert record.metrics == {"loss": progress[-1], "test_loss": test} and progress[-1] != test
    assert record.curves["loss"]["steps"] == [10, 20]
    assert record.plan["lr"] == 20 and record.spec["recipe"]["optimizer"]["lr"] == 20  # what the script got
    assert "recipe.optimizer.lr" not in record.not_passed and "recipe.optimizer.weight_decay" in record.not_passed
    [row] = list(csv.DictReader(open(tmp_path / "results" / "lm" / "runs.csv")))
    assert float(row["lr"]) == 20 and row["checks"] == departure
    [cell] = list(csv.DictReader(open(tmp_path / "results" / "lm" / "comparison.csv")))
    assert departure in cell["checks"]  # carried to the report's comparison table
    report = tmp_path / "report.html"
    proc = snakemake(tmp_path, None, "--report", str(report))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "planned 20 steps = 20 backward passes, observed 24" in report.read_text()  # the report says it too


@pytest.mark.slow
def test_a_script_printing_several_losses_records_each_under_its_whole_name(tmp_path):
    cfg = {
        "trainer": {"command": ["python", "several_losses.py"], "workdir": str(SCRIPTS),
                    "args": {"steps": "steps", "batch": "micro_batch", "seed": "seed"}},
        "recipe": {"global_batch": 8, "micro_batch": 8, "schedule": {"steps": 20, "warmup_steps": 0}},
        "metrics": {"train_loss": {"goal": "min"}, "valid_loss": {"goal": "min"}, "test_loss": {"goal": "min"}},
        "suites": {"s": {}},
        "seeds": [0],
        "hardware": {"cpu1": {"accelerator": "cpu"}},
        "baseline": "cpu1",
    }  # fmt: skip
    proc = launch(tmp_path, cfg, "cpu1")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if "loss" in line]
    record = read(RunRecord, tmp_path / "run" / "train.json")
    assert record.metrics == {"train_loss": float(lines[-2].split("train loss ")[1].split()[0]),
                              "valid_loss": float(lines[-2].split("valid loss ")[1]),
                              "test_loss": float(lines[-1].split("test loss ")[1])}  # fmt: skip
    assert record.curves["valid_loss"]["steps"] == [5, 10, 15, 20] and "test_loss" not in record.curves
    assert record.observed["optimizer_steps"] == 20 and record.checks == []
    cfg["metrics"] = {"loss": {"goal": "min"}}  # no bare `loss` in its output: one line naming what is there
    proc = launch(tmp_path / "bare", cfg, "cpu1") if (tmp_path / "bare").mkdir() is None else None
    assert proc.returncode == 1
    assert ("wrote no metrics (looked for loss in its output) (metric loss printed only inside longer names: test "
            "loss, train loss, valid loss; declare those, e.g. test_loss, or give metrics.loss.pattern)") \
        in proc.stderr.strip().splitlines()[-1]  # fmt: skip
