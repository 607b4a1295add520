"""Debian packages a test needs (SLURM, Chromium), installed with apt-get when missing and root."""

import os
import subprocess


def install(packages: list[str], what: str) -> None:
    """apt-get install `packages`; RuntimeError naming the command when this is not root."""
    if os.geteuid() != 0:
        raise RuntimeError(f"{what} is not installed and this is not root: apt-get install {' '.join(packages)}")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.STDOUT}
    subprocess.run(["apt-get", "update", "-qq"], check=True, **quiet)
    # Without what the packages only recommend (SLURM's database and GPU plugins, Chromium's sound and desktop
    # services): both installs took 18-19 s with them, 11-12 s without on an idle 2-core machine (2026-11-27).
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages], check=True,
                   env=os.environ | {"DEBIAN_FRONTEND": "noninteractive"}, **quiet)  # fmt: skip
