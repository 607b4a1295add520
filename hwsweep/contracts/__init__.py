"""The ground every layer stands on: the types and files that pass between them (the run spec and its
layout, the records a run leaves, the metric declaration, the recipe, the hardware entry and batch plan,
the command contract, the divergence guard's rule, the device catalog, host facts, atomic io, the
measured-memory cache). Torch-free; imports nothing of hwsweep outside this folder."""
