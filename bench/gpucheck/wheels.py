"""The packages bench/gpu_check.py needs beyond the GPU machine's own torch: downloaded here (`--wheels DIR`), installed
there offline (`--from-wheels DIR`) into a virtual environment that sees the machine's own packages (stdlib only:
this runs before anything is installed).

Here: the dependency closure of ROOTS as this environment has it installed (the versions the tests ran with),
for the target's Python and platform, leaving out what the GPU image already holds and is too large to carry
(THERE). A pure-Python package published as a source archive only is built into a wheel here.

There: a fresh venv at VENV (the machine's python may itself be a venv, whose packages a nested
`--system-site-packages` venv would not see), a .pth file putting the machine's site-packages and the
repository on its path, `pip install --no-index --find-links DIR` of the roots (what the machine already
satisfies is kept), a `torchrun` beside its python, then the check re-run in it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# What the check imports beyond torch and the project itself (hwsweep is put on the path, not installed:
# no build backend needed offline). The SLURM executor plugin is left out: the check runs locally.
ROOTS = ("snakemake", "jsonschema", "pyyaml", "tqdm", "tensorboard", "nvidia-ml-py")
# Held by the GPU machine's image (its list of "Python packages already there", read
# 2026-11-17) and large: not carried; pip keeps the machine's versions. Prefixes end in '-'.
THERE = ("torch", "triton", "numpy", "scipy", "pandas", "matplotlib", "pillow", "fonttools", "contourpy", "kiwisolver",
         "grpcio", "sympy", "networkx", "pyarrow", "tensorboard", "tensorboard-data-server", "nvidia-", "cuda-")  # fmt: skip
LIMIT_BYTES = 48 * 2**20  # the device carries 64 MiB with the repository: the wheels stay well under it
MANIFEST = "manifest.json"
# Not under the work folder's prefix (hwsweep-gpu-check-*): `ls -d /tmp/hwsweep-gpu-check-*` finds the work folder only.
VENV = Path(tempfile.gettempdir()) / "hwsweep-venv-for-gpu-check"
T0_ENV = "HWSWEEP_GPU_CHECK_T0"  # when the check started (the install counts toward its 8 minutes)
PLATFORMS = ["manylinux1_x86_64", "manylinux2014_x86_64", "linux_x86_64"] + [
    f"manylinux_2_{n}_x86_64" for n in range(5, 40)
]


def _there(name: str) -> bool:
    """Left out as the GPU image's: a name in THERE, or one under a prefix there that is not a root (nvidia-ml-py
    is one, and small; a root the image holds, e.g. tensorboard, is installed from the image's copy)."""
    if name in THERE:
        return True
    return name not in ROOTS and any(name.startswith(t) for t in THERE if t.endswith("-"))


def closure(python_version: str) -> dict[str, str]:
    """{normalised name: installed version} of ROOTS and everything they need on the target, from this
    environment's metadata; THERE's packages (and what only they need) left out."""
    import importlib.metadata as metadata

    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    major, minor = python_version.split(".")[:2]
    target = default_environment() | {"python_version": f"{major}.{minor}", "python_full_version": f"{major}.{minor}.0",
                                      "sys_platform": "linux", "platform_system": "Linux",
                                      "platform_machine": "x86_64", "os_name": "posix"}  # fmt: skip
    found: dict[str, str] = {}
    todo = [(name, ()) for name in ROOTS]
    while todo:
        name, extras = todo.pop()
        key = canonicalize_name(name)
        if _there(key) or key in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            sys.exit(f"bench/gpu_check.py --wheels: {name} is not installed here; run it with the project's venv "
                     "(.venv/bin/python, after pip install -r requirements.txt)")  # fmt: skip
        found[key] = dist.version
        for line in dist.requires or []:
            req = Requirement(line)
            wanted = req.marker is None or any(req.marker.evaluate(target | {"extra": e}) for e in ("", *extras))
            if wanted:
                todo.append((req.name, tuple(req.extras)))
    return dict(sorted(found.items()))


