"""Start one run's trainer: the built-in one or a user's command, under torchrun (on one node
or, under SLURM, on each node of the allocation) or as a plain process.

    python -m hwsweep.run.launch results/.../spec.json --threads 8

One node: `torchrun --standalone`. Several nodes: the train rule runs this once per node with
`srun --nodes=N --ntasks-per-node=1`; each copy reads its node rank from SLURM_NODEID and
starts `torchrun --nnodes N --node_rank R` with a static rendezvous on the node that launched
the step, so global ranks follow node order (strict parity depends on it). The shape (nodes,
processes per node) comes from the RunSpec's plan, never from the command line.

A stop signal (SIGTERM: preemption, the time limit; SIGUSR2) reaches each worker exactly once: in a SLURM job
step SLURM signals every process of the step itself, elsewhere this launcher passes it to the workers;
torchrun's agent ignores it (it would otherwise stop on it, signal the workers a second time and exit 1).
Workers that stop after their checkpoint say so (hwsweep.run.preempt) and this launcher exits 75. So it does after a
stop signal at any other moment (hwsweep.run.stops): before it starts torchrun, while the agent starts, while the
workers start (each stops at its next phase, the ones started later at their first, and once one did, the rest,
which may wait for it in a collective, are ended after STARTUP_GRACE seconds), or when they ended otherwise.
"""

from __future__ import annotations

from hwsweep.run import stops

if __name__ == "__main__":  # before the imports below: a stop from the first moment is a preemption
    stops.catch()

import argparse
import importlib.metadata
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hwsweep.contracts import command, io, secrets
from hwsweep.contracts.spec import (CHECKPOINT_DIR, CHECKPOINT_TEMPORARIES, FINAL_CHECKPOINT, TRAIN_RECORD, RunSpec,
                                    sha256)  # fmt: skip
from hwsweep.run import allocator, preempt, runner, tether

PORT_BASE = 29500
# The longest torchrun's agents wait for all nodes to join (static rendezvous, several nodes) or for the
# local workers' rendezvous (--standalone); then the run fails with torchrun's RendezvousTimeoutError
# instead of waiting for a node that will never come (torchrun's own default is 600 s).
RENDEZVOUS_TIMEOUT = 120
# torchrun >= 2.9 lets the caller choose the signals its agent handles: none of the stop signals (SIGQUIT still
# stops it and its workers). An older agent stops on SIGTERM itself and exits 1; the exit is still 75 when
# every worker stopped after its checkpoint, but the workers get the signal twice.
AGENT_SIGNALS = ["--signals-to-handle", "SIGQUIT"]
# Once a worker stopped during start-up, the seconds its peers get to stop too before the agent and they are
# killed: a peer past that phase waits in a collective for the stopped one; none of them can checkpoint without it.
STARTUP_GRACE = 5.0


def agent_takes_signal_list() -> bool:
    """Whether the installed torchrun has --signals-to-handle (torch 2.9 and later); read without importing torch."""
    try:
        major, minor = importlib.metadata.version("torch").split(".")[:2]
        return (int(major), int(minor)) >= (2, 9)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False


def master_address() -> str:
    """The address of the node that launched this step (srun sets it on every task)."""
    if os.environ.get("SLURM_LAUNCH_NODE_IPADDR"):
        return os.environ["SLURM_LAUNCH_NODE_IPADDR"]
    nodelist = os.environ["SLURM_JOB_NODELIST"]
    names = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True)
    return names.stdout.split()[0]


