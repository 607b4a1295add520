"""The runtime API, under the name users' scripts import (`from hwsweep import runtime`).

It lives in hwsweep.run.runtime with the rest of what runs a training process; this name is the
same module object, not a copy, so `hwsweep.runtime.init is hwsweep.run.runtime.init`."""

import sys

from hwsweep.run import runtime as _runtime

sys.modules[__name__] = _runtime
