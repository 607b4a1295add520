"""Synthetic pages (issue 32): many random suites through the project's own tables and sentences. No sentence
claims a direction (faster, slower, sooner, later, cheaper, more expensive, better, worse, fewer or more steps, the
same steps, a shift inside the margin) that its interval, as printed, does not support; identical repeats are
inconclusive, with stats.REPEATS, on every page: headline, comparison, equivalence, speedup, variants, time to
target. Pure tables (no runs): fast enough for every test run."""

import math
import re

import numpy as np
import pandas as pd
import pytest

from hwsweep.analysis import diagnose, stats, variants
from hwsweep.analysis import target as tt
from hwsweep.report import headline, tables, targets

METRICS = ("token_accuracy", "final_loss")
SETTINGS = stats.Settings(metrics=METRICS, margins={"token_accuracy": 0.005, "final_loss": 0.01},
                          primary=METRICS, variant_primary=METRICS, goals={"final_loss": "min"},
                          scales={"token_accuracy": 100.0}, bounds={"token_accuracy": (0.0, 1.0)})  # fmt: skip
SUITES = 40
NUMBER = r"([+-]?\d[\d.]*(?:e[+-]?\d+)?)"


def suite(rng, repeats: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, time-to-target rows) of one random suite: 2 variants x 2-3 hardware x 3-6 seeds, effects from none
    to large, spreads from none (repeats: every seed the same numbers) to wide."""
    hardware = ["cpu1", "cpu2", "cpu4"][: rng.integers(2, 4)]
    seeds = range(rng.integers(3, 7))
    spread = 0.0 if repeats else rng.choice([0.0005, 0.002, 0.01])
    grid = rng.choice([1, 10, 50, 330])  # evaluations every 0.1% to 33% of the median steps
    budget = rng.choice([1200, 5000])
    seed_effect = {s: rng.normal(0, 0.003) * (not repeats) for s in seeds}
    runs, ttt = [], []
    for v, variant in enumerate(("a", "b")):
        for h, hw in enumerate(hardware):
            acc_shift, loss_shift = rng.choice([0, 0, 0.002, 0.01]) * h, rng.choice([0, 0.005, 0.03]) * h + 0.01 * v
            speed, steps_factor = rng.choice([1.0, 1.05, 2.0]) ** h, rng.choice([1.0, 1.1, 1.5]) ** h
            for s in seeds:
                noise = rng.normal(0, spread, 3) if spread else np.zeros(3)
                seconds = 100 / speed * math.exp(noise[2] * 10)
                runs.append(dict(suite="s", variant=variant, hardware=hw, seed=s, world_size=1 + h, gpu_type="cpu",
                                 train_seconds=seconds, samples_per_second=1000 / seconds, startup_seconds=1.0,
                                 eval_seconds=0.1, flops_per_step=1e9, steps=100,
                                 token_accuracy=min(1.0, 0.9 + acc_shift + seed_effect[s] + noise[0]),
                                 final_loss=0.3 - loss_shift + seed_effect[s] + noise[1]))  # fmt: skip
                true = 1000 * steps_factor * math.exp(noise[0] * 20 + seed_effect[s] * 20)
                high = math.ceil(true / grid) * grid
                reached = high <= budget
                high = high if reached else budget
                low = high - grid if reached else high
                step_time = 0.1 / speed * math.exp(noise[2])
                ttt.append(dict(suite="s", variant=variant, hardware=hw, seed=s, metric="token_accuracy",
                                target=0.9, goal="max", reached=reached, steps_to_target=float(high),
                                steps_to_target_low=float(max(low, 0)), eval_interval=grid,
                                time_to_target_seconds=1 + high * step_time,
                                time_to_target_low_seconds=1 + max(low, 1) * step_time,
                                cost_to_target=(1 + high * step_time) * (1 + h) / 3600,
                                price_per_device_hour=1.0, world_size=1 + h, currency="USD",
                                curve_digest=f"{variant}{hw}" if repeats else f"{variant}{hw}{s}"))  # fmt: skip
    return pd.DataFrame(runs), pd.DataFrame(ttt)


def pages(runs: pd.DataFrame, ttt: pd.DataFrame) -> dict[str, str]:
    """Every page's text (sentences and HTML tables) of one suite, made as aggregate.aggregate makes them."""
    summary = stats.seed_summary(runs, SETTINGS)
    equivalence = stats.equivalence(runs, "cpu1", SETTINGS)
    diagnosis = diagnose.diagnose(runs, equivalence, "cpu1")
    equivalence = equivalence.merge(diagnosis[stats.CELL + ["diagnosis"]], on=stats.CELL, how="left")
    speed = stats.speedup(runs, "cpu1", SETTINGS, {"cpu1": 1.0, "cpu2": 1.0, "cpu4": 1.0})
    comparison = stats.comparison(summary, equivalence, speed, "cpu1", SETTINGS)
    comparison = comparison.merge(diagnosis[stats.CELL + ["diagnosis"]], on=stats.CELL, how="left")
    contrast = variants.variants(runs, "a", SETTINGS)
    target = tt.compare(ttt, "cpu1", {})
    said = headline.suite_headline(comparison, equivalence)
    return {
        "headline": "\n".join(s for v in said.values() for s in v),
        "comparison": tables.comparison_page(comparison, list(METRICS), SETTINGS.scales),
        "equivalence": tables.equivalence_page(equivalence),
        "speedup": tables.speedup_page(speed),
        "variants": "\n".join(headline.variant_sentences(contrast)) + tables.variants_page(contrast, "variants"),
        "time to target": "\n".join(s for v in targets.sentences(target).values() for s in v)
        + targets.page_html(target),
    }


def numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(NUMBER, text)]


def unsupported(text: str) -> list[str]:
    """The claims in `text` whose printed interval does not lie wholly on the claimed side."""
    bad = []
    for way, low, high in re.findall(r"× (faster|slower|sooner|later) \(95% CI ([\d.]+)–([\d.]+)\)", text):
        if not float(low) > 1 or not float(high) > 1:  # a slower one is printed as its inverse, above 1 too
            bad.append(f"{way} {low}–{high}")
    for way, low, high in re.findall(r"(cheaper|more expensive|fewer steps|more steps): [\d.]+× the baseline's[^(]*"
                                     r"\(95% CI ([\d.]+)–([\d.]+)\)", text):  # fmt: skip
        above = way in ("more expensive", "more steps")
        if not (float(low) > 1 if above else float(high) < 1):
            bad.append(f"{way} {low}–{high}")
    for way, name, low, high in re.findall(r"(better|worse) (token accuracy|final loss)[^(]*\((?:95% CI|90% interval) "
                                           + NUMBER + " to " + NUMBER, text):  # fmt: skip
        up = (way == "better") == (name == "token accuracy")  # the goal: up for accuracy, down for loss
        if not (float(low) > 0 if up else float(high) < 0):
            bad.append(f"{way} {name} {low} to {high}")
    for low, high in re.findall(r"the same within ±10% \(90% interval ([\d.]+)–([\d.]+)×", text):
        if not (1 / 1.1 < float(low) and float(high) < 1.1):
            bad.append(f"same steps {low}–{high}")
    for margin, low, high in re.findall(r"shifted inside ±" + NUMBER + r"[^(]*\(90% interval " + NUMBER + " to "
                                        + NUMBER, text):  # fmt: skip
        if not (abs(float(low)) < float(margin) and abs(float(high)) < float(margin)):
            bad.append(f"shifted {low} to {high} inside {margin}")
    margins = {"token accuracy": 0.5, "final loss": 0.01}  # SETTINGS' margins as printed (points for the share)
    for intervals in re.findall(r"\*\*equivalent\*\* to [^(]*\([^;]*;[^;]*; 90% intervals?: ([^)]*)\)", text):
        for name, low, high in re.findall(r"(token accuracy|final loss) " + NUMBER + " to " + NUMBER, intervals):
            if not (abs(float(low)) < margins[name] and abs(float(high)) < margins[name]):
                bad.append(f"equivalent {name} {low} to {high}")
    for low, high, margin in re.findall(r"equivalent \(90% interval " + NUMBER + " to " + NUMBER + r"[^,]*, inside ±"
                                        + NUMBER, text):  # fmt: skip
        if not (abs(float(low)) < float(margin) and abs(float(high)) < float(margin)):
            bad.append(f"equivalent {low} to {high} inside {margin}")
    for way, p in re.findall(r"Converges (faster|slower)\*\* than [^(]*\(RCP-style check: [^;]*?p = " + NUMBER, text):
        if not float(p) < 0.05:
            bad.append(f"converges {way} at p = {p}")
    if "p = 0 " in text or "p = 0)" in text or "p = 0," in text:
        bad.append("p = 0")
    return bad


def test_random_suites_never_claim_a_direction_their_interval_does_not_support():
    rng = np.random.default_rng(32)
    claims = 0
    for _ in range(SUITES):
        for name, text in pages(*suite(rng, repeats=False)).items():
            assert unsupported(text) == [], (name, text)
            claims += len(re.findall(r"faster|slower|sooner|cheaper|more expensive|better|worse|the same within|"
                                     r"equivalent \(90%|90% intervals?:", text))  # fmt: skip
    assert claims > 10 * SUITES  # the pages did make claims to check


@pytest.mark.parametrize("case", range(8))
def test_identical_repeats_are_inconclusive_on_every_page(case):
    """A script that ignores the seed: every seed the same numbers (and the same curve) on every hardware."""
    text = pages(*suite(np.random.default_rng(100 + case), repeats=True))
    for name, page in text.items():
        page = re.sub(r'<p class="note">.*?</p>', "", page)  # a page's method note names every word it may use
        assert stats.REPEATS in page or stats.AT_BOUND in page, name
        for claim in ("**equivalent**", "**differs**", "**better**", "**worse**", "faster", "slower", "sooner",
                      "the same within", "Converges", "cheaper", "more expensive", "try reproducibility"):  # fmt: skip
            assert claim not in page, (name, claim)


def test_the_checker_catches_what_it_claims_to():
    """unsupported() itself: each kind of claim against an interval that does not support it is caught."""
    wrong = ["1.2× faster (95% CI 0.9–1.5)", "cheaper: 0.9× the baseline's cost per run (95% CI 0.8–1.1)",
             "better token accuracy: +0.3 points (95% CI -0.1 to +0.7 points)",
             "the same within ±10% (90% interval 0.95–1.12×", "shifted inside ±0.5 points: better token accuracy "
             "by +0.44 points (90% interval +0.38 to +0.515 points", "(RCP-style check: p = 0, t-test)",
             "⚠ **Converges slower** than cpu1's seeds (RCP-style check: median 202 against 100 steps, p = 0.07",
             "cpu2 is **equivalent** to cpu1 on final loss (paired TOST; ±0.01; 90% interval: final loss -0.002 to "
             "+0.011)", "equivalent (90% interval -0.3 to +0.52 points, inside ±0.5 points)"]  # fmt: skip
    assert [len(unsupported(w)) for w in wrong] == [1] * len(wrong)