def torchrun_command(spec: RunSpec, env: dict) -> list[str]:
    """torchrun with the plan's shape and rendezvous, up to the program it starts."""
    plan = spec.plan
    # torch's agent through this interpreter (never a torchrun found on PATH, whose Python may be another one,
    # with another hwsweep), its imports with the collector held (hwsweep.run.torchrun).
    cmd = [sys.executable, "-m", "hwsweep.run.torchrun"]
    cmd += AGENT_SIGNALS if agent_takes_signal_list() else []
    if plan.nodes == 1:
        cmd += ["--standalone", "--nnodes", "1", "--rdzv-conf", f"join_timeout={RENDEZVOUS_TIMEOUT}"]
    else:
        if "SLURM_NODEID" not in env:
            raise SystemExit(
                f"hwsweep.run.launch: hardware {spec.hardware_name} has {plan.nodes} nodes; "
                "run it under SLURM (snakemake --profile profiles/slurm), where srun starts one launcher per node"
            )
        nnodes = int(env.get("SLURM_NNODES", env.get("SLURM_STEP_NUM_NODES", plan.nodes)))
        if nnodes != plan.nodes:
            raise SystemExit(f"hwsweep.run.launch: the plan needs {plan.nodes} nodes but this step has {nnodes}")
        port = PORT_BASE + int(env.get("SLURM_JOB_ID", "0")) % 2000
        cmd += ["--nnodes", str(plan.nodes), "--node_rank", env["SLURM_NODEID"],
                "--master_addr", master_address(), "--master_port", str(port),
                "--rdzv-conf", f"timeout={RENDEZVOUS_TIMEOUT}"]  # fmt: skip
    return cmd + ["--nproc_per_node", str(plan.devices_per_node)]


def command_line(spec: RunSpec, spec_path: str, threads: int, env: dict) -> list[str]:
    """The whole command this launcher runs on its node: torchrun and its workers, or the command alone (the
    trainer's launch: the built-in one's is auto, so a one-process run spares torchrun's agent, a second
    interpreter that imports torch). The built-in trainer's CPU workers are forked from the agent, which imports
    torch for them all (hwsweep.run.torchrun); on GPUs each starts anew until a fork there is measured."""
    if spec.trainer.kind == "builtin":
        trainer = ["-m", "hwsweep.run.train", spec_path, "--threads", str(threads)]
        script = [sys.executable, "-u", *trainer]
    else:
        script = command.command_argv(spec, spec.trainer.invocation)
    if spec.trainer.launcher(spec.plan.world_size) != "torchrun":
        return script
    if spec.trainer.kind == "builtin" and spec.plan.accelerator == "cpu":  # its workers forked from the agent
        return torchrun_command(spec, env) + ["--start-method", "fork", *trainer]
    return torchrun_command(spec, env) + tether.tethered(script)


def visible_gpus(env: dict) -> tuple[int, str] | None:
    """GPUs this node's processes are given, and the variable that says so: what CUDA will see
    (CUDA_VISIBLE_DEVICES, stopping at an empty or negative entry as CUDA does), else SLURM's own count;
    None when nothing says."""
    mask = env.get("CUDA_VISIBLE_DEVICES")
    if mask is not None:
        listed = 0
        for item in mask.split(","):
            if not item.strip() or item.strip().startswith("-"):
                break
            listed += 1
        return listed, f"CUDA_VISIBLE_DEVICES={mask}"
    for name in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
        if env.get(name):
            return len(env[name].split(",")), f"{name}={env[name]}"
    if env.get("SLURM_GPUS_ON_NODE", "").isdigit():
        return int(env["SLURM_GPUS_ON_NODE"]), f"SLURM_GPUS_ON_NODE={env['SLURM_GPUS_ON_NODE']}"
    return None


def gpus_planned(spec: RunSpec) -> int:
    """GPUs this node needs: one per rank on a CUDA run, else the GPUs per node the job asked SLURM for."""
    return spec.plan.devices_per_node if spec.plan.accelerator == "cuda" else spec.hardware.gpus_per_node


def gpu_shortage(spec: RunSpec, env: dict) -> str | None:
    """In a SLURM job, one line when this node sees fewer GPUs than its ranks need (SLURM can place a job's
    GPUs unevenly across nodes); None when enough are visible, none are needed, or nothing says."""
    planned = gpus_planned(spec)
    seen = visible_gpus(env)
    if "SLURM_JOB_ID" not in env or not planned or seen is None or seen[0] >= planned:
        return None
    node = env.get("SLURMD_NODENAME") or socket.gethostname()
    return (f"hwsweep.run.launch: node {node}: hardware {spec.hardware_name} plans {planned} GPU(s) here "
            f"({spec.plan.devices_per_node} rank(s)), {seen[0]} visible ({seen[1]}); ask GPUs per node "
            "(gres: gpu:TYPE:N or gpu_model, never a count for the whole job) and rerun")  # fmt: skip


