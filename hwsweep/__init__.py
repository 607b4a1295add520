"""hwsweep: seeds x hardware sweeps of a training recipe, planned and launched by a Snakemake workflow."""
