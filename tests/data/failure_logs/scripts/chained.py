import json

from common import *


def load(path):
    try:
        return json.loads(open(path).read())
    except FileNotFoundError as e:
        raise RuntimeError(f"cannot read the dataset config {path}") from e
load("/nonexistent/dataset.json")
