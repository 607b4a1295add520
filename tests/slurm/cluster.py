"""A real SLURM cluster on this one machine, for tests and for developers:

    python tests/slurm/cluster.py up [--accounting]   # prints: export SLURM_CONF=...
    python tests/slurm/cluster.py down

One slurmctld and several `slurmd -N <name>` daemons (Debian's slurmctld, slurmd, slurm-client and
munge, installed with apt-get when missing; needs root). Nodes, in partitions named like a site:

    cpu       cpu-1            8 CPUs
    gpu-h100  h100-1, h100-2   16 CPUs, 4 "h100" GPUs each
    gpu-l40s  l40s-1           8 CPUs, 2 "l40s" GPUs
    gpu-rtx   rtx-1            8 CPUs, 2 "rtx6000" GPUs (a type the hardware catalog lacks)

The GPUs are character devices made with mknod (SLURM drops file-less GRES), so jobs get real
GRES bookkeeping and CUDA_VISIBLE_DEVICES, but no CUDA: configs that use these nodes say
`accelerator: cpu` explicitly.

Accounting is a choice (`Cluster(accounting=True)`, `up --accounting`): a MariaDB server and slurmdbd beside the
controller (tests/slurm/accounting.py; Debian's mariadb-server and slurmdbd, installed when missing), so `sacct`
answers for jobs that left squeue and `hwsweep profile install` picks `slurm-status-command: sacct`, as on a real
site. Without it (the default cluster) there is no accounting daemon: the profile gets `squeue`.

Several clusters may run side by side: everything of one lives in its folder and on its ports, from the
environment for the default one: HWSWEEP_SLURM_DIR (/tmp/hwsweep-slurm) and HWSWEEP_SLURM_PORT (16817: slurmctld;
the slurmds take the next ports, then slurmdbd and MariaDB). Each has its own munged (socket under the folder,
named in AuthInfo), and its slurmds run in a mount namespace whose /run/slurm is the folder's run/, where conf
links to the folder's etc/: srun inside a job (whose environment snakemake's jobstep strips of SLURM_CONF) reads
the fixed path /run/slurm/conf/slurm.conf, which one shared /run/slurm would point at one cluster only.
`down()` stops the daemons its PID files name, nothing else.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared apt helper
sys.path.insert(0, str(Path(__file__).resolve().parent))
import aptget  # noqa: E402
import accounting  # noqa: E402
from accounting import Accounting, alive, pid_of  # noqa: E402

ROOT = Path(os.environ.get("HWSWEEP_SLURM_DIR", "/tmp/hwsweep-slurm"))
PORT = int(os.environ.get("HWSWEEP_SLURM_PORT", "16817"))
PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge"]
NODES = {  # name: (cpus, memory MB, gpu type, gpu count, partition)
    "cpu-1": (8, 16000, None, 0, "cpu"),
    "h100-1": (16, 32000, "h100", 4, "gpu-h100"),
    "h100-2": (16, 32000, "h100", 4, "gpu-h100"),
    "l40s-1": (8, 16000, "l40s", 2, "gpu-l40s"),
    "rtx-1": (8, 16000, "rtx6000", 2, "gpu-rtx"),
}
MIN_JOB_AGE = 900  # >= 3 x slurm-init-seconds-before-status-checks, and long enough to read jobs back
# slurmd in a mount namespace of its own, /run/slurm there being the cluster's run/ folder (a fixed script: the
# folder and the command come as arguments).
PRIVATE_RUN = 'mount --bind "$0" /run/slurm && exec "$@"'


def ensure_installed() -> None:
    if all(shutil.which(p) for p in ("slurmctld", "slurmd", "sbatch", "munged")):
        return
    aptget.install(PACKAGES, "SLURM")


class Cluster:
    """The cluster in `root` whose slurmctld listens on `port` (its slurmds on the next ports), with or without
    accounting; MinJobAge `min_job_age` seconds (how long squeue keeps an ended job)."""

    def __init__(self, root: Path = ROOT, port: int = PORT, accounting: bool = False, min_job_age: int = MIN_JOB_AGE):
        self.root, self.port, self.min_job_age = Path(root), port, min_job_age
        self.first_slurmd_port = port + 1
        self.name = "hwsweep"
        dbd_port = port + 1 + len(NODES)
        self.accounting = Accounting(self.root, dbd_port, dbd_port + 1, self.name) if accounting else None
        self.run_dir = self.root / "run"  # /run/slurm as the slurmds and their jobs see it
        self.config_cache = self.run_dir / "conf"  # /run/slurm/conf there: a link to etc/
        self.munge = self.root / "munge"
        self.munge_pid = self.munge / "munged.pid"
        self.munge_socket = self.munge / "munge.socket"

    def conf_path(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    def env(self) -> dict:
        return os.environ | {"SLURM_CONF": str(self.conf_path())}

    def auth_info(self) -> str:
        return f"socket={self.munge_socket}"

    def pid_files(self) -> list[Path]:
        """Every daemon's PID file, in the order down() stops them (munged last: the others talk to it)."""
        return [self.root / "slurmctld.pid", *(self.root / f"slurmd-{n}.pid" for n in NODES),
                *accounting.pid_files(self.root), self.munge_pid]  # fmt: skip

    def write_config(self) -> None:
        root = self.root
        for sub in ("etc", "state", "log", "dev", "spool", "run"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        storage = (self.accounting.slurm_conf(self.munge_socket) if self.accounting else
                   ["JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none"])
        lines = [
            f"ClusterName={self.name}",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={self.port}",
            "AuthType=auth/munge",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={root}/state",
            f"SlurmdSpoolDir={root}/spool/%n",
            f"SlurmctldPidFile={root}/slurmctld.pid",
            f"SlurmdPidFile={root}/slurmd-%n.pid",
            f"SlurmctldLogFile={root}/log/slurmctld.log",
            f"SlurmdLogFile={root}/log/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc",  # no cgroups without systemd
            "TaskPlugin=task/none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "GresTypes=gpu",
            "SlurmdParameters=config_overrides",  # nodes may declare more CPUs than this machine has
            "DefMemPerCPU=500",  # without it each job takes a whole node's memory
            f"MinJobAge={self.min_job_age}",
            "ReturnToService=2",
            "MpiDefault=none",
            *storage,
            "KillWait=10",
            # cred_expire: a requeued job waits this +1 s before it may start again (120 by default)
            f"AuthInfo=cred_expire=5,{self.auth_info()}",
            "InactiveLimit=0",
            "SchedulerParameters=sched_interval=2",
        ]
        gres = []
        partitions: dict[str, list[str]] = {}
        for i, (name, (cpus, mem, gpu, count, partition)) in enumerate(NODES.items()):
            extra = f" Gres=gpu:{gpu}:{count}" if gpu else ""
            lines.append(f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={self.first_slurmd_port + i} "
                         f"CPUs={cpus} RealMemory={mem}{extra} State=UNKNOWN")  # fmt: skip
            partitions.setdefault(partition, []).append(name)
            for g in range(count):
                dev = root / "dev" / f"{name}-gpu{g}"
                if not dev.exists():
                    os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))  # a character device, like /dev/null
                gres.append(f"NodeName={name} Name=gpu Type={gpu} File={dev}")
        for partition, names in partitions.items():
            default = " Default=YES" if partition == "cpu" else ""
            lines.append(f"PartitionName={partition} Nodes={','.join(names)} MaxTime=120 State=UP{default}")
        self.conf_path().write_text("\n".join(lines) + "\n")
        (root / "etc" / "gres.conf").write_text("\n".join(gres) + "\n")
        (root / "etc" / "cgroup.conf").write_text("CgroupPlugin=autodetect\n")

    def start_munge(self) -> None:
        if alive(pid_of(self.munge_pid)):
            return
        self.munge.mkdir(parents=True, exist_ok=True)
        shutil.chown(self.munge, "munge", "munge")  # munged runs as munge and checks who owns its folders
        self.munge.chmod(0o755)
        subprocess.run(["runuser", "-u", "munge", "--", "munged", f"--socket={self.munge_socket}",
                        f"--pid-file={self.munge_pid}", f"--seed-file={self.munge}/munged.seed",
                        f"--log-file={self.munge}/munged.log", "--num-threads=10", "--force"], check=True, timeout=30)  # fmt: skip

    def up(self, timeout: float = 60) -> dict:
        """Start the cluster (after stopping what it left running); its clients' environment. On a failure, what
        it started is stopped again."""
        ensure_installed()
        self.down()
        try:
            return self._start(timeout)
        except BaseException:
            self.down()
            raise

    def _start(self, timeout: float) -> dict:
        self.write_config()
        e = self.env()
        self.start_munge()
        if self.accounting:
            self.accounting.start(e, self.auth_info(), timeout)
        subprocess.run(["slurmctld", "-i", "-c"], check=True, env=e, timeout=30)
        Path("/run/slurm").mkdir(parents=True, exist_ok=True)  # the mount point of each slurmd's own
        if not self.config_cache.is_symlink():
            self.config_cache.symlink_to(self.conf_path().parent)
        for name in NODES:
            subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", PRIVATE_RUN,
                            str(self.run_dir), "slurmd", "-N", name], check=True, env=e, timeout=30)  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, env=e).stdout
            states = dict(line.split() for line in out.splitlines() if line.strip())
            if len(states) == len(NODES) and all(s in ("idle", "mix", "alloc") for s in states.values()):
                return e
            time.sleep(0.5)
        raise RuntimeError(f"SLURM nodes did not come up: {out!r}; see {self.root}/log")

    def controller_up(self) -> bool:
        """Whether the slurmctld this cluster started is running."""
        return alive(pid_of(self.root / "slurmctld.pid"))

    def down(self) -> None:
        """Stop every daemon this cluster started, by the PIDs its files name (read first: daemons delete their
        PID files on exit), in pid_files' order: the SLURM daemons, slurmdbd, MariaDB, munged."""
        *others, munge = [pid_of(f) for f in self.pid_files()]
        Accounting.stop([p for p in others if alive(p)])
        Accounting.stop([munge] if alive(munge) else [])
        # An older cluster.py's configless slurmds linked the shared /run/slurm/conf to a folder of the cluster's.
        shared = Path("/run/slurm/conf")
        if shared.is_symlink() and os.readlink(shared).startswith(f"{self.root}/"):
            shared.unlink()

    def drain(self, node: str, reason: str = "test") -> None:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"], check=True,
                       env=self.env())  # fmt: skip

    def resume(self, node: str) -> None:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], check=True, env=self.env())

    def hold_gpus(self, node: str, timeout: float = 30, count: int | None = None) -> str:
        """Submit a sleeping job that holds `count` GPUs of `node` (all by default); its job id once it runs."""
        cpus, mem, gpu, every, partition = NODES[node]
        count = every if count is None else count
        out = subprocess.run(["sbatch", "--parsable", "-p", partition, "-w", node, f"--gres=gpu:{gpu}:{count}", "-c",
                              "1", "--mem=500", "-o", "/dev/null", "--wrap", "sleep 600"], capture_output=True,
                             text=True, check=True, env=self.env())  # fmt: skip
        job = out.stdout.strip().split(";")[0]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True,
                                   env=self.env())  # fmt: skip
            if state.stdout.strip() == "RUNNING":
                return job
            time.sleep(0.5)
        raise RuntimeError(f"job {job} holding {node}'s GPUs did not start")


