"""torchrun's agent, torch's own (torch.distributed.run), started with the cyclic garbage collector held through its
imports; a Python module it starts with `--start-method fork` is forked from the agent instead of started anew.

    python -m hwsweep.run.torchrun --standalone --nproc_per_node 2 -m hwsweep.run.tether python -u -m MODULE ...
    python -m hwsweep.run.torchrun --standalone --nproc_per_node 2 --start-method fork -m hwsweep.run.train spec.json

The agent is an interpreter that imports torch and then lives as long as its workers. Importing torch makes
millions of objects that stay to the end; the collector walks them again and again as they come, and once more
as the agent exits: 0.5-0.6 CPU-s of a 2.2-2.9 CPU-s agent (docs/history/test-suite.md, 13th round). Held here
as the trainer holds it (hwsweep.run.startup), and what the imports made frozen, so later passes leave it out.

Forked workers. torchrun starts a script or module as a new interpreter per worker, each importing torch, and
TorchDynamo at its first optimizer step, again: about 3 CPU-s a worker before its first step (15th round,
docs/history/test-suite.md). torchrun's own agent forks workers when its entry point is a function (`--start-method`
is the start method of such workers); with `--start-method fork` and `-m MODULE`, this agent imports the module
once (and what its workers will import besides: TorchDynamo, unless the module says otherwise, `fork_imports`),
then each worker is forked from it and runs the module as `__main__`, as `python -u -m MODULE ARGS` would. So the
module's top level, run in the agent too, only imports and defines (its work is under `if __name__ ==
"__main__"`, as in hwsweep.run.train), and touches no device: a CUDA context does not survive a fork. Where the
imports loaded the CUDA driver all the same, each worker is started anew. A forked worker is what `python -m
hwsweep.run.tether` makes of a started one: it dies with the agent (SIGKILL) and catches the stop signals the
agent ignores from its first moment (hwsweep.run.stops); it is named hwsweep.run.tether.WORKER_NAME and its local rank (its command line is the agent's),
and its startup counts from the agent's start (hwsweep.run.startup.began_with).
"""

from __future__ import annotations

import importlib
import io
import os
import re
import runpy
import signal
import sys
import traceback
import warnings
import uuid

from hwsweep.run import startup, stops, tether

held = startup.hold_collection(__name__)
from torch.distributed.elastic.multiprocessing.errors import record  # noqa: E402
from torch.distributed.launcher.api import elastic_launch  # noqa: E402
from torch.distributed.run import config_from_args, parse_args, run  # noqa: E402

startup.resume_collection(held)


def forked_worker(*argv: str) -> None:
    """A worker's whole life in the process forked from the agent: `argv` is torchrun's `-u -m MODULE ARGS`."""
    agent = os.getppid()
    tether.die_with_parent(signal.SIGKILL, agent)  # over torch's own tether (SIGINT): the agent ignores SIGINT
    for sig in signal.valid_signals():  # as a new interpreter starts: no handler of the agent's, none ignored
        handler = signal.getsignal(sig)
        if sig in tether.AGENT_IGNORES or (callable(handler) and handler is not signal.default_int_handler):
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    stops.catch()  # but a stop signal, from now on a preemption at any phase (one before: the launcher's request)
    sys.stdout, sys.stderr = (io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), stream.encoding, stream.errors,
                                               write_through=True)  # python -u: nothing held back
                              for fd, stream in ((1, sys.stdout), (2, sys.stderr)))  # fmt: skip
    startup.began_with(agent)
    tether.name_process(f"{tether.WORKER_NAME}{os.environ.get('LOCAL_RANK', '')}")
    module, args = argv[argv.index("-m") + 1], argv[argv.index("-m") + 2:]
    sys.argv = [module, *args]
    # The agent imported the module before forking (fork_imports): runpy runs it afresh as __main__ all the same,
    # and its warning that the module is already in sys.modules says nothing about this run (it filled train.log).
    warnings.filterwarnings("ignore", message=rf"'{re.escape(module)}' found in sys\.modules after import of package",
                            category=RuntimeWarning)  # fmt: skip
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except KeyboardInterrupt:  # as CPython ends on one: killed by SIGINT (torch's wrapper would call it success)
        traceback.print_exc()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except Exception:  # the traceback where a started worker prints it, status 1
        traceback.print_exc()
        sys.stderr.flush()
        sys.exit(1)


def fork_imports(module, argv: list[str]) -> list[str]:
    """What the workers of `module` (run with `argv`) will import besides it, as the module says
    (`module.fork_imports(argv)`, hwsweep.run.train's); else TorchDynamo, which a torch optimizer's step imports
    (1-1.5 CPU-s). Where the module cannot say, the workers will: TorchDynamo, and they start as they would."""
    said = getattr(module, "fork_imports", None)
    try:
        return list(said(list(argv))) if callable(said) else ["torch._dynamo"]
    except Exception:  # noqa: BLE001 - e.g. a spec that cannot be read: the workers say so in their own words
        return ["torch._dynamo"]


def device_driver_loaded(maps: str = "/proc/self/maps") -> bool:
    """Whether this process has loaded the CUDA driver (libcuda: any CUDA call, torch.cuda.is_available() among
    them, loads it; torch's own lazy initialisation is later still). Where /proc does not say, assume it has."""
    try:
        with open(maps) as lines:
            return any("libcuda.so" in line for line in lines)
    except OSError:
        return True


def started_anew(args):
    """torchrun's arguments with the module started as a new, tethered interpreter per worker (the command
    hwsweep.run.launch gives a user's module), where `args` asked for it forked."""
    _, args.training_script, *args.training_script_args = tether.tethered(
        [sys.executable, "-u", "-m", args.training_script, *args.training_script_args])
    return args


@record
def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.start_method != "fork" or not args.module or args.no_python:
        return run(args)  # torchrun as ever: each worker a new interpreter
    held = startup.hold_collection(__name__)
    module = importlib.import_module(args.training_script)  # the module's imports, once, for every worker
    for name in fork_imports(module, args.training_script_args):
        importlib.import_module(name)
    startup.resume_collection(held)
    if device_driver_loaded():  # a CUDA context does not survive a fork: each worker a new interpreter instead
        print(f"hwsweep.run.torchrun: importing {args.training_script} loaded the CUDA driver, which a forked worker "
              "cannot use; starting each worker anew", file=sys.stderr, flush=True)  # fmt: skip
        return run(started_anew(args))
    if args.standalone:  # what torchrun's --standalone means: a rendezvous on this host, on a free port
        args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", "localhost:0", str(uuid.uuid4())
    config, _, worker_argv = config_from_args(args)
    stops.hold("agent")  # tests: a stop while the agent starts (its workers stop at their first phase)
    elastic_launch(config=config, entrypoint=forked_worker)(*worker_argv)


if __name__ == "__main__":
    sys.exit(main())
