"""The model families: the torch-free registry (families: metrics, memory footprint, the module of each
family), the families themselves (transformer, hrm, deep_transformer), the puzzle tasks with pass@k,
and the FLOPs counted from a real model. Imports hwsweep.contracts only."""
