"""The suite's own parallel run: under `-n 3 --dist loadgroup` (pyproject's addopts) the tests that share a
session fixture of the suite, or a group mark, run in one worker, which builds the fixture once. pytest 9.2
with pytest-xdist 3.8 silently dropped every group (xdist renames `item._nodeid`, which pytest 9.2 no longer
reads): the SLURM tests then ran in three workers, each starting the one test cluster and stopping the others'.
A tiny suite run with this conftest's grouping hook shows whether groups hold with the installed versions, and
that a fixture built once for every worker (conftest's SHARED_ACROSS_WORKERS) ties its tests to none."""

import os
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import REPO, SHARED_ACROSS_WORKERS, start_order

# A tiny suite's conftest takes one hook of this suite's conftest, nothing else of it.
SUITE = f"""
import importlib.util
import pytest

spec = importlib.util.spec_from_file_location("suite_conftest", {str(REPO / "tests/conftest.py")!r})
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
"""

CONFTEST = SUITE + """
pytest_collection_modifyitems = suite.pytest_collection_modifyitems  # the grouping hook

@pytest.fixture(scope="session")
def built():
    return "once"

@pytest.fixture(scope="session")
def SHARED():  # named as one the suite builds once for every worker
    return "in every worker"
"""

TESTS = """
import os, time, pytest

def ran(kind, i):
    time.sleep(0.2)  # long enough that an idle worker would take the next test
    with open(os.environ["GROUPS_OUT"], "a") as f:
        f.write(f"{kind} {os.environ['PYTEST_XDIST_WORKER']} {os.environ['HWSWEEP_MEMORY_CACHE']}\\n")

@pytest.mark.parametrize("i", range(4))
def test_shares_the_fixture(built, i):
    ran("fixture", i)

@pytest.mark.xdist_group("marked")
@pytest.mark.parametrize("i", range(4))
def test_marked(i):
    ran("mark", i)

@pytest.mark.parametrize("i", range(6))
def test_free(i):
    ran("free", i)

@pytest.mark.parametrize("i", range(6))
def test_shared_across_workers(SHARED, i):
    ran("shared", i)
"""


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> list[list[str]]:
    """The tiny suite run under `-n 3 --dist loadgroup` as a `pytest` typed in a shell starts it (no cache folder
    of an outer run in its environment): each of its tests' (kind, worker, memory cache file)."""
    top = tmp_path_factory.mktemp("tiny")
    (top / "tests").mkdir()
    shared = sorted(SHARED_ACROSS_WORKERS)[0]
    (top / "tests/conftest.py").write_text(textwrap.dedent(CONFTEST).replace("SHARED", shared))
    (top / "tests/test_groups.py").write_text(textwrap.dedent(TESTS).replace("SHARED", shared))
    (top / "pytest.ini").write_text("[pytest]\n")
    out = top / "ran.txt"
    env = {k: v for k, v in os.environ.items() if k != "HWSWEEP_TEST_CACHES"} | {"GROUPS_OUT": str(out)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "3", "--dist", "loadgroup",
                           "tests"], cwd=top, capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [line.split() for line in out.read_text().splitlines()]


def test_tests_sharing_a_session_fixture_or_a_group_mark_run_in_one_worker_and_no_others(tiny_run):
    workers = defaultdict(set)
    for kind, worker, _ in tiny_run:
        workers[kind].add(worker)
    assert len(workers["fixture"]) == 1, workers  # one worker built the session fixture
    assert len(workers["mark"]) == 1, workers
    assert len(workers["shared"]) > 1, workers  # a fixture every worker gets groups nothing
    assert len(tiny_run) == 20


def test_the_workers_of_a_run_share_one_cache_folder_that_the_run_removes(tiny_run):
    """conftest's HWSWEEP_TEST_CACHES: the process that starts the workers makes the folder of the memory and FLOP
    caches, empty, the workers inherit it (a count one worker made serves the others), and it is gone after."""
    assert len({worker for _, worker, _ in tiny_run}) > 1
    folders = {Path(cache).parent for _, _, cache in tiny_run}
    assert len(folders) == 1, folders
    (folder,) = folders
    assert folder != Path(os.environ["HWSWEEP_TEST_CACHES"]) and not folder.exists()


def test_end_to_end_modules_start_first_alone_tests_last_and_a_module_stays_together():
    class Item:
        def __init__(self, path, *marks):
            self.path, self.marks = path, marks

        def get_closest_marker(self, name):
            return name if name in self.marks else None

    items = [Item("a.py"), Item("a.py"), Item("b.py"), Item("b.py", "slow"), Item("c.py", "slow", "alone"),
             Item("c.py", "slow"), Item("d.py")]  # fmt: skip
    order = [(i.path, i.marks) for i in sorted(items, key=start_order(items))]
    assert order == [("b.py", ()), ("b.py", ("slow",)), ("c.py", ("slow",)), ("a.py", ()), ("a.py", ()),
                     ("d.py", ()), ("c.py", ("slow", "alone"))]  # fmt: skip


PROTOCOL = SUITE + """
pytest_runtest_protocol = suite.pytest_runtest_protocol  # the hook around each test
"""

PINNING = """
import os

def test_pins_this_process():
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # as the built-in trainer does, run in-process

def test_after_it():
    assert len(os.sched_getaffinity(0)) == int(os.environ["ALL_CPUS"])
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 allowed CPUs to pin to fewer")
def test_a_test_that_pins_its_process_leaves_the_next_one_every_cpu(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/conftest.py").write_text(textwrap.dedent(PROTOCOL))
    (tmp_path / "tests/test_pinning.py").write_text(textwrap.dedent(PINNING))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env=os.environ | {"ALL_CPUS": str(len(os.sched_getaffinity(0)))})  # fmt: skip
    assert proc.returncode == 0 and "2 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
