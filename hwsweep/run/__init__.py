"""One run: the launcher, torchrun as it starts it and the process tether, the runner of a user's command, the
runtime API and the built-in trainer on it, the evaluator, checkpoints, the world-size-independent data order,
gradient reduction, the device switch, seeding and provenance, startup timing, the memory probe. Imports
hwsweep.contracts and hwsweep.models, never plan, analysis or report: a run reads its spec.json only."""
