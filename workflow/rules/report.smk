# Bookkeeping of the report only (functions, no rules): which targets exist while a report is
# built, and the landing page. Paths and run inputs come from common.smk.
from hwsweep.analysis.words import amount
from hwsweep.report import current, landing, method

# `snakemake --report report.html` (not --report-after-run, which runs first): the report shows
# what exists; a suite without tables (a failed or unfinished run) is left out of the DAG and
# its landing-page entry says which runs failed and why.
REPORTING = (
    any(a == "--report" or a.startswith("--report=") for a in sys.argv)
    and "--report-after-run" not in sys.argv
)
TABLE_PAGES = ["comparison", "equivalence", "speedup", "variants"]
# The captions' folder beside this file, wherever the workflow is (a clone, or inside the installed package when
# a Snakefile elsewhere includes it); workflow.basedir is the folder of the Snakefile snakemake was given.
REPORT_DIR = (
    Path(workflow.current_basedir.get_path_or_uri(secret_free=True)).parent / "report"
)


def suite_pages(suite):
    return [f"results/{suite}/tables/{name}.html" for name in TABLE_PAGES]


def suite_outputs(suite):
    return suite_targets(suite) + suite_pages(suite)


def suite_complete(suite):
    return all(Path(p).exists() for p in suite_outputs(suite))


def all_inputs():
    """Every target; while a report is built, only what exists and is current (see REPORTING)."""
    if not REPORTING:
        return all_targets() + [p for s in MATRIX.suites for p in suite_pages(s)]
    # A suite whose tables are out of date is left out like one without tables (the landing page says why).
    done = [s for s in MATRIX.suites if suite_complete(s) and s not in stale_suites()]
    targets = [p for s in done for p in suite_outputs(s)]
    combined = [t for t in all_targets() if t.count("/") == 1]  # results/<table>
    missing = len(done) < len(MATRIX.suites)
    if (
        missing
    ):  # the combined tables would hold the missing suites: only the plan stays
        combined = [t for t in combined if t.endswith("plan.tsv")]
    # An out-of-date combined table is left out with its job's outputs (the landing page says why).
    stale = [str(o) for rule in stale_combined() for o in getattr(rules, rule).output]
    combined = [t for t in combined if t not in stale]
    pages = {
        "results/plan.tsv": "results/plan.html",
        "results/comparison.csv": "results/comparison.html",
        "results/compare.csv": "results/compare.html",
    }
    # A combined table is reported when it and its page exist (one job writes both).
    return targets + [
        t for t in combined if Path(t).exists() and Path(pages.get(t, t)).exists()
    ]


def made_from(rule):
    """The files a rule without wildcards is made from."""
    items = getattr(rules, rule).input
    return [str(p) for i in items for p in ([i] if isinstance(i, str) else i(None))]


STALE = {}


def stale_suites():
    """While a report is built: suite -> why its tables are out of date (hwsweep.report.current), said on stderr."""
    if "suites" not in STALE:
        STALE["suites"] = {}
        for suite in MATRIX.suites:
            stamps = suite_stamps(suite)  # common.smk
            why = current.why_suite_stale(MATRIX, suite, stamps=stamps)
            if why:
                STALE["suites"][suite] = why
                print(f"hwsweep warning: {landing.left_out(why)}", file=sys.stderr)
    return STALE["suites"]


def stale_combined():
    """While a report is built: rule -> (its table, why it is out of date) for each
    of plan, combine and compare_suites whose table is (hwsweep.report.current),
    said on stderr. A table made from an out-of-date suite's table is out of date too.
    """
    if "found" not in STALE:
        outdated = [p for s in stale_suites() for p in suite_outputs(s)]
        checks = {
            "plan": ("results/plan.tsv", dict(text=plan_table(None))),
            "combine": (
                "results/comparison.csv",
                dict(column="suite", names=MATRIX.suites),
            ),
            "compare_suites": (
                "results/compare.csv",
                dict(column="comparison", names=MATRIX.compare, every=False),
            ),
        }
        STALE["found"] = {}
        for rule, (table, check) in checks.items():
            why = current.why_stale(table, made_from(rule), outdated=outdated, **check)
            if why:
                STALE["found"][rule] = (table, why)
                print(f"hwsweep warning: {landing.left_out(why)}", file=sys.stderr)
    return STALE["found"]


def report_text():
    """The landing page: while a report is built, the headline of every suite (or why it has
    none) computed from the tables, then workflow.rst (its method text as the records have it: the settings a
    script did not receive); otherwise workflow.rst alone."""
    template = REPORT_DIR / "workflow.rst"
    if not REPORTING:
        return str(template)
    template = method.template(
        template, MATRIX, Path(".snakemake", "hwsweep", "workflow.rst").resolve()
    )
    descriptions = {
        name: (suite or {}).get("description", "")
        for name, suite in config.get("suites", {}).items()
    }
    complete = {s: suite_complete(s) for s in MATRIX.suites}
    path = Path(".snakemake", "hwsweep", "landing.rst").resolve()
    stale = dict(stale_combined().values())
    return str(
        landing.write(
            MATRIX, complete, template, path, descriptions, stale, stale_suites()
        )
    )


def metric_about(m):
    """One declared metric in words, for its figure's caption (a sentence, not the metric's dict)."""
    points = (
        SCALES.get(m.name, 1.0) == 100.0
    )  # SCALES: aggregate.smk, included after this file
    text = f"{m.name}" + (f" ({m.description})" if m.description else "")
    text += f"; {'higher' if m.goal == 'max' else 'lower'} is better"
    text += ", in percentage points." if points else "."
    if m.margin is None:
        return f"{text} This metric has no margin: it is reported, not compared."
    margin = amount(m.margin, SCALES.get(m.name, 1.0))
    role = (
        ""
        if m.primary
        else " (a secondary metric: reported, not part of the overall verdict)"
    )
    return (
        text
        + f" Hardware counts as equivalent to the baseline when the difference is shown to lie"
        f" within ±{margin}{role}."
    )


def metric_caption(metric):
    """The caption file of one metric's figure: metric.rst with the metric in words. The figures are one job's
    outputs (plot_suite), so the caption cannot take the metric from a wildcard; a report writes one small file
    per metric, the words as a Jinja string (json: any description is one literal).
    """
    path = Path(".snakemake", "hwsweep", "captions", f"metric_{metric.name}.rst")
    # --report and --report-after-run read it; any other run only needs its name.
    if any(a.startswith("--report") for a in sys.argv):
        from hwsweep.contracts import io

        text = (REPORT_DIR / "metric.rst").read_text(encoding="utf-8")
        about = json.dumps(metric_about(metric))
        io.write_text(path, f"{{% set about = {about} -%}}\n{text}")
    return str(path.resolve())
