from common import *


def check(loss, step):
    if loss != loss or loss > 1e3:
        verdict = f"loss is nan at step {step}: lower recipe.optimizer.lr"
        raise FloatingPointError(verdict)
check(float("nan"), 4)
