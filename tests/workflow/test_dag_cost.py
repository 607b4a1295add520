"""What building the DAG costs per job stays per job (issue 71): the workflow's functions that snakemake calls for
each job (inputs, parameters, resources, group) have their signature read once per snakemake, not once per call
(signatures_once in common.smk; bench/dry_run.py measures the time)."""

from __future__ import annotations

import collections
import json
import subprocess
import sys

from conftest import REPO, write_config

# Runs snakemake's CLI in this interpreter with inspect.signature counted for functions of the workflow's files.
COUNTING = """
import inspect, json, runpy, sys
read = []
signature = inspect.signature
def counted(obj, *args, **kwargs):
    code = getattr(obj, "__code__", None)
    if code is not None and code.co_filename.endswith((".smk", "Snakefile")):
        read.append(f"{code.co_name}@{id(obj)}")  # closures share a name: one entry per function
    return signature(obj, *args, **kwargs)
inspect.signature = counted
sys.argv = ["snakemake", *sys.argv[1:]]
try:
    runpy.run_module("snakemake", run_name="__main__")
except SystemExit as e:
    if e.code:
        raise
print("SIGNATURES " + json.dumps(read))
"""


def test_each_workflow_function_has_its_signature_read_once_however_many_jobs(tmp_path, small_config):
    small_config["seeds"] = [1, 2, 3]
    write_config(tmp_path, small_config)
    proc = subprocess.run([sys.executable, "-c", COUNTING, "-n", "--snakefile", str(REPO / "Snakefile"),
                           "--directory", str(tmp_path), "--configfile", str(tmp_path / "config.yaml"),
                           "--replace-workflow-config", "--cores", "1", "all"],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("SIGNATURES "))
    read = collections.Counter(json.loads(line.removeprefix("SIGNATURES ")))
    names = {entry.split("@")[0] for entry in read}
    assert {"placed_spec", "tracking_file", "run_spec_sha256", "existing_spec"} <= names, read
    assert max(read.values()) == 1, read.most_common(3)  # 6 train and 6 evaluate jobs ask
