"""hwsweep: seeds x hardware sweeps of a training recipe, planned and launched by a Snakemake workflow.

The folders follow the data: plan (config -> matrix -> spec.json) -> run (spec.json -> records) ->
analysis (records -> tables) -> report (tables -> pages and figures), with models beside plan and run,
cluster beside plan, and contracts (the types and files they pass) underneath all of them.
tests/package/test_architecture.py holds every module to its layer's imports."""
