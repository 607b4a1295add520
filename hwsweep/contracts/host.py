"""Facts about where a run happens, torch-free: the git commit of a checkout, the scheduler's
node name, the environment variables worth recording."""

from __future__ import annotations

import os
import socket
import subprocess

# Environment variables that change how a run behaves or where it ran; recorded with each run.
RECORDED_ENV = (
    "OMP_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
    "CUBLAS_WORKSPACE_CONFIG",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "SLURM_JOB_ID",
    "SLURM_JOB_NODELIST",
    "SLURM_JOB_PARTITION",
    "SLURM_NNODES",
    "SLURM_NODEID",
    "SLURM_CPUS_PER_TASK",
    "SLURM_GPUS_ON_NODE",
    "SLURMD_NODENAME",
)


def git(folder, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def node_name() -> str:
    """The scheduler's name for this node where there is one (several may share a host)."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def recorded_env(env: dict | None = None) -> dict:
    """The variables worth recording, from `env` (default: this process's environment)."""
    env = os.environ if env is None else env
    return {k: env[k] for k in RECORDED_ENV if k in env}


def peak_rss_bytes(children: bool = False) -> int:
    """Peak resident set in bytes of this process, or of the largest child (and its children) waited for:
    host memory, the interpreter and libraries included. Linux counts in KiB, macOS in bytes."""
    import resource
    import sys

    if not children:
        # Linux: VmHWM, the high-water mark reset_peak_rss starts anew; getrusage's maxrss also keeps the mark of
        # each thread that exited, which no reset clears.
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
    peak = resource.getrusage(resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def resident_bytes() -> int:
    """This process's resident set now (not its peak), in bytes: the baseline a run's growth is measured from. Where
    /proc is missing (macOS), the peak so far: growth is then understated, never overstated."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return peak_rss_bytes()


def reset_peak_rss() -> bool:
    """Start this process's peak resident set anew from its current size (Linux: /proc/self/clear_refs, mode 5), so
    one process can measure several peaks in turn; False where the system offers no such reset."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


LAUNCHER = "hwsweep.run.launch"  # every run, built-in or a user's command, is started through it


def _processes(wanted):
    """(pid, argv) of every process on this node now whose argv `wanted` accepts (Linux /proc)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = [a.decode(errors="replace") for a in open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")]
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if wanted(argv):
            yield int(entry), argv


def _launchers():
    """(pid, argv) of every hwsweep launcher process on this node now."""
    return _processes(lambda argv: LAUNCHER in argv)


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command's name (which may hold spaces and parentheses): state first."""
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()


def process_start(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (Linux /proc/PID/stat); None if there is no such
    process (or no /proc). With the pid it names one process: a pid used again later has another start."""
    try:
        return int(_stat(pid)[19])
    except (OSError, ValueError, IndexError):
        return None


def _ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            pid = int(_stat(pid)[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def other_snakemakes(folder) -> list[int]:
    """Pids of the snakemake processes working in `folder` on this node, besides this one and its parents."""
    here, mine = os.path.realpath(folder), _ancestors()
    out = []
    for pid, argv in _processes(lambda argv: any(os.path.basename(a) == "snakemake" for a in argv[:3])):
        try:
            if pid not in mine and os.path.realpath(os.readlink(f"/proc/{pid}/cwd")) == here:
                out.append(pid)
        except OSError:
            continue
    return out


EVALUATOR = "hwsweep.run.evaluate"  # the built-in evaluator and a user's evaluation command alike


def launched_specs(program: str = LAUNCHER) -> set[str]:
    """Absolute spec.json paths of the runs whose launcher (or `program`, e.g. EVALUATOR) runs on this node now
    (Linux /proc)."""
    out = set()
    for pid, argv in _processes(lambda argv: program in argv):
        if argv.index(program) + 1 < len(argv):
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            out.add(os.path.normpath(os.path.join(cwd, argv[argv.index(program) + 1])))
    return out


def other_runs() -> int:
    """hwsweep runs on this node besides the caller's own (Linux /proc): timings taken while
    others run measure contention as much as the hardware."""
    mine = _ancestors()  # this process and its ancestors: our own launcher is not "another run"
    return sum(1 for pid, _ in _launchers() if pid not in mine)


def contention() -> dict:
    """What else was running here: other hwsweep runs, the load, the CPUs this process may use."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"other_runs": other_runs(), "load_1m": load, "cpus_allowed": cpus}


def pin_cores(accelerator: str, local_rank: int, local_world_size: int, threads: int) -> dict:
    """Pin this CPU process to its own cores when every process of the node can get `threads` of the
    allowed CPUs without sharing (its compute threads and its data-loader workers, which inherit the
    affinity): rank r takes the r-th block of the allowed CPUs in order, so ranks never compete for a
    core. Only where those cores are the run's: its processes fill the allowed CPUs (a SLURM allocation),
    or no other hwsweep run is on the node (asked only then). Runs side by side on one machine (snakemake's
    parallel local jobs) see the same allowed CPUs, and each would take the first block: one core for
    all. Otherwise leave the affinity as it is and say why. Returns what the record keeps."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    out = {"pinned": False, "cpus": allowed, "reason": ""}
    if accelerator != "cpu":
        return out | {"reason": f"accelerator {accelerator}: only CPU processes are pinned"}
    if not allowed:
        return out | {"reason": "this platform cannot set CPU affinity"}
    needed = local_world_size * threads
    if len(allowed) < needed:
        return out | {"reason": f"{len(allowed)} CPU(s) allowed < {local_world_size} process(es) x {threads} "
                                f"CPU(s) each: cores would be shared"}  # fmt: skip
    if needed < len(allowed) and (others := other_runs()):
        return out | {"reason": f"{others} other hwsweep run(s) on this node see the same {len(allowed)} allowed "
                                "CPU(s): pinned runs would share the first cores; placement left to the OS"}  # fmt: skip
    mine = allowed[local_rank * threads : (local_rank + 1) * threads]
    os.sched_setaffinity(0, mine)
    # spare: the allowed CPUs no process of the node took (where rank 0's tracker runs, off the run's cores)
    return {"pinned": True, "cpus": mine, "spare": allowed[needed:],
            "reason": f"{needed} of {len(allowed)} allowed CPU(s), {threads} per process"}  # fmt: skip


# A 1-minute load above this multiple of the CPUs a run may use means other work shared its cores. The
# load counts the run's own processes too (at most one per allowed CPU) and decays over about a minute,
# hence the margin.
LOAD_FACTOR = 1.5


def contended(contention: dict | None) -> str:
    """Why a run's timing measured contention as much as its hardware ('' when nothing says so): other
    hwsweep runs on the node while it ran, or a 1-minute load above LOAD_FACTOR x its allowed CPUs. The one
    rule runs.csv, the speedup tables and the report's flags use."""
    if not contention:
        return ""
    why = []
    if contention.get("other_runs"):
        why.append(f"{contention['other_runs']} other hwsweep run(s) on the node")
    load, cpus = contention.get("load_1m"), contention.get("cpus_allowed")
    if load is not None and cpus and load > LOAD_FACTOR * cpus:
        why.append(f"load {load:.3g} on {cpus} allowed CPU(s)")
    return "; ".join(why)
