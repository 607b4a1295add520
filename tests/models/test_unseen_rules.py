"""The unseen puzzles ask new rules only: no unseen puzzle's rule (kind and parameters) is a trained puzzle's, nor,
applied to random grids, the same function as a trained rule or as any augmented view of one (a dihedral transform of
the canvas and a colour permutation, on input and output alike). Checked on the shipped configs' generalization
suites, by comparing rules and by applying them; the comparison is shown to find a coincidence where there is one."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from conftest import REPO

from hwsweep.models import arc_rules, puzzle_tasks

SIZES = range(3, 7)
INVERSE = (0, 3, 2, 1, 4, 5, 6, 7)  # the dihedral transform undoing d: quarter turns the other way, flips themselves


def _grids() -> dict[int, np.ndarray]:
    rng = np.random.default_rng(70)  # grids of the test's own, not the tables'
    return {s: arc_rules.random_grids(rng, 64, s) for s in SIZES}


GRIDS = _grids()


def _signature(fn) -> bytes:
    """What a function of grids does to the test's random grids of every size."""
    return b"".join(np.ascontiguousarray(fn(g)).astype(np.int8).tobytes() for g in GRIDS.values())


def _viewed(rule, d: int, colours: np.ndarray):
    """The rule as a view sees it: x -> colours[D(rule(D^-1(colours^-1[x])))]."""
    back = np.argsort(colours)
    return lambda g: colours[arc_rules.dihedral(arc_rules.apply_rule(arc_rules.dihedral(back[g], INVERSE[d]), *rule), d)]


def _colour_permutations(count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(7)  # black (0) stays black, as in the views (arc_spec's colours)
    return [np.arange(10)] + [np.concatenate(([0], rng.permutation(9) + 1)) for _ in range(count)]


def _view_signatures(rules, colours: int) -> set[bytes]:
    return {_signature(_viewed(r, d, c)) for r in set(rules) for d in range(8) for c in _colour_permutations(colours)}


def _cycle_type(permutation: tuple) -> tuple:
    """The sorted cycle lengths of a permutation of 1..9 given by its images (the test's own count)."""
    left, lengths = set(range(1, 10)), []
    while left:
        start = n = min(left)
        length = 0
        while n in left:
            left.remove(n)
            n = permutation[n - 1]
            length += 1
        lengths.append(length)
    return tuple(sorted(lengths))


def _generalization_task(path: str) -> SimpleNamespace:
    config = yaml.safe_load((REPO / path).read_text())
    return SimpleNamespace(**config["suites"]["puzzle_embeddings"]["overrides"]["task"])


@pytest.mark.parametrize("path", ["config/hrm_cpu.yaml", "config/hrm.yaml"])
def test_no_unseen_puzzle_asks_a_trained_rule_nor_a_view_of_one(path):
    task = _generalization_task(path)
    trained, unseen = puzzle_tasks.rules(task)
    assert len(trained) == task.num_puzzles and len(unseen) == task.unseen_puzzles > 0
    assert not set(unseen) & set(trained)  # by rule: kind and parameters
    assert {kind for kind, _ in unseen} == set(arc_rules.UNSEEN_KINDS)  # every kind the split can hold
    # by function, on random grids: the trained rules as every dihedral view and some colour views see them
    assert not {_signature(lambda g, r=r: arc_rules.apply_rule(g, *r)) for r in set(unseen)} & _view_signatures(
        trained, 5)  # fmt: skip
    # a colour view conjugates a colour map by any of 9! permutations: two maps are views of each other exactly when
    # their cycle types agree, so the unseen maps' cycle types are none of the trained maps'
    maps = [{_cycle_type(p) for kind, p in rules if kind == "colour_map"} for rules in (trained, unseen)]
    assert maps[0] and maps[1] and not maps[0] & maps[1]
    # rotate, reflect and translate commute with a colour permutation, so the dihedral views above are all their
    # views (recolour_objects is trained only)
    for rule in {r for r in trained + unseen if r[0] not in ("colour_map", "recolour_objects")}:
        for colours in _colour_permutations(3)[1:]:
            assert _signature(lambda g: colours[arc_rules.apply_rule(g, *rule)]) == _signature(
                lambda g: arc_rules.apply_rule(colours[g], *rule))  # fmt: skip


def test_the_comparison_finds_a_rule_a_view_makes_and_the_old_mixed_split():
    quarter, three_quarters = ("rotate", (1,)), ("rotate", (3,))
    assert _signature(lambda g: arc_rules.apply_rule(g, *three_quarters)) in _view_signatures([quarter], 0)
    assert _signature(lambda g: arc_rules.apply_rule(g, *quarter)) not in _view_signatures([("rotate", (2,))], 2)
    # before issue 70 the unseen puzzles were the whole space's puzzles after the trained ones: the CPU suite's
    # 16 unseen of 32 trained shared rules with them
    mixed = arc_rules.draw(48, 0)
    assert set(mixed[32:]) & set(mixed[:32])


def test_each_part_draws_from_its_side_of_the_split_and_a_task_without_unseen_from_the_whole_space():
    for part, side in (("trained", False), ("unseen", True)):
        rules = arc_rules.draw(200, 3, part)
        assert all(arc_rules.is_unseen(*r) == side for r in rules)
    assert Counter(kind for kind, _ in arc_rules.draw(200, 3, "unseen")) == {k: 50 for k in arc_rules.UNSEEN_KINDS}
    plain = SimpleNamespace(num_puzzles=40, unseen_puzzles=0)
    trained, unseen = puzzle_tasks.rules(plain)
    assert trained == arc_rules.draw(40, 0) and unseen == []
    assert any(arc_rules.is_unseen(*r) for r in trained)  # the whole space: quarter turns and all
    with pytest.raises(ValueError, match="part 'seen'"):
        arc_rules.draw(4, 0, "seen")


def test_parity_counts_transpositions():
    assert arc_rules.parity(tuple(range(1, 10))) == 0
    assert arc_rules.parity((2, 1, 3, 4, 5, 6, 7, 8, 9)) == 1  # one swap
    assert arc_rules.parity((2, 3, 1, 4, 5, 6, 7, 8, 9)) == 0  # a 3-cycle: two swaps
