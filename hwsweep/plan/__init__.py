"""Before anything runs: the config validated and resolved into a matrix of runs, each run's batch plan,
where the jobs can run, the plan table and the cost estimate. Torch-free at import (the Snakefile and
`hwsweep plan` import it at parse time). Imports hwsweep.contracts and hwsweep.models."""