def download(folder: Path, python_version: str) -> int:
    """Fill `folder` with a wheel of every package of the closure for `python_version` on x86_64 Linux."""
    folder = Path(folder)
    wanted = closure(python_version)
    abi = "cp" + python_version.replace(".", "")[:3]
    tags = ["--python-version", python_version, "--implementation", "cp", "--abi", abi, "--abi", "abi3",
            "--abi", "none"] + [x for p in PLATFORMS for x in ("--platform", p)]  # fmt: skip
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp)
        pins = [f"{name}=={version}" for name, version in wanted.items()]
        # --no-deps: the closure is already complete, and it lets pip take a source archive where no wheel exists
        _pip(["download", "--no-deps", "--quiet", "-d", str(stage), *tags, *pins])
        for path in sorted(stage.iterdir()):
            if path.name.endswith(".whl"):
                shutil.copy2(path, folder / path.name)
            else:  # a source archive: build its wheel here (a pure-Python one runs on any platform)
                _pip(["wheel", "--no-deps", "--quiet", "-w", str(folder), str(path)])
    built = sorted(p for p in folder.iterdir() if p.name.endswith(".whl"))
    for path in built:
        if not (path.name.endswith("-none-any.whl") or "x86_64" in path.name):
            sys.exit(f"bench/gpu_check.py --wheels: {path.name} was built for this machine only; it cannot run "
                     "on the GPU machine (x86_64 Linux)")  # fmt: skip
    size = sum(p.stat().st_size for p in built)
    manifest = {"python_version": python_version, "roots": list(ROOTS), "packages": wanted, "bytes": size,
                "left_out": list(THERE), "made": time.strftime("%Y-%m-%d %H:%M")}  # fmt: skip
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1))
    print(f"{len(built)} wheels for Python {python_version} (x86_64 Linux) in {folder}: {size / 2**20:.1f} MiB")
    if size > LIMIT_BYTES:
        largest = ", ".join(f"{p.name} {p.stat().st_size / 2**20:.1f} MiB" for p in
                            sorted(built, key=lambda p: -p.stat().st_size)[:3])  # fmt: skip
        print(f"bench/gpu_check.py --wheels: {size / 2**20:.1f} MiB is over {LIMIT_BYTES / 2**20:.0f} MiB (the device "
              f"carries 64 MiB with the repository); largest: {largest}", file=sys.stderr)  # fmt: skip
        return 1
    return 0


def _pip(args: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"bench/gpu_check.py --wheels: pip {' '.join(args[:1])} failed:\n{proc.stderr[-3000:]}")


# -- there ------------------------------------------------------------------------------------------------
TORCHRUN = """import sys
from torch.distributed.run import main
sys.exit(main())
"""


def _site_dirs() -> list[str]:
    """This interpreter's site-packages (the machine's packages, torch among them)."""
    import site

    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    return [d for d in dict.fromkeys(dirs) if Path(d).is_dir()]


def _pip_for(python: Path) -> list[str]:
    """This python's pip aimed at the venv (--python: pip 22.3 on); else the venv's own pip, from ensurepip."""
    proc = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True)
    found = proc.stdout.split()[1:2] if proc.returncode == 0 else []
    version = tuple(int(x) for x in found[0].split(".")[:2] if x.isdigit()) if found else ()
    if version >= (22, 3):
        return [sys.executable, "-m", "pip", "--python", str(python)]
    subprocess.run([str(python), "-m", "ensurepip", "--default-pip"], check=True, capture_output=True)
    return [str(python), "-m", "pip"]


def bootstrap(folder: Path, repo: Path, argv: list[str]) -> int:
    """Install the check's packages from `folder` (offline) into VENV and run bench/gpu_check.py `argv` there."""
    os.environ.setdefault(T0_ENV, str(time.time()))
    folder = Path(folder).resolve()
    manifest = json.loads((folder / MANIFEST).read_text()) if (folder / MANIFEST).exists() else None
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if manifest is None:
        sys.exit(f"bench/gpu_check.py: {folder} holds no {MANIFEST}; make it with --wheels {folder} first")
    if manifest["python_version"] != here:
        sys.exit(f"bench/gpu_check.py: {folder} was made for Python {manifest['python_version']}, this is {here}; "
                 f"make it again with --wheels {folder} --python-version {here}")  # fmt: skip
    t0 = time.monotonic()
    python = VENV / "bin" / "python"
    if VENV.exists():
        shutil.rmtree(VENV)  # a venv left by an earlier run may hold other versions
    # Without pip of its own (no ensurepip needed, seconds saved): the machine's pip installs into it (--python).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(VENV)], check=True)
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    # After the venv's own site-packages: what pip installs there wins over the machine's versions.
    pth = Path(purelib, "hwsweep_gpu_check.pth")
    pth.write_text("\n".join(_site_dirs()) + "\n")
    env = os.environ | {"PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_CONFIG_FILE": os.devnull}
    pip = _pip_for(python)
    proc = subprocess.run([*pip, "install", "--quiet", "--no-index", "--find-links", str(folder), *manifest["roots"]],
                          env=env)  # fmt: skip
    if proc.returncode:
        sys.exit(f"bench/gpu_check.py: the offline install from {folder} failed (pip's lines above)")
    # The repository after the install: pip would read a checkout's egg-info (hwsweep's own requirements) as installed.
    pth.write_text(pth.read_text() + f"{repo}\n")
    if not (VENV / "bin" / "torchrun").exists():  # torch's console script lives beside the machine's python
        (VENV / "bin" / "torchrun").write_text(f"#!{python}\n{TORCHRUN}")
        (VENV / "bin" / "torchrun").chmod(0o755)
    print(
        f"bench/gpu_check.py: installed {folder.name}/ offline into {VENV} in {time.monotonic() - t0:.0f} s", flush=True
    )
    os.execve(
        str(python), [str(python), *argv], os.environ | {"PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    )
