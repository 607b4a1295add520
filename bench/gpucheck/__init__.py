"""The sections of bench/gpu_check.py (issue 39), one module each, and what they share."""