def forward_to(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def supervise(cmd: list[str], env: dict, ranks: int, node: str = "0", agent: bool = True,
              run_dir: Path | None = None) -> int:  # fmt: skip
    """Run torchrun's agent (its `ranks` workers on this node; `agent` False: a command that is its only
    worker) as a tethered child in its own process group and wait for it. A stop signal reaches the workers
    once: SLURM signals every process of a job step, so in one this launcher only notes it; elsewhere it passes
    it to the workers (the agent's children), never to the agent; either way it leaves the request for workers
    not started yet (hwsweep.run.stops). If this launcher is killed outright, or snakemake is, the agent and then
    its workers die too. Returns 75 when every worker stopped after its checkpoint, or after a stop signal
    unless the run ended well all the same; else the child's exit code. `run_dir`: where the checkpoints are."""
    started = []  # the agent, once started
    signalled = [(signal.Signals(s).name, time.monotonic()) for s in stops.received[:1]]  # the first stop signal
    in_step = "SLURM_STEP_ID" in env
    notes = tempfile.mkdtemp(prefix="hwsweep-stopped-")

    def stop(signum, frame):
        name = signal.Signals(signum).name
        signalled.append((name, time.monotonic()))
        stops.received.append(signum)
        stops.request(notes)
        if not started:
            return
        if in_step:
            print(f"hwsweep.run.launch [node {node}]: {name}: SLURM gave it to every process of the job step; the "
                  "workers checkpoint and stop", flush=True)  # fmt: skip
            return
        workers = runner.descendants(started[0].pid, depth=1) if agent else [started[0].pid]
        print(f"hwsweep.run.launch [node {node}]: {name}: passed to the {len(workers)} worker(s)", flush=True)
        for pid in workers:
            forward_to(pid, signum)

    handlers = {sig: signal.getsignal(sig) for sig in tether.AGENT_IGNORES}
    try:
        for sig in tether.AGENT_IGNORES:
            signal.signal(sig, stop)
        stops.hold("launcher")  # tests: a stop before the agent starts
        if signalled:
            return stopped_in_startup(node, signalled[0][0], [], run_dir)
        child = subprocess.Popen(secrets.unseal(cmd, env), env=env | {stops.STOPPED_DIR: notes}, process_group=0,
                                 preexec_fn=tether.agent_preexec() if agent else tether.preexec())  # fmt: skip
        started.append(child)
        tether.stop_when_workflow_ends(child, signal.SIGKILL)
        code = wait_ending_startup(child, notes)
        step = preempt.stopped_step(notes, ranks)
        phases = stops.startup_phases(notes)
    finally:
        shutil.rmtree(notes, ignore_errors=True)
        for sig, handler in handlers.items():  # stops.catch()'s, in the launcher: a late signal is still no death
            signal.signal(sig, handler)
    if step is not None:
        after = f", {time.monotonic() - signalled[0][1]:.1f} s after {signalled[0][0]}" if signalled else ""
        print(f"hwsweep.run.launch [node {node}]: every worker stopped after the checkpoint at step {step}{after}; "
              f"exit {preempt.EXIT_PREEMPTED}", flush=True)  # fmt: skip
        return preempt.EXIT_PREEMPTED
    if phases or (signalled and code != 0):  # the agent or a worker ended by the stop in its own way (exit 1, 143)
        return stopped_in_startup(node, signalled[0][0] if signalled else "a stop signal", phases, run_dir, code)
    return 128 - code if code < 0 else code


def wait_ending_startup(child: subprocess.Popen, notes: str) -> int:
    """Wait for `child`; once a worker stopped during start-up, give its peers STARTUP_GRACE seconds to stop too,
    then kill the agent's process group (its workers die with it): its exit code."""
    noted = None
    while True:
        try:
            return child.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass
        if noted is None and stops.startup_phases(notes):
            noted = time.monotonic()
        if noted is not None and time.monotonic() - noted > STARTUP_GRACE:
            forward_to(-child.pid, signal.SIGKILL)  # its process group
            return child.wait()


def stopped_in_startup(node: str, why: str, phases: list[str], run_dir: Path | None, code: int | None = None) -> int:
    """One line for an attempt stopped before any worker's checkpoint, and its exit code (75)."""
    newest = preempt.newest_checkpoint(run_dir) if run_dir is not None else -1
    where = f"during start-up ({', '.join(sorted(set(phases)))})" if phases else "before the workers' checkpoint"
    ended = ""
    if code:  # the agent or a worker ended by the stop in its own way
        ended = f" (torchrun's agent or its worker ended {f'by signal {-code}' if code < 0 else f'with exit {code}'})"
    resume = f"resumes from the checkpoint at step {newest}" if newest >= 0 else "starts over (no checkpoint yet)"
    print(f"hwsweep.run.launch [node {node}]: stopped by {why} {where}{ended}; no checkpoint written this time, the "
          f"next attempt {resume}; exit {preempt.EXIT_PREEMPTED}", flush=True)  # fmt: skip
    return preempt.EXIT_PREEMPTED


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="hwsweep.run.launch", description=__doc__.splitlines()[0])
    parser.add_argument("spec")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads on this node, for all its processes")
    parser.add_argument("--spec-sha256", help="refuse to run unless spec.json is exactly this spec")
    args = parser.parse_args(argv)
    io.one_line_refusals()
    if args.spec_sha256 and sha256(Path(args.spec).read_text()) != args.spec_sha256:
        sys.exit(f"hwsweep.run.launch: {args.spec} is not the spec this run was scheduled with; rerun snakemake, "
                 "which rewrites it from the config")  # fmt: skip
    spec = RunSpec.load(args.spec)
    node = os.environ.get("SLURM_NODEID", "0")
    if node == "0":  # one launcher per run prepares its folder, before any process of the run writes there
        problem = io.writable_problem(spec.run_dir)
        if problem is not None:  # named here, before torch or the script meets it in its own words
            sys.exit(f"hwsweep: {problem}")
        gone = [*io.remove_temporaries(spec.path(CHECKPOINT_DIR), (CHECKPOINT_TEMPORARIES,)),
                *io.remove_temporaries(spec.run_dir, (io.temporaries(TRAIN_RECORD), io.temporaries(FINAL_CHECKPOINT)))]  # fmt: skip
        if gone:
            print(f"hwsweep.run.launch: removed {len(gone)} temporary file(s) a killed write left: "
                  f"{', '.join(p.name for p in gone[:4])}{' ...' if len(gone) > 4 else ''}", flush=True)  # fmt: skip
    shortage = gpu_shortage(spec, dict(os.environ))
    if shortage:
        sys.exit(shortage)
    if gpus_planned(spec) and (seen := visible_gpus(dict(os.environ))):
        print(f"hwsweep.run.launch [node {node}]: {seen[0]} GPU(s) visible ({seen[1]}), {gpus_planned(spec)} planned",
              flush=True)  # fmt: skip
    trainer = spec.trainer
    cmd = command_line(spec, args.spec, args.threads, dict(os.environ))
    try:  # the config's secrets travel in the environment: named here, before anything starts
        secrets.unseal(cmd, os.environ)
    except secrets.SecretMissing as e:
        sys.exit(f"hwsweep.run.launch: {e}")
    print(f"hwsweep.run.launch [node {node}]: {shlex.join(cmd)}", flush=True)
    agent = trainer.launcher(spec.plan.world_size) == "torchrun"
    logs = None
    if agent and "PET_LOG_DIR" not in os.environ:  # torchrun's --log-dir, by default a new folder in /tmp per run
        logs = tempfile.mkdtemp(prefix="hwsweep-torchrun-")  # that torchrun never removes
        os.environ["PET_LOG_DIR"] = logs
    try:
        if trainer.kind == "command" and node == "0":
            return runner.train(spec, args.spec, cmd, args.threads)  # the first node watches and records the run
        # OMP_NUM_THREADS only silences torchrun's notice; the trainer sets threads per process.
        ranks = spec.plan.devices_per_node if agent else 1
        # The allocator settings the memory plan assumes on CPU (hwsweep.run.allocator), read as each process starts.
        env = allocator.environment(dict(os.environ), spec.plan.accelerator) | {"OMP_NUM_THREADS": "1"}
        return supervise(cmd, env, ranks, node, agent, Path(spec.run_dir))
    finally:
        if logs:
            shutil.rmtree(logs, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
