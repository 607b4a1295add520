"""The accounting database of a test SLURM cluster (tests/slurm/cluster.py): a MariaDB server and slurmdbd, both
started by hand under the cluster's folder (no systemd here), so that `sacct` answers for jobs that left squeue
as it does on every real site. Debian's mariadb-server and slurmdbd (22.05, as slurmctld), installed with
apt-get when missing; needs root.

    ROOT/db/data          MariaDB's data folder (made once with mariadb-install-db, kept between starts)
    ROOT/db/mariadbd.sock its unix socket (root creates the slurm user through it); TCP on 127.0.0.1:db_port
    ROOT/etc/slurmdbd.conf mode 600, owned by SlurmUser (root), beside slurm.conf, where slurmdbd looks

Every wait is bounded and fails with one line naming the log to read.
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

PACKAGES = ["mariadb-server", "slurmdbd"]
DATABASE, USER, PASSWORD = "slurm_acct_db", "slurm", "hwsweep-test"  # a throwaway server on 127.0.0.1 only
EXISTS = ("already exist", "nothing new added")  # sacctmgr -i add of what the kept database holds


def ensure_installed() -> None:
    if all(shutil.which(p) for p in ("mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "sacctmgr")):
        return
    aptget.install(PACKAGES, "SLURM's accounting (MariaDB, slurmdbd)")


def pid_of(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def wait_until(what: str, ask, timeout: float, log: Path, died=lambda: False) -> None:
    """Poll `ask()` (a command's CompletedProcess) until it succeeds; RuntimeError naming `what`, the command's last
    error and `log` at the timeout or once `died()`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = ask()
        if answer.returncode == 0:
            return
        if died():
            break
        time.sleep(0.3)
    said = (answer.stderr.strip().splitlines() or [""])[-1]
    tail = log.read_text(errors="replace").splitlines()[-3:] if log.exists() else []
    raise RuntimeError(f"{what} did not answer within {timeout:g} s ({said}); see {log}: {' | '.join(tail)}")


def pid_files(root: Path) -> list[Path]:
    """slurmdbd's and MariaDB's PID files in a cluster's folder (whether or not they run)."""
    return [root / "slurmdbd.pid", root / "db" / "mariadbd.pid"]


class Accounting:
    """MariaDB on `db_port` and slurmdbd on `dbd_port` for the cluster in `root` named `cluster`."""

    def __init__(self, root: Path, dbd_port: int, db_port: int, cluster: str):
        self.root, self.dbd_port, self.db_port, self.cluster = root, dbd_port, db_port, cluster
        self.db = root / "db"
        self.socket = self.db / "mariadbd.sock"
        self.dbd_pid, self.db_pid = pid_files(root)

    def slurm_conf(self, munge_socket: Path) -> list[str]:
        """slurm.conf's lines that send job records to this slurmdbd. Clients reach slurmdbd through the munged
        AccountingStoragePass names (AuthInfo's socket is for the cluster's own daemons only)."""
        return ["AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=localhost",
                f"AccountingStoragePort={self.dbd_port}", f"AccountingStoragePass={munge_socket}",
                "JobAcctGatherType=jobacct_gather/linux"]  # fmt: skip

    def write_dbd_conf(self, auth_info: str) -> None:
        path = self.root / "etc" / "slurmdbd.conf"
        lines = ["AuthType=auth/munge", f"AuthInfo={auth_info}", "DbdHost=localhost", "DbdAddr=127.0.0.1",
                 f"DbdPort={self.dbd_port}", "SlurmUser=root", f"PidFile={self.dbd_pid}",
                 f"LogFile={self.root}/log/slurmdbd.log", "StorageType=accounting_storage/mysql",
                 "StorageHost=127.0.0.1", f"StoragePort={self.db_port}", f"StorageUser={USER}",
                 f"StoragePass={PASSWORD}", f"StorageLoc={DATABASE}"]  # fmt: skip
        path.write_text("\n".join(lines) + "\n")
        os.chown(path, 0, 0)
        path.chmod(0o600)  # slurmdbd refuses a config others may read (it holds the password)

    def _sql(self, statement: str) -> subprocess.CompletedProcess:
        return subprocess.run(["mariadb", "--no-defaults", f"--socket={self.socket}", "-u", "root", "-e", statement],
                              capture_output=True, text=True, timeout=10)  # fmt: skip

    def start_database(self, timeout: float = 60) -> None:
        data, log = self.db / "data", self.root / "log" / "mariadb.log"
        self.db.mkdir(parents=True, exist_ok=True)
        shutil.chown(self.db, "mysql", "mysql")  # mariadbd runs as mysql: its socket and PID file live here
        if not (data / "mysql").is_dir():
            shutil.rmtree(data, ignore_errors=True)
            made = subprocess.run(["mariadb-install-db", "--no-defaults", "--user=mysql", f"--datadir={data}",
                                   "--auth-root-authentication-method=socket", "--skip-test-db"],
                                  capture_output=True, text=True, timeout=120)  # fmt: skip
            if made.returncode != 0:
                raise RuntimeError(f"mariadb-install-db failed: {made.stderr.strip()[-500:]}")
        server = subprocess.Popen(
            ["mariadbd", "--no-defaults", "--user=mysql", f"--datadir={data}", f"--socket={self.socket}",
             f"--port={self.db_port}", "--bind-address=127.0.0.1", f"--pid-file={self.db_pid}", f"--log-error={log}",
             "--skip-name-resolve", "--innodb-buffer-pool-size=32M", "--performance-schema=OFF"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        wait_until("MariaDB", lambda: self._sql("SELECT 1"), timeout, log,
                   died=lambda: server.poll() is not None)  # fmt: skip
        user = f"'{USER}'@'127.0.0.1'"
        made = self._sql(f"CREATE USER IF NOT EXISTS {user} IDENTIFIED BY '{PASSWORD}'; "
                         f"GRANT ALL ON {DATABASE}.* TO {user};")  # fmt: skip
        if made.returncode != 0:
            raise RuntimeError(f"MariaDB refused the slurm user: {made.stderr.strip()}")

    def start(self, env: dict, auth_info: str, timeout: float = 60) -> None:
        """MariaDB, then slurmdbd, then this cluster, an account and root in it (sacctmgr); before slurmctld."""
        ensure_installed()
        self.start_database(timeout)
        self.write_dbd_conf(auth_info)
        log = self.root / "log" / "slurmdbd.log"
        subprocess.run(["slurmdbd"], check=True, env=env, timeout=30)  # daemonises once its port is bound

        def manager(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(["sacctmgr", "-i", *args], capture_output=True, text=True, env=env, timeout=15)

        wait_until("slurmdbd", lambda: manager("-n", "show", "cluster"), timeout, log,
                   died=lambda: not alive(pid_of(self.dbd_pid)) and self.dbd_pid.exists())  # fmt: skip
        for args in (("add", "cluster", self.cluster), ("add", "account", "hwsweep", f"cluster={self.cluster}"),
                     ("add", "user", "root", "account=hwsweep", f"cluster={self.cluster}")):  # fmt: skip
            done = manager(*args)
            if done.returncode != 0 and not any(w in (done.stdout + done.stderr).lower() for w in EXISTS):
                raise RuntimeError(f"sacctmgr {' '.join(args)} failed: {(done.stderr or done.stdout).strip()}")

    @staticmethod
    def stop(pids: list[int], grace: float = 15) -> None:
        """SIGTERM to `pids` (read from our PID files), SIGKILL to those left after `grace` seconds."""
        for pid in pids:
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(map(alive, pids)):
            for pid in pids:  # reap our own children (mariadbd does not daemonise)
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
            time.sleep(0.2)
        for pid in filter(alive, pids):
            os.kill(pid, signal.SIGKILL)
