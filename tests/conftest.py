import atexit
import contextlib
import copy
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from hwsweep.run import tether

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# Plans must not depend on peaks a memory probe cached on this machine (hwsweep detect on a GPU): the run, and
# every snakemake it starts, sees a cache folder of its own, empty at the start. One folder for the whole run: the
# process that starts pytest-xdist's workers (or runs alone) makes it, the workers inherit it, so a FLOP count one
# of them made (hwsweep.plan.counted: torch and TorchDynamo imported, 3-4 CPU-s) serves the others' plans too.
if "HWSWEEP_TEST_CACHES" not in os.environ:
    os.environ["HWSWEEP_TEST_CACHES"] = tempfile.mkdtemp(prefix="hwsweep-test-")
    atexit.register(shutil.rmtree, os.environ["HWSWEEP_TEST_CACHES"], True)  # after the workers: none left in /tmp
os.environ["HWSWEEP_MEMORY_CACHE"] = str(Path(os.environ["HWSWEEP_TEST_CACHES"]) / "memory.json")
# The suite runs 3 workers on 2 cores: an OpenMP thread that waits spins by default (libgomp), burning the CPU
# the other workers need (a 2-thread rank: 9 CPU-s instead of 2, tests/run/test_ddp.py). Waiting asleep changes no
# number: the same threads run the same kernels. Set before torch (and its libgomp) loads, in every process.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# A fresh clone holds no bytecode of hwsweep's modules: where the environment forbids writing it (some CI machines
# set PYTHONDONTWRITEBYTECODE), each of the suite's ~1,500 Python processes would compile them again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# -- sharing the machine between pytest-xdist workers --------------------------------------------
# Tests marked `alone` measure the machine itself (timings, CPU pinning, "other hwsweep runs on this node"):
# under xdist such a test waits for the other workers' tests to end and holds new ones off until it ends.
# Every other test holds the machine shared, from its setup (the shared sweeps it builds first) to its
# teardown. The gate in front of the lock gives a waiting `alone` test priority over tests that come after it.
@contextlib.contextmanager
def holding_the_machine(config, alone: bool = False):
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # one process: no other test runs beside this one
        yield
        return
    root = config._tmp_path_factory.getbasetemp().parent  # shared by the workers (each has a folder below)
    with open(root / "machine.gate", "a") as gate, open(root / "machine.lock", "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.flock(gate, fcntl.LOCK_UN)
        yield  # both released as the files close


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Each test from its setup (the module and session fixtures it builds first) to its teardown; after it, this
    process's CPUs as they were: the built-in trainer run in this process (tests/run/test_step_path.py) pins it to
    its rank's core and gives it back only when the run finishes; a test that fails before would leave every later
    test of this worker, with every process it starts, on that one core."""
    cpus = os.sched_getaffinity(0)
    try:
        with holding_the_machine(item.config, item.get_closest_marker("alone") is not None):
            return (yield)
    finally:
        if os.sched_getaffinity(0) != cpus:
            os.sched_setaffinity(0, cpus)


# Session fixtures built once for the whole run, whichever xdist worker first needs them, under a lock in the
# folder all workers share (`shared_once`); the others wait and reuse what it built. Each test that changes such a
# fixture's result works on its own copy, so these fixtures tie no tests to one worker (the grouping hook below).
SHARED_ACROSS_WORKERS = {"finished_two_suites"}


@contextlib.contextmanager
def shared_once(config, name: str):
    """Yield (folder, build): `build` is True for the one caller, across every xdist worker of this run, that must
    make `folder` (it fills the folder and returns; the folder counts as built once the block ends without an
    error). The others wait for it and get False. A failed build is remembered: they fail at once with its error."""
    base = config._tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # parent: this run's, for all workers
    folder, done, failed = root / name, root / f"{name}.done", root / f"{name}.failed"
    with open(root / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if failed.exists():
            pytest.fail(f"{name}, built by another worker, failed:\n{failed.read_text()}")
        if done.exists():
            yield folder, False
            return
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        try:
            yield folder, True
        except BaseException as e:
            failed.write_text(f"{type(e).__name__}: {e}"[-4000:])
            raise
        done.touch()


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Under `--dist loadgroup`, the tests that share a module or session fixture of this suite (a finished
    sweep, the SLURM cluster) go to one worker, which builds it once: one xdist group per set of tests linked
    by such fixtures or by a group mark of their own (whose name the set then takes). A fixture in
    SHARED_ACROSS_WORKERS links nothing: every worker gets it (built once for them all), so its tests spread."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    linked = {}
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        keys = [f"mark:{(mark.args or [mark.kwargs.get('name', 'default')])[0]}"] if mark else []
        for name in getattr(item, "fixturenames", ()):
            fixture = (item._fixtureinfo.name2fixturedefs.get(name) or [None])[-1]  # the one the test gets
            if (fixture and fixture.scope != "function" and fixture.baseid.startswith("tests")  # ours, not a plugin's
                    and name not in SHARED_ACROSS_WORKERS):  # fmt: skip
                keys.append(f"{fixture.baseid}::{name}")
        for key in keys[1:]:
            parent[root(key)] = root(keys[0])  # a mark, where there is one, stays the root
        linked[item] = keys
    for item, keys in linked.items():
        if keys:
            group = root(keys[0])
            item.add_marker(pytest.mark.xdist_group(group.removeprefix("mark:")), append=False)
    items[:] = sorted(items, key=start_order(items))


def start_order(items):
    """The order tests start in (xdist hands out the groups of several tests first, then single tests in this
    order): modules with end-to-end (`slow`) tests before the unit tests, so the run does not end on a long
    sweep while the other workers idle; `alone` tests last, where they wait for short tests only, not for a
    sweep mid-run. Each module's tests stay together, in their own order."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}

    def key(item):
        return (item.get_closest_marker("alone") is not None, item.path not in slow)

    return key


# A small matrix: 1 suite x 1 variant x 2 seeds x (cpu1 + cpu2), a few seconds per run.
SMALL = {
    "recipe": {
        "task": {"length": 8, "vocab_size": 16, "train_size": 4000, "eval_size": 500},
        "model": {"width": 32, "depth": 1, "heads": 2},
        "schedule": {"steps": 60, "warmup_steps": 5},
        "global_batch": 32,
        "micro_batch": 8,
        "checkpoint_every": 25,
    },
    "suites": {"tiny": {"description": "test suite"}},
    "seeds": [0, 1],
    "hardware": {
        "cpu1": {"accelerator": "cpu", "devices_per_node": 1},
        "cpu2": {"accelerator": "cpu", "devices_per_node": 2},
    },
    "baseline": "cpu1",
}


def left_behind(temporary: Path) -> list[str]:
    """What a process given `temporary` as its TMPDIR left there once it ended, torch's compile cache
    (torchinductor_USER, kept between runs on purpose) aside."""
    return sorted(p.name for p in temporary.iterdir() if not p.name.startswith("torchinductor_"))


def run_processes(workdir: Path) -> list[tuple[int, str]]:
    """(pid, command line) of every process working in `workdir` or below it (snakemake, its jobs, torchrun,
    the workers: a command runs in its run directory), as /proc shows them; zombies are dead and left out."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if state != "Z" and (cwd == str(workdir) or cwd.startswith(f"{workdir}/")):
            out.append((int(entry.name), cmdline))
    return out


def workers(workdir: Path, program: str) -> list[int]:
    """pids of the processes in `workdir` that run `program`: started (its command line) or forked from torchrun's
    agent (whose command line they keep; hwsweep.run.torchrun names them). Never the agent, nor a tether before
    it execs the program."""
    pids = []
    for pid, cmdline in run_processes(workdir):
        try:
            forked = Path(f"/proc/{pid}/comm").read_text().startswith(tether.WORKER_NAME)
        except OSError:
            continue
        started = "hwsweep.run.tether" not in cmdline and "hwsweep.run.torchrun" not in cmdline
        if program in cmdline and (forked or started):
            pids.append(pid)
    return pids


def script_config(trainer: dict, recipe: dict, metrics: dict, sweep: dict | None = None) -> dict:
    """A config of one user's script (tests/data/scripts) run once: suite s, seed 0, hardware cpu1."""
    return {
        "trainer": {"workdir": str(REPO / "tests" / "data" / "scripts")} | trainer,
        "recipe": recipe,
        "metrics": metrics,
        "suites": {"s": {"sweep": sweep} if sweep else {}},
        "seeds": [0],
        "hardware": {"cpu1": {"accelerator": "cpu"}},
        "baseline": "cpu1",
    }


@pytest.fixture
def small_config():
    return copy.deepcopy(SMALL)


def one_thread() -> dict:
    """This process's environment as it is now, with one OpenMP thread, for a test's own subprocess: taken at the
    call, so it holds the test's PYTEST_CURRENT_TEST, by which bench/census.py names the test a process ran for."""
    return os.environ | {"OMP_NUM_THREADS": "1"}


def helper_env() -> dict:
    """one_thread() with tests/ on PYTHONPATH, for a helper of this folder run as a module (`-m NAME`): under
    launcher(n) its workers are forked from the agent, as the built-in trainer's are, not started anew."""
    path = [str(REPO / "tests"), *filter(None, [os.environ.get("PYTHONPATH")])]
    return one_thread() | {"PYTHONPATH": os.pathsep.join(path)}


def write_config(folder: Path, cfg: dict) -> Path:
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def snakemake_command(workdir: Path, cfg: dict | None, *args: str) -> tuple[list[str], dict]:
    """The real snakemake CLI on the repo's Snakefile, in `workdir`, with `cfg` as the only config
    (written to workdir/config.yaml; None: the config.yaml already there): the command and its environment."""
    path = workdir / "config.yaml" if cfg is None else write_config(workdir, cfg)
    cmd = [
        str(BIN / "snakemake"),
        "--snakefile", str(REPO / "Snakefile"),
        "--directory", str(workdir),
        "--configfile", str(path),
        "--replace-workflow-config",
        *args,
    ]  # fmt: skip
    return cmd, os.environ | {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def snakemake(workdir: Path, cfg: dict | None, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """snakemake_command run to its end, its output captured."""
    cmd, env = snakemake_command(workdir, cfg, *args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def launcher(processes: int) -> list[str]:
    """The start of the command that runs a training script (`-m module` or a file, then its arguments) on
    `processes` CPU processes of this machine as hwsweep.run.launch starts it: one plainly (python, no torchrun
    agent: an interpreter that imports torch for nothing), more under torchrun (hwsweep.run.torchrun), a module's
    workers forked from the agent as the built-in trainer's are (a file's are started anew: torchrun's
    --start-method is for the workers of a function, and of a module in hwsweep.run.torchrun)."""
    if processes == 1:
        return [str(BIN / "python"), "-u"]
    return [str(BIN / "python"), "-m", "hwsweep.run.torchrun", "--standalone", "--nproc_per_node", str(processes),
            "--start-method", "fork"]  # fmt: skip


def example(folder: Path, name: str, **recipe) -> tuple[Path, dict]:
    """A copy of the repository's workflow with example `name` under `folder`, run from the copy's root as the docs
    give it (docs/index.md, its config/config.yaml included): that root and the example's config, `recipe` merged
    into its recipe, at seeds 0 and 1."""
    root = folder / "repo"
    root.mkdir()
    for part in ("Snakefile", "workflow", "config", "profiles"):
        (shutil.copytree if (REPO / part).is_dir() else shutil.copy)(REPO / part, root / part)
    shutil.copytree(REPO / "examples" / name, root / "examples" / name)
    cfg = yaml.safe_load((REPO / "examples" / name / "config.yaml").read_text())
    cfg["recipe"] |= recipe
    cfg["seeds"] = [0, 1]
    return root, cfg


def example_snakemake(root: Path, cfg: dict | None, name: str, *args: str) -> subprocess.CompletedProcess:
    """The docs' command for an example, `snakemake --configfile examples/NAME/config.yaml
    --replace-workflow-config`, from the copy's root (`cfg` None: the config already there; `args` none: `--cores
    2 all`)."""
    if cfg is not None:
        (root / "examples" / name / "config.yaml").write_text(yaml.safe_dump(cfg))
    config = ["--configfile", f"examples/{name}/config.yaml", "--replace-workflow-config"]
    cmd = [str(BIN / "snakemake"), *config, *(args or ("--cores", "2", "all"))]
    env = os.environ | {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=900, env=env)


@pytest.fixture(scope="session")
def plain_ddp_swept(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """The plain-DDP example swept as the docs give it (suite plain_ddp: 60 steps, hidden 32, evaluated at steps 30 and
    60, tracked by TensorBoard and MLflow), with a second suite, `broken`, whose runs pass the script a flag it
    refuses (argparse exits 2: all 4 fail), under `--keep-going all`; then the report. Returns the copy's root and
    the sweep's and the report's snakemake. One sweep for test_examples' plain-DDP test (suite plain_ddp) and
    test_report's (the report after a failed suite)."""
    root, cfg = example(tmp_path_factory.mktemp("plain_ddp"), "plain_ddp", schedule={"steps": 60, "warmup_steps": 5})
    cfg["recipe"]["args"]["eval_every"] = 30
    cfg["suites"]["plain_ddp"]["sweep"] = {"args.hidden": [32]}
    cfg["suites"]["broken"] = {"description": "the script refuses a flag", "overrides": {"args": {"bogus": 1}}}
    cfg["tracking"] = ["tensorboard", "mlflow"]  # the unmodified script, tracked from what the runner parses
    sweep = example_snakemake(root, cfg, "plain_ddp", "--cores", "2", "--keep-going", "all")
    report = example_snakemake(root, None, "plain_ddp", "--report", str(root / "report.html"))
    return root, sweep, report


def stopped_after_a_checkpoint(proc: subprocess.Popen, checkpoints: Path) -> tuple[str, int]:
    """SIGTERM to a run (`proc`, its output piped as text) once a checkpoint file is in `checkpoints`: the run's
    output, which must say it exited preempted (75), and the step of its newest checkpoint."""
    from hwsweep.run.preempt import EXIT_PREEMPTED

    deadline = time.monotonic() + 120
    while not list(checkpoints.glob("step*.pt")) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert f"exiting {EXIT_PREEMPTED}" in out, out[-3000:]
    return out, max(int(p.stem[4:]) for p in checkpoints.glob("step*.pt"))


def two_suite_config() -> dict:
    """SMALL at one seed and 10 steps with a second suite (a deeper model): a whole sweep in four short runs."""
    cfg = copy.deepcopy(SMALL)
    cfg["seeds"] = [0]
    cfg["recipe"]["schedule"] = {"steps": 10, "warmup_steps": 2}
    cfg["suites"]["other"] = {"overrides": {"model": {"depth": 2}}}
    return cfg


@pytest.fixture(scope="session")
def finished_two_suites(request) -> Path:
    """two_suite_config's sweep, run once to its end (`all`) for every test of this run that starts from it, in
    every xdist worker (SHARED_ACROSS_WORKERS). Never changed: a test changes a copy of it (two_suites)."""
    with shared_once(request.config, "two-suites") as (folder, build):
        if build:
            proc = snakemake(folder, two_suite_config(), "--cores", "2")
            assert proc.returncode == 0, proc.stderr[-4000:]
    return folder


@pytest.fixture
def two_suites(finished_two_suites, tmp_path) -> tuple[Path, dict]:
    """A copy of the finished two-suite sweep for this test to change, times kept, and its config: a sweep folder
    copied elsewhere is up to date (its records name no folder of the machine)."""
    folder = tmp_path / "sweep"
    shutil.copytree(finished_two_suites, folder, symlinks=True)
    return folder, two_suite_config()


# -- real file system faults (issue 36): a small full tmpfs, a read-only bind mount, a user without the right ----------
# Mounts need root (CAP_SYS_ADMIN); each is made under the test's own tmp_path and taken down after it.


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


@pytest.fixture
def small_disk(tmp_path):
    """mount(folder, megabytes): a tmpfs of that size mounted at `folder` (made if missing); unmounted at the
    end. Skips where this process may not mount (not root)."""
    mounted = []

    def mount(folder: Path, megabytes: float) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        try:
            _mount("-t", "tmpfs", "-o", f"size={int(megabytes * 1024)}k", "tmpfs", str(folder))
        except (subprocess.CalledProcessError, FileNotFoundError) as e:
            pytest.skip(f"cannot mount a tmpfs here: {getattr(e, 'stderr', e)}")
        mounted.append(folder)
        return folder

    yield mount
    for folder in reversed(mounted):
        subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


@pytest.fixture
def read_only(tmp_path):
    """make(folder): `folder` becomes a read-only bind mount of itself (EROFS for root too); undone at the end."""
    mounted = []

    def make(folder: Path) -> Path:
        try:
            _mount("--bind", str(folder), str(folder))
        except (subprocess.CalledProcessError, FileNotFoundError) as e:
            pytest.skip(f"cannot bind-mount here: {getattr(e, 'stderr', e)}")
        mounted.append(folder)
        _mount("-o", "remount,ro,bind", str(folder))
        return folder

    def undo() -> None:
        while mounted:
            subprocess.run(["umount", "-l", str(mounted.pop())], check=False, capture_output=True)

    make.undo = undo
    yield make
    undo()


def fill(folder: Path, leave: int = 0) -> Path:
    """Fill the file system of `folder` up to `leave` free bytes with one file (delete it to free the space)."""
    filler = folder / "filler"
    with open(filler, "wb") as f:
        while shutil.disk_usage(folder).free > leave:
            try:
                f.write(b"\0" * max(4096, min(1 << 20, shutil.disk_usage(folder).free - leave)))
                f.flush()
            except OSError:
                break
    return filler


# A process of root without the right to override file permissions: EACCES on a folder it may not write, as for
# any user. setpriv drops the capabilities from the bounding set, so the program it starts never has them.
WITHOUT_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
