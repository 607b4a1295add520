"""Torch-side modules of the model families (hwsweep/families.py maps names to them)."""
