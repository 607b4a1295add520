"""The folder hwsweep puts first on a command's PYTHONPATH: its sitecustomize.py watches what the
command's Python processes train (hwsweep.run.observe reads what it writes)."""
