"""The report's one vocabulary of verdicts (hwsweep.analysis.words.in_words) and its numbers for people."""

import math

import numpy as np

import pytest

from hwsweep.analysis import words

SPEED, COST = words.SPEED, words.COST


@pytest.mark.parametrize("estimate, low, high, said", [
    (1.57, 1.21, 2.04, "1.57× faster (95% CI 1.21–2.04)"),
    (0.5, 0.45, 0.55, "2× slower (95% CI 1.82–2.22)"),  # the interval of what the sentence says: 1/high–1/low
    (1.5, 0.82, 2.73, "no clear difference in speed (1.5× the baseline's speed, 95% CI 0.82–2.73)"),
    (1.0, 0.5, 2.0, "no clear difference in speed (1× the baseline's speed, 95% CI 0.5–2)"),  # never "1× faster"
    (0.9, 0.7, 1.0, "no clear difference in speed (0.9× the baseline's speed, 95% CI 0.7–1)"),  # 1 is inside
    (1.0004, 1.0001, 1.0007, "1.0004× faster (95% CI 1.0001–1.0007)"),  # digits enough to differ from 1
    (1.57, math.nan, math.nan, "no clear difference in speed (1.57× the baseline's speed, no CI: fewer than 2 seeds)"),
])  # fmt: skip
def test_speed_is_faster_or_slower_only_when_the_whole_interval_says_so(estimate, low, high, said):
    assert words.in_words(SPEED, estimate, low, high) == said


@pytest.mark.parametrize("estimate, low, high, start", [
    (1.3, 1.1, 1.5, "more expensive: 1.3× the baseline's cost per run (95% CI 1.1–1.5)"),
    (0.8, 0.7, 0.9, "cheaper: 0.8× the baseline's cost per run (95% CI 0.7–0.9)"),
    (1.1, 0.9, 1.3, "no clear difference in cost (1.1× the baseline's per run, 95% CI 0.9–1.3)"),
])  # fmt: skip
def test_cost_is_cheaper_or_dearer_only_when_the_whole_interval_says_so(estimate, low, high, start):
    assert words.in_words(COST, estimate, low, high) == start


@pytest.mark.parametrize("goal, low, high, way", [
    ("max", 0.001, 0.005, "better"), ("max", -0.005, -0.001, "worse"), ("max", -0.001, 0.005, None),
    ("min", 0.001, 0.005, "worse"), ("min", -0.005, -0.001, "better"), ("min", -0.005, 0.001, None),
])  # fmt: skip
def test_a_metric_is_better_or_worse_by_its_goal_only_when_the_interval_excludes_0(goal, low, high, way):
    said = words.in_words("token_accuracy", (low + high) / 2, low, high, 0.9, goal, 100.0)
    if way is None:
        assert said.startswith("no clear difference in token accuracy (") and "better" not in said and "worse" not in said
    else:
        assert said.startswith(f"{way} token accuracy: ")
    assert f"90% CI {low * 100:+.3g} to {high * 100:+.3g} points)" in said


@pytest.mark.parametrize("value, others, text", [
    (0.04, (), "$0.04"), (0.00031, (), "$0.00031"), (1234.5, (), "$1,234.50"),
    (0.0175, (0.02,), "$0.018"), (0.02, (0.0175,), "$0.020"),  # different costs never read equal
    (0.0025, (), "$0.0025"), (12.0, (), "$12.00"),
])  # fmt: skip
def test_money_keeps_different_numbers_different_and_never_uses_exponents(value, others, text):
    assert words.money(value, "USD", *others) == text
    assert "e" not in words.money(value * 1e-6, "USD")


def test_money_pairs_print_different_where_the_values_differ():
    for a, b in ((0.0175, 0.0200), (0.1049, 0.1051), (2.004, 2.001), (1234.561, 1234.564)):
        assert words.money(a, "USD", b) != words.money(b, "USD", a), (a, b)
    assert words.money(0.1, "EUR") == "€0.10" and words.money(3.0, "CHF") == "3.00 CHF"


@pytest.mark.parametrize("seconds, text", [
    (36100, "10 h 2 min"), (7200, "2 h"), (185, "3 min 5 s"), (120, "2 min"), (4.23, "4.2 s"), (42.4, "42 s"),
    (0.31, "0.31 s"), (-185, "-3 min 5 s"), (math.nan, "n/a"),
])  # fmt: skip
def test_durations_in_hours_minutes_and_seconds(seconds, text):
    assert words.duration(seconds) == text


def test_figures_add_digits_only_where_numbers_would_read_equal():
    assert words.figures(1.5714, 1.21, 2.04) == ["1.57", "1.21", "2.04"]
    assert words.figures(1.0004, 1.0) == ["1.0004", "1"]
    assert words.figures(2.0, 2.0) == ["2", "2"]


@pytest.mark.parametrize("call, expected", [
    (lambda: words.percent(0.005), "0.5%"), (lambda: words.percent(0.125), "12.5%"), (lambda: words.percent(0.1), "10%"),
    (lambda: words.percent(0.995, signed=True), "+99.5%"), (lambda: words.percent(0.9996), "99.96%"),
    (lambda: words.percent(0.00004), "0.004%"), (lambda: words.change(1.995), "+99.5%"),
    (lambda: words.change(0.005), "-99.5%"), (lambda: words.change(0.997), "-0.3%"), (lambda: words.change(1.28), "+28%"),
    (lambda: words.change(1 - 4e-16), "+0%"), (lambda: words.times(1590.4), "1,590×"),
    (lambda: words.times(1.0004, 1.0), "1.0004×"), (lambda: words.plain(0.00031), "0.00031"),
    (lambda: words.plain(1.59e7), "15,900,000"), (lambda: words.plain(-0.0004567, signed=True), "-0.000457"),
    (lambda: words.duration(9.5, 11.6) + " against " + words.duration(11.6, 9.5), "9.5 s against 11.6 s"),
    (lambda: words.duration(12.0), "12 s"), (lambda: words.figures(1590.0, 1600.0)[0], "1,590"),
    (lambda: words.flops(1.59e12), "1.59 TFLOP"), (lambda: words.flops(5.12e11), "512 GFLOP"),
    (lambda: words.flops(8.1e11, 1.59e12), "0.81 TFLOP"), (lambda: words.flops(1.0004e15, 1e15), "1.0004 PFLOP"),
    (lambda: words.flops(12.0), "12 FLOP"), (lambda: words.amount(12345.0), "12,300"),
    (lambda: words.amount(0.00001234, 100, signed=True), "+0.00123 points"),
])  # fmt: skip
def test_numbers_at_their_own_precision_never_in_exponent_notation(call, expected):
    assert call() == expected


def test_durations_read_against_each_other_keep_their_ratio():
    """'9.5 s against 12 s' reads 1.26× for 1.22×: over many pairs the printed ratio is within 1% of the true one."""
    rng = np.random.default_rng(5)
    for a, b in rng.uniform(0.05, 59, (500, 2)):
        shown = [float(words.duration(x, y).removesuffix(" s")) for x, y in ((a, b), (b, a))]
        assert abs(shown[0] / shown[1] / (a / b) - 1) <= words.DURATION_TOLERANCE, (a, b, shown)
        assert "e" not in words.duration(a, b)


def test_no_exponent_notation_in_flops_counts_and_amounts_over_many_magnitudes():
    rng = np.random.default_rng(3)
    for x in 10 ** rng.uniform(-6, 20, 300):
        for text in (words.flops(x), words.amount(x), words.amount(-x, 100, signed=True), words.plain(x)):
            assert "e+" not in text and "e-" not in text, (x, text)
