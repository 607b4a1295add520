"""A real SLURM cluster on this one machine, for tests and for developers:

    python tests/slurm/cluster.py up      # prints: export SLURM_CONF=...
    python tests/slurm/cluster.py down

One slurmctld and several `slurmd -N <name>` daemons (Debian's slurmctld, slurmd, slurm-client and
munge, installed with apt-get when missing; needs root). Nodes, in partitions named like a site:

    cpu       cpu-1            8 CPUs
    gpu-h100  h100-1, h100-2   16 CPUs, 4 "h100" GPUs each
    gpu-l40s  l40s-1           8 CPUs, 2 "l40s" GPUs
    gpu-rtx   rtx-1            8 CPUs, 2 "rtx6000" GPUs (a type the hardware catalog lacks)

The GPUs are character devices made with mknod (SLURM drops file-less GRES), so jobs get real
GRES bookkeeping and CUDA_VISIBLE_DEVICES, but no CUDA: configs that use these nodes say
`accelerator: cpu` explicitly. No accounting daemon: use `slurm-status-command: squeue`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared apt helper
import aptget  # noqa: E402

ROOT = Path(os.environ.get("HWSWEEP_SLURM_DIR", "/tmp/hwsweep-slurm"))
PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge"]
NODES = {  # name: (cpus, memory MB, gpu type, gpu count, partition)
    "cpu-1": (8, 16000, None, 0, "cpu"),
    "h100-1": (16, 32000, "h100", 4, "gpu-h100"),
    "h100-2": (16, 32000, "h100", 4, "gpu-h100"),
    "l40s-1": (8, 16000, "l40s", 2, "gpu-l40s"),
    "rtx-1": (8, 16000, "rtx6000", 2, "gpu-rtx"),
}
CTLD_PORT = 16817
FIRST_SLURMD_PORT = 16818
CONFIG_CACHE = Path("/run/slurm/conf")
MUNGE_PID = Path("/run/munge/hwsweep-munged.pid")  # munged runs as munge and cannot write under ROOT
MIN_JOB_AGE = 900  # >= 3 x slurm-init-seconds-before-status-checks, and long enough to read jobs back


def conf_path() -> Path:
    return ROOT / "etc" / "slurm.conf"


def env() -> dict:
    return os.environ | {"SLURM_CONF": str(conf_path())}


def ensure_installed() -> None:
    if all(shutil.which(p) for p in ("slurmctld", "slurmd", "sbatch", "munged")):
        return
    aptget.install(PACKAGES, "SLURM")


def write_config() -> None:
    for sub in ("etc", "state", "log", "dev", "spool"):
        (ROOT / sub).mkdir(parents=True, exist_ok=True)
    lines = [
        "ClusterName=hwsweep",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={CTLD_PORT}",
        "AuthType=auth/munge",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={ROOT}/state",
        f"SlurmdSpoolDir={ROOT}/spool/%n",
        f"SlurmctldPidFile={ROOT}/slurmctld.pid",
        f"SlurmdPidFile={ROOT}/slurmd-%n.pid",
        f"SlurmctldLogFile={ROOT}/log/slurmctld.log",
        f"SlurmdLogFile={ROOT}/log/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",  # no cgroups without systemd
        "TaskPlugin=task/none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "GresTypes=gpu",
        "SlurmdParameters=config_overrides",  # nodes may declare more CPUs than this machine has
        "DefMemPerCPU=500",  # without it each job takes a whole node's memory
        f"MinJobAge={MIN_JOB_AGE}",
        "ReturnToService=2",
        "MpiDefault=none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "KillWait=10",
        "AuthInfo=cred_expire=5",  # a requeued job waits this +1 s before it may start again (120 by default)
        "InactiveLimit=0",
        "SchedulerParameters=sched_interval=2",
        # Configless: slurmd caches the config in /run/slurm/conf, where srun inside a job finds it
        # (the snakemake jobstep removes SLURM_CONF from the rule's environment).
        "SlurmctldParameters=enable_configless",
    ]
    gres = []
    partitions: dict[str, list[str]] = {}
    for i, (name, (cpus, mem, gpu, count, partition)) in enumerate(NODES.items()):
        extra = f" Gres=gpu:{gpu}:{count}" if gpu else ""
        lines.append(f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={FIRST_SLURMD_PORT + i} "
                     f"CPUs={cpus} RealMemory={mem}{extra} State=UNKNOWN")  # fmt: skip
        partitions.setdefault(partition, []).append(name)
        for g in range(count):
            dev = ROOT / "dev" / f"{name}-gpu{g}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))  # a character device, like /dev/null
            gres.append(f"NodeName={name} Name=gpu Type={gpu} File={dev}")
    for partition, names in partitions.items():
        default = " Default=YES" if partition == "cpu" else ""
        lines.append(f"PartitionName={partition} Nodes={','.join(names)} MaxTime=120 State=UP{default}")
    conf_path().write_text("\n".join(lines) + "\n")
    (ROOT / "etc" / "gres.conf").write_text("\n".join(gres) + "\n")
    (ROOT / "etc" / "cgroup.conf").write_text("CgroupPlugin=autodetect\n")


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def up(timeout: float = 60) -> dict:
    ensure_installed()
    down()
    write_config()
    e = env()
    munge_pid = MUNGE_PID
    if not _alive(_pid(munge_pid)):
        Path("/run/munge").mkdir(parents=True, exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        subprocess.run(["runuser", "-u", "munge", "--", "munged", f"--pid-file={munge_pid}", "--force"], check=True,
                       env=e)  # fmt: skip
    subprocess.run(["slurmctld", "-i", "-c"], check=True, env=e)
    for name in NODES:
        subprocess.run(["slurmd", "-N", name, "--conf-server", f"localhost:{CTLD_PORT}"], check=True,
                       env=os.environ)  # fmt: skip
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, env=e).stdout
        states = dict(line.split() for line in out.splitlines() if line.strip())
        if len(states) == len(NODES) and all(s in ("idle", "mix", "alloc") for s in states.values()):
            return e
        time.sleep(0.5)
    raise RuntimeError(f"SLURM nodes did not come up: {out!r}; see {ROOT}/log")


def controller_up() -> bool:
    """Whether the slurmctld this module started is running."""
    return _alive(_pid(ROOT / "slurmctld.pid"))


def down() -> None:
    """Stop every daemon this module started, by PID (munged last: the others talk to it)."""
    files = [ROOT / "slurmctld.pid", *(ROOT / f"slurmd-{n}.pid" for n in NODES), MUNGE_PID]
    pids = [p for p in map(_pid, files) if _alive(p)]  # read first: daemons delete their PID files on exit
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(map(_alive, pids)):
        time.sleep(0.2)
    for pid in filter(_alive, pids):
        os.kill(pid, signal.SIGKILL)
    for pid in pids:  # reap our own children (slurmd and slurmctld daemonise, but be safe)
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
    # slurmd links it to its spool folder, which lives under ROOT.
    if CONFIG_CACHE.is_symlink() and os.readlink(CONFIG_CACHE).startswith(str(ROOT)):
        CONFIG_CACHE.unlink()


def drain(node: str, reason: str = "test") -> None:
    subprocess.run(["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"], check=True, env=env())


def resume(node: str) -> None:
    subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], check=True, env=env())


def hold_gpus(node: str, timeout: float = 30, count: int | None = None) -> str:
    """Submit a sleeping job that holds `count` GPUs of `node` (all by default); returns its job id once it runs."""
    cpus, mem, gpu, every, partition = NODES[node]
    count = every if count is None else count
    out = subprocess.run(["sbatch", "--parsable", "-p", partition, "-w", node, f"--gres=gpu:{gpu}:{count}", "-c", "1",
                          "--mem=500", "-o", "/dev/null", "--wrap", "sleep 600"], capture_output=True, text=True,
                         check=True, env=env())  # fmt: skip
    job = out.stdout.strip().split(";")[0]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, env=env())
        if state.stdout.strip() == "RUNNING":
            return job
        time.sleep(0.5)
    raise RuntimeError(f"job {job} holding {node}'s GPUs did not start")


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "up"
    if command == "up":
        up()
        print(f"export SLURM_CONF={conf_path()}")
    elif command == "down":
        down()
    else:
        sys.exit("usage: cluster.py up|down")