# The default cluster (HWSWEEP_SLURM_DIR, HWSWEEP_SLURM_PORT), no accounting: tests/cluster/test_slurm.py's.
DEFAULT = Cluster()
CTLD_PORT = DEFAULT.port
up, down, controller_up, conf_path, env = DEFAULT.up, DEFAULT.down, DEFAULT.controller_up, DEFAULT.conf_path, DEFAULT.env
drain, resume, hold_gpus = DEFAULT.drain, DEFAULT.resume, DEFAULT.hold_gpus


def with_accounting(min_job_age: int) -> Cluster:
    """The cluster with accounting beside the default one (its folder ROOT-accounting, its ports 50 above), so both
    can run in one test session: tests/cluster/test_accounting.py's."""
    return Cluster(ROOT.with_name(f"{ROOT.name}-accounting"), PORT + 50, accounting=True, min_job_age=min_job_age)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="start or stop the test SLURM cluster in HWSWEEP_SLURM_DIR")
    parser.add_argument("command", nargs="?", default="up", choices=["up", "down"])
    parser.add_argument("--accounting", action="store_true", help="with MariaDB and slurmdbd: sacct answers")
    args = parser.parse_args()
    chosen = Cluster(accounting=args.accounting)
    if args.command == "up":
        chosen.up()
        print(f"export SLURM_CONF={chosen.conf_path()}")
    else:
        chosen.down()  # every daemon its PID files name, accounting's too
