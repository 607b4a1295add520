from common import *

d = {"lr": 0.1}
try:
    d["learning_rate"]
except KeyError:
    raise ValueError("config has no learning_rate (did you mean lr?)")
