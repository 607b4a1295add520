"""The SLURM side: what the scheduler's nodes have (sinfo), `hwsweep resources` and
`hwsweep profile install`. Imports hwsweep.contracts and hwsweep.plan."""
