"""The benchmark suite: afa against dp_accounting, prv_accountant and autodp; writes benchmarks/RESULTS.md.

Run: ``bash benchmarks/run.sh`` (creates benchmarks/.venv with afa and the peers if missing, then runs this),
or ``cd benchmarks && PYTHONPATH=.. python run_all.py [--quick] [--budget SECONDS] [--output PATH]`` with
whatever peers are importable.

Every number is eps(delta) of a composition (``contenders.Term``), asked of each library through its public
API (``contenders.py``) in a fresh forked child process (``timing.run_isolated``): the child starts from the
parent's one-time warm-up (imports, afa's compiled templates) but builds everything else cold -- afa's
per-mechanism caches are cleared, a new accountant is composed -- and is killed after a time limit.  Times are
medians of REPEATS calls after a first one, or the first call alone when it took longer than SINGLE_SHOT
seconds.  References (``references.py``) are exact where an exact computation exists, otherwise afa's certified
PLD bracket or another stated engine.  A peer that is missing, refuses, crashes, returns inf/nan or times out is
recorded as such; a peer whose previous (larger-delta, or smaller) case failed or was too slow is skipped with
the reason; when the suite's time budget runs out the remaining cells are skipped and say so.

Sections: 1 composed Gaussians (delta to 1e-300); 2 DP-SGD (delta to 1e-30); 3 Laplace, randomized response,
k-ary randomized response, discrete Gaussian; 4 heterogeneous compositions, 10 to 10 000 distinct mechanisms;
5 time against the number of compositions k (10 to 10^6); 6 the slow and approximate corners of issue 22.
The report ends with a summary: per row with a correct peer, afa's time against the fastest one's.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import logging
import math
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import contenders as lib
import numpy as np
import references
from contenders import Term
from timing import FILL_SECONDS, MAX_REPEATS, clear_afa_caches, machine_facts, package_versions, run_isolated

import afa

REPEATS = 3
#: A call slower than this (seconds) is timed once, not REPEATS more times.
SINGLE_SHOT = 0.5
#: Longest any single measured call may run (seconds) before it is killed.
CELL_TIMEOUT = 45.0
#: A cell predicted (from the previous, smaller case) to take longer than this is skipped.
PREDICTED_LIMIT = 30.0
#: Address-space limit of each child (prv_accountant asks for 15 GB on some compositions).
CHILD_MEMORY = 8 * 2 ** 30
#: Default time budget of the whole suite, seconds (the set-up step comes on top).
DEFAULT_BUDGET = 900.0
#: Exception types (by name: they come back from the child as text) that are a deliberate refusal.
REFUSALS = {"AccuracyError", "ValidationError", "ValueError", "CompositionTooLargeError", "PLDTooLargeError",
            "NotImplementedError", "RuntimeError", "UnsupportedCompositionError", "NodeBudgetError",
            "BudgetExceededError"}
#: Relative accuracy assumed for an exact reference when checking a contender's stated bounds against it.
EXACT_TOLERANCE = 1e-12
PACKAGES = ("numpy", "scipy", "sympy", "mpmath") + lib.PEER_PACKAGES


# =========================================================================== contenders and cells

@dataclass(frozen=True)
class Contender:
    """A column: ``function(terms, delta)`` of one library.  ``claim`` says how to read a bare float answer:
    'upper' (a pessimistic bound), 'estimate'; afa's Result and prv's triple carry their own bounds."""

    name: str
    function: Callable
    claim: str = "estimate"
    peer: str | None = None  # distribution name; None for afa
    auto: bool = False  # afa's default method: the table names the engine it chose
    instead_of: str | None = None  # run only where the contender of this name did not answer

    @property
    def installed(self) -> bool:
        return self.peer is None or lib.INSTALLED[self.peer]


def afa_contour_more_nodes(terms, delta: float):
    """afa's contour method with a 64x larger node budget for numeric (subsampled) characteristic functions
    (ContourOptions.numeric_nodes, 4096 by default)."""
    import afa
    options = afa.Options(contour=afa.ContourOptions(numeric_nodes=64 * 4096))
    return lib.afa_epsilon(terms, delta, "contour", options=options)


def afa_contender(method: str, name: str | None = None) -> Contender:
    return Contender(name or f"afa {method}", functools.partial(lib.afa_epsilon, method=method),
                     auto=method == "auto")


DP_PLD = Contender("dp_accounting PLD", lib.dp_pld_epsilon, "upper", "dp-accounting")
PRV = Contender("prv_accountant", lib.prv_epsilon, "estimate", "prv-accountant")
AUTODP_GAUSSIAN = Contender("autodp analytic", lib.autodp_gaussian_epsilon, "estimate", "autodp")
AUTODP_RDP = Contender("autodp RDP", lib.autodp_rdp_epsilon, "upper", "autodp")
AUTODP_AFA = Contender("autodp AFA", lib.autodp_afa_epsilon, "estimate", "autodp")


@dataclass
class Cell:
    """One measured answer.  status: ok, inf, nan, refused, crashed, timeout, skipped, unneeded, n/a,
    not installed."""

    status: str
    value: float = math.nan
    lower: float = math.nan
    upper: float = math.nan
    claim: str = "estimate"  # estimate | upper | bounds (an error estimate) | certified
    seconds: float = math.nan
    calls: int = 0
    note: str = ""
    method: str = ""

    @property
    def answered(self) -> bool:
        return self.status == "ok"


def cell_from(contender: Contender, outcome) -> Cell:
    if outcome.status == "timeout":
        return Cell("timeout", seconds=outcome.seconds, note=f"killed after {outcome.seconds:.0f} s")
    if outcome.status == "died":
        return Cell("crashed", note=outcome.message)
    if outcome.status == "raised":
        if outcome.error_type == "NotSupported":
            return Cell("n/a", note=outcome.message)
        status = "refused" if outcome.error_type in REFUSALS else "crashed"
        return Cell(status, seconds=outcome.seconds, calls=outcome.calls,
                    note=f"{outcome.error_type}: {outcome.message}")
    raw = outcome.value
    cell = Cell("ok", seconds=outcome.seconds, calls=outcome.calls, claim=contender.claim)
    if isinstance(raw, afa.Result):
        cell.value, cell.lower, cell.upper = float(raw.value), float(raw.lower), float(raw.upper)
        cell.claim, cell.method = ("certified" if raw.certified else "bounds"), raw.method
    elif isinstance(raw, tuple):
        cell.lower, cell.value, cell.upper = (float(x) for x in raw)
        cell.claim = "bounds"
    else:
        cell.value = float(raw)
    if math.isnan(cell.value):
        cell.status = "nan"
    elif math.isinf(cell.value):
        cell.status = "inf"
    return cell


class Runner:
    """Runs cells in isolated children within the suite's time budget."""

    def __init__(self, budget: float, quick: bool):
        self.started = time.perf_counter()
        self.deadline = self.started + budget
        self.quick = quick
        self.budget_skips = 0
        self.summary = Summary()  # every row measured, for the report's summary

    def remaining(self) -> float:
        return self.deadline - time.perf_counter()

    def measure(self, contender: Contender, terms, delta: float, skip: str | None = None) -> Cell:
        if not contender.installed:
            return Cell("not installed")
        if skip and skip.startswith("not needed"):
            return Cell("unneeded", note=skip)
        if skip:
            return Cell("skipped", note=skip)
        remaining = self.remaining()
        if remaining < 5:
            self.budget_skips += 1
            return Cell("skipped", note="the suite's time budget ran out")
        function = functools.partial(contender.function, terms, delta)
        outcome = run_isolated(function, min(CELL_TIMEOUT, remaining), REPEATS, SINGLE_SHOT, CHILD_MEMORY)
        return cell_from(contender, outcome)


class Propagation:
    """Per (contender, case): after a timeout or a crash -- or, for peers, an infinite answer or a refusal -- at
    one delta, the smaller deltas of the same case are not run (afa's refusals depend on delta and are cheap)."""

    def __init__(self):
        self.reasons: dict = {}

    def reason(self, key) -> str | None:
        return self.reasons.get(key)

    def record(self, key, contender: Contender, cell: Cell, where: str) -> None:
        if cell.status in ("timeout", "crashed") or (contender.peer and cell.status in ("inf", "refused")):
            label = {"inf": "inf", "timeout": "timed out"}.get(cell.status, cell.status)
            self.reasons.setdefault(key, f"{label} at {where}")


# =========================================================================== references

@dataclass
class Reference:
    """eps_ref with the interval [lower, upper] it is known to lie in, and how it was obtained."""

    value: float
    lower: float
    upper: float
    source: str
    residual: float = math.nan  # for closed forms: |delta_mpmath(eps_ref) / delta - 1|
    exact_value: bool = False

    @classmethod
    def exact(cls, value: float, source: str, residual: float = math.nan) -> Reference:
        slack = EXACT_TOLERANCE * abs(value)
        return cls(value, value - slack, value + slack, source, residual, True)

    def text(self) -> str:
        """eps_ref, with the bracket it is known to lie in when it is not an exact value."""
        if not self.known:
            return "–"
        if self.exact_value:
            return f"{self.value:.12g}"
        return f"{self.value:.10g} [{self.lower:.8g}, {self.upper:.8g}]"

    @classmethod
    def missing(cls, source: str) -> Reference:
        return cls(math.nan, math.nan, math.nan, source)

    @property
    def known(self) -> bool:
        return math.isfinite(self.value)


def bracket_reference(results: dict, case, delta: float, bracket_name: str, estimates: tuple) -> Reference:
    """The first of the ``estimates`` columns that answered inside the certified bracket of column
    ``bracket_name`` (with that bracket), else the bracket's midpoint; missing when the bracket is.  An estimate
    column answered by the bracket's own method does not count (it would be the bracket's own value)."""
    bracket = results[case.name, delta, bracket_name]
    if not bracket.answered:
        return Reference.missing("none: afa's PLD did not answer")
    for name in estimates:
        estimate = results[case.name, delta, name]
        if estimate.answered and estimate.method != "pld" and bracket.lower <= estimate.value <= bracket.upper:
            label = name if name != "afa auto" else f"afa auto ({estimate.method or 'its method'})"
            return Reference(estimate.value, bracket.lower, bracket.upper,
                             f"{label}, inside afa's certified PLD bracket")
    return Reference(bracket.value, bracket.lower, bracket.upper, "afa PLD certified bracket (midpoint)")


def contradicts(cell: Cell, reference: Reference) -> bool:
    """Whether ``cell``'s stated claim is incompatible with the reference interval."""
    if not (cell.answered and reference.known):
        return False
    if cell.claim == "upper":
        return cell.value < reference.lower
    if cell.claim in ("bounds", "certified"):
        return cell.upper < reference.lower or cell.lower > reference.upper
    return False


# =========================================================================== summary

#: A peer's answer counts as correct in the summary when it is within PEER_RTOL (relative) of a known reference
#: and does not contradict it (an upper bound below it, or stated bounds excluding it).
PEER_RTOL = 1e-2
#: afa answers whose stated relative width (upper - lower) / eps exceeds this are named in the summary.
STATED_RTOL = 1e-6


@dataclass
class SummaryRow:
    where: str
    base: Contender
    cell: Cell
    peers: list  # (Contender, Cell) of the peers measured on the row
    reference: Reference


class Summary:
    """Every row of the suite with afa's default answer: afa's time against the fastest peer that answered it
    correctly, afa's error against the reference, and afa's stated relative width."""

    def __init__(self):
        self.rows: list[SummaryRow] = []

    def add(self, where: str, base: Contender, cells: dict, columns: list, reference: Reference) -> None:
        peers = [(c, cells[c.name]) for c in columns if c.peer]
        self.rows.append(SummaryRow(where, base, cells[base.name], peers, reference))

    @staticmethod
    def correct(cell: Cell, reference: Reference) -> bool:
        return (cell.answered and reference.known and not contradicts(cell, reference)
                and abs(cell.value - reference.value) <= PEER_RTOL * abs(reference.value))

    def markdown(self) -> str:
        lines, ratios, widths = [], [], []
        for row in self.rows:
            cell = row.cell
            if cell.answered and math.isfinite(cell.upper) and math.isfinite(cell.lower) and cell.value:
                width = (cell.upper - cell.lower) / abs(cell.value)
                widths.append((width, row.where))
            correct = [(c, p) for c, p in row.peers if self.correct(p, row.reference)]
            if not (correct and cell.answered):
                continue
            best, peer_cell = min(correct, key=lambda pair: pair[1].seconds)
            ratio = cell.seconds / peer_cell.seconds
            ratios.append(ratio)
            error = ((cell.value - row.reference.value) / row.reference.value) if row.reference.value else math.nan
            lines.append([row.where, cell.method or "", seconds_text(cell.seconds), best.name,
                          seconds_text(peer_cell.seconds), f"{ratio:.3g}", f"{error:+.1e}"])
        if not lines:
            return "No row had a peer answering correctly (are the peers installed?)."
        faster = sum(1 for r in ratios if r < 1)
        speedups = [1 / r for r in ratios]
        worst = min(zip(speedups, (line[0] for line in lines)))
        text = [f"Rows where a peer answered correctly (within {PEER_RTOL:g} relative of the reference, its claims "
                f"compatible with it): {len(lines)}.  afa (default method) was faster on {faster} of them.  The "
                f"fastest correct peer's time / afa's time: median {statistics.median(speedups):.3g}, smallest "
                f"{worst[0]:.3g} ({worst[1]}).",
                ""]
        wide = sorted((w for w in widths if w[0] > STATED_RTOL), reverse=True)
        largest = max(widths) if widths else (math.nan, "")
        text.append(f"afa's stated relative width (upper − lower) / ε over all {len(widths)} answered rows: largest "
                    f"{largest[0]:.2g} ({largest[1]}); above {STATED_RTOL:g} on {len(wide)} row(s)"
                    + (": " + "; ".join(f"{where} ({width:.2g})" for width, where in wide[:12])
                       + (f"; and {len(wide) - 12} more" if len(wide) > 12 else "") if wide else "") + ".")
        text += ["", table(["row", "afa method", "afa time", "fastest correct peer", "its time",
                            "afa / peer time", "afa error vs reference"], lines)]
        return "\n".join(text)


# =========================================================================== formatting

class Notes:
    """Numbered footnotes of one section (refusal and crash messages, skip reasons, ...)."""

    def __init__(self):
        self.items: dict = {}

    def number(self, key, text: str) -> int:
        if key not in self.items:
            self.items[key] = (len(self.items) + 1, text)
        return self.items[key][0]

    def markdown(self) -> str:
        return "\n".join(f"[{number}] {text}  " for number, text in sorted(self.items.values()))


def cut(text: str, width: int = 220) -> str:
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= width else text[:width - 1] + "…"


def status_text(cell: Cell, contender: Contender, notes: Notes) -> str:
    if cell.status == "unneeded":
        return "–"
    if cell.status == "inf":
        return "∞"
    if cell.status == "nan":
        return "nan"
    if cell.status == "timeout":
        return f"timeout (>{cell.seconds:.0f} s)"
    if cell.status in ("refused", "crashed", "skipped", "n/a"):
        key = (contender.name, cell.status, cell.note[:48])
        number = notes.number(key, f"{contender.name}: {cut(cell.note)}")
        return f"{cell.status} [{number}]"
    return cell.status


class Flags:
    """Answers that contradict their reference or are impossible, grouped by (contender, kind)."""

    def __init__(self):
        self.groups: dict = {}

    def add(self, contender: str, kind: str, detail: str) -> None:
        self.groups.setdefault((contender, kind), []).append(detail)

    def markdown(self) -> str:
        if not self.groups:
            return "None: no answer contradicted its reference."
        lines = []
        for (contender, kind), details in self.groups.items():
            shown = "; ".join(details[:4]) + (f"; and {len(details) - 4} more" if len(details) > 4 else "")
            lines.append(f"- **{contender}** {kind} ({len(details)} cell{'s' * (len(details) > 1)}): {shown}")
        return "\n".join(lines)


def error_text(cell: Cell, contender: Contender, reference: Reference, notes: Notes, flags: Flags,
               where: str) -> str:
    if not cell.answered:
        return status_text(cell, contender, notes)
    if not reference.known:
        text = f"{cell.value:.7g}"
    else:
        relative = (cell.value - reference.value) / reference.value
        text = "0" if relative == 0 else f"{relative:+.1e}"
    if contender.auto and cell.method:
        text += f" ({cell.method})"
    if cell.value < 0:
        text += f" ✗ (ε = {cell.value:.2g})"
        flags.add(contender.name, "returns a negative ε, which no mechanism has", f"{where}: {cell.value:.3g}")
    elif contradicts(cell, reference):
        text += " ✗"
        if cell.claim == "upper":
            kind, claim = "gives an upper bound below the reference", f"{cell.value:.10g}"
        else:
            kind = ("gives a certified bracket that excludes the reference" if cell.claim == "certified"
                    else "states bounds that exclude the reference")
            claim = f"{cell.value:.10g} in [{cell.lower:.10g}, {cell.upper:.10g}]"
        flags.add(contender.name, kind, f"{where}: {claim} vs {reference.value:.12g} ({reference.source})")
    return text


def seconds_text(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "–"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def time_text(cell: Cell, contender: Contender, base: Cell | None, notes: Notes) -> str:
    if cell.status in ("skipped", "n/a", "not installed", "unneeded"):
        return status_text(cell, contender, notes)
    if cell.status == "timeout":
        return f"> {cell.seconds:.0f} s"
    text = seconds_text(cell.seconds) + ("†" if cell.calls == 1 else "")
    if not cell.answered:
        text += f" ({status_text(cell, contender, notes)})"
    if base is not None and base.answered and contender.peer and math.isfinite(cell.seconds):
        text += f" (×{cell.seconds / base.seconds:.3g})"
    return text


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


@dataclass
class Section:
    title: str
    intro: str
    blocks: list = field(default_factory=list)
    notes: Notes = field(default_factory=Notes)
    seconds: float = 0.0

    def markdown(self) -> str:
        parts = [f"## {self.title}", self.intro] + self.blocks
        if self.notes.items:
            parts.append("Notes:  \n" + self.notes.markdown())
        parts.append(f"*Section time: {self.seconds:.0f} s.*")
        return "\n\n".join(parts)


# =========================================================================== a grid of cases x deltas

@dataclass
class Case:
    name: str
    terms: list
    deltas: tuple | None = None  # this case's deltas, if not the section's
    references: dict = field(default_factory=dict)  # delta -> Reference (filled lazily)


def run_grid(runner: Runner, section: Section, cases: list[Case], deltas, columns: list[Contender],
             base: Contender, reference_for: Callable, flags: Flags, only: dict | None = None,
             ordered: bool = False) -> dict:
    """Measure every (case, delta, contender); append the error and time tables to ``section``.  ``only`` maps
    a contender's name to the deltas it is run at (to keep the suite's time; the others say so).  ``ordered``:
    the cases come in increasing difficulty, so a peer that timed out on one is not run on the later ones."""
    propagation = Propagation()
    results = {}
    only = only or {}
    timed_out: dict = {}
    for case in cases:
        case_deltas = case.deltas or deltas
        for delta in case_deltas:
            for contender in columns:
                key = (contender.name, case.name)
                skip = propagation.reason(key) or timed_out.get(contender.name)
                if contender.name in only and delta not in only[contender.name]:
                    skip = skip or ("not run at this δ, to keep the suite's time (run at δ = "
                                    + ", ".join(f"{d:g}" for d in only[contender.name]) + ")")
                if contender.instead_of and results[case.name, delta, contender.instead_of].answered:
                    skip = skip or f"not needed: {contender.instead_of} answered"
                cell = runner.measure(contender, case.terms, delta, skip)
                propagation.record(key, contender, cell, f"delta={delta:g}")
                if ordered and contender.peer and cell.status in ("timeout", "crashed"):
                    timed_out.setdefault(contender.name, f"{cell.status} on the easier case {case.name}")
                results[case.name, delta, contender.name] = cell
            case.references[delta] = reference_for(case, delta, results)
            print(f"  {case.name} delta={delta:g}: " + ", ".join(
                f"{c.name}={results[case.name, delta, c.name].status}" for c in columns), flush=True)
    error_rows, time_rows = [], []
    for case in cases:
        for delta in case.deltas or deltas:
            reference = case.references[delta]
            where = f"§{section.title.split('.')[0]} {case.name}, δ={delta:g}"
            error_rows.append([case.name, f"{delta:g}", reference.text()] + [
                error_text(results[case.name, delta, c.name], c, reference, section.notes, flags, where)
                for c in columns])
            base_cell = results[case.name, delta, base.name]
            runner.summary.add(where, base, {c.name: results[case.name, delta, c.name] for c in columns}, columns, reference)
            time_rows.append([case.name, f"{delta:g}"] + [
                time_text(results[case.name, delta, c.name], c, base_cell, section.notes) for c in columns])
    names = [c.name for c in columns]
    section.blocks.append("**Error** (ε − ε_ref) / ε_ref:\n\n" + table(["case", "δ", "ε_ref"] + names, error_rows))
    section.blocks.append(f"**Time** to a first ε(δ), cold (× = peer time / {base.name} time):\n\n"
                          + table(["case", "δ"] + names, time_rows))
    return results


def reference_source_table(cases: list[Case], deltas) -> str:
    rows = []
    for case in cases:
        sources = sorted({reference.source for reference in case.references.values()})
        rows.append([case.name, "; ".join(sources)])
    return "References:\n\n" + table(["case", "reference"], rows)


# =========================================================================== sections

def gaussians(runner: Runner, flags: Flags) -> Section:
    section = Section("1. Composed Gaussians", (
        "k uses of the Gaussian mechanism N(0, σ²), sensitivity 1, add/remove; μ = √k / σ.  Reference: afa.numerics.exact's "
        "closed form (Sommer, Meiser & Mohammadi 2019, Thm 5), whose δ at ε_ref is recomputed with mpmath at 60 digits (largest "
        "relative δ residual given below).  afa's default ('auto') is 'exact' here; 'quadrature' refuses δ within "
        "100× of its absolute-error floor (the refusal is the intended behaviour).  Peers: dp_accounting's "
        "PLDAccountant (pessimistic, grid 1e-4), prv_accountant (eps_error 0.01, delta_error δ/1000), autodp's "
        "analytic Gaussian (ComposeGaussian) and its characteristic-function accountant ComposeAFA.  To keep the "
        "suite's time, afa's PLD and dp_accounting are run at δ ≥ 1e-30 only, prv_accountant at δ ≥ 1e-10 (afa's "
        "PLD answers at 1e-300 too, in 1–20 s; dp_accounting returns ∞ from 1e-16 on and prv_accountant refuses, "
        "see sections 2 and 3).  Cases are ordered by μ; a peer that times out or crashes is not run on the "
        "larger μ."))
    sigmas, counts = (0.5, 1.0, 5.0, 50.0), (1, 10_000)
    deltas = (1e-5, 1e-10, 1e-30, 1e-100, 1e-300)
    if runner.quick:
        sigmas, counts, deltas = (1.0, 50.0), (1, 10_000), (1e-5, 1e-30, 1e-300)
    settings = sorted(((sigma, count) for sigma in sigmas for count in counts), key=lambda s: math.sqrt(s[1]) / s[0])
    cases = [Case(f"σ={sigma:g}, k={count} (μ={math.sqrt(count) / sigma:.3g})", [Term("gaussian", count, sigma=sigma)])
             for sigma, count in settings]
    residuals = []

    def reference_for(case, delta, results):
        term, = case.terms
        value, residual = references.gaussian_reference(delta, math.sqrt(term.count) / term.sigma)
        residuals.append(residual)
        return Reference.exact(value, "afa.numerics.exact closed form, checked with mpmath", residual)

    base = afa_contender("exact", "afa exact (auto)")
    columns = [base, afa_contender("contour"), afa_contender("quadrature"), afa_contender("pld"),
               DP_PLD, PRV, AUTODP_GAUSSIAN, AUTODP_AFA]
    limited = {"afa pld": (1e-5, 1e-10, 1e-30), DP_PLD.name: (1e-5, 1e-10, 1e-30), PRV.name: (1e-5, 1e-10)}
    run_grid(runner, section, cases, deltas, columns, base, reference_for, flags, limited, ordered=True)
    section.intro += f"  Largest mpmath residual of the closed form over the table: {max(residuals):.1e} (relative, in δ)."
    return section


DP_SGD_SETTINGS = [(0.01, 1.0, 100), (0.01, 1.0, 1000), (0.01, 1.0, 10_000), (256 / 60000, 1.1, 14_063),
                   (0.001, 0.8, 100_000)]


def dp_sgd(runner: Runner, flags: Flags) -> Section:
    section = Section("2. DP-SGD (Poisson-subsampled Gaussian)", (
        "k steps of the Poisson-subsampled Gaussian (rate q, noise multiplier σ), add/remove (δ is the larger of "
        "the two directions).  No closed form exists: the reference interval is afa's certified PLD bracket "
        "(method='pld', connect-the-dots pessimistic / greedy-hull optimistic on the loss tails, default grid), "
        "computed from the mechanism's loss tails, not from its characteristic function; ε_ref is afa's contour "
        "value where the contour answers inside that bracket; where the contour refuses (its default budget of "
        "4096 nodes for numeric characteristic functions is exhausted), the contour rerun with a 64× node budget "
        "(column 'afa contour, 64× nodes', run only there: – elsewhere), again only if inside the bracket; else the bracket's "
        "midpoint.  A ✗ marks an answer "
        "whose own claim (an upper bound, or stated bounds) is incompatible with the certified bracket.  autodp's "
        "RDP column is an upper bound by design (its default accountant), not a tight value."))
    settings, deltas = DP_SGD_SETTINGS, (1e-5, 1e-10, 1e-16, 1e-20, 1e-30)
    if runner.quick:
        settings, deltas = settings[1:2] + settings[4:], (1e-5, 1e-20)
    cases = [Case(f"q={q:.3g}, σ={sigma:g}, k={k}", [Term("subsampled_gaussian", k, sigma=sigma, q=q)])
             for q, sigma, k in settings]
    pld = afa_contender("pld")

    more = Contender("afa contour, 64× nodes", afa_contour_more_nodes, instead_of="afa contour")

    def reference_for(case, delta, results):
        return bracket_reference(results, case, delta, pld.name, ("afa contour", more.name))

    base = afa_contender("auto")
    columns = [base, afa_contender("contour"), more, pld, DP_PLD, PRV, AUTODP_RDP, AUTODP_AFA]
    run_grid(runner, section, cases, deltas, columns, base, reference_for, flags)
    section.blocks.append(reference_source_table(cases, deltas))
    return section


def laplace_delta(epsilon: float, count: int, a: float) -> float:
    return float(references.laplace_delta_mpmath(epsilon, count, a))


def finite_and_laplace(runner: Runner, flags: Flags) -> Section:
    section = Section("3. Laplace, randomized response, k-ary randomized response, discrete Gaussian", (
        "Laplace (scale b, sensitivity 1, add/remove): reference = the exact mpmath enumeration "
        "tests/_reference.laplace_delta_mpmath (60 digits), inverted by one Newton step from afa's contour ε.  "
        "Randomized response RR(p) (true bit with probability p) and k-ary RR(K, p) (true value with probability "
        "p) under substitution, and the discrete Gaussian DG(σ) (add/remove): reference = an exact enumeration of "
        "the composed loss's lattice law (binomial / trinomial masses, or the k-fold sum of the noise by direct "
        "convolution; benchmarks/references.py), independent of afa's code.  dp_accounting: PLDAccountant for "
        "Laplace; its privacy_loss_distribution builders (from_randomized_response, "
        "from_discrete_gaussian_mechanism; pessimistic, grid 1e-4) self-composed for the others.  prv_accountant: "
        "LaplaceMechanism, and PureDPMechanism(log(p/(1−p))) for binary RR (the same loss law).  autodp: RDP "
        "composition, and ComposeAFA where it has a characteristic function.  afa's PLD is run at δ = 1e-5 and "
        "1e-30 only (time); two cases are run at δ = 1e-5 only (their outcome does not depend on δ)."))
    cases = [Case("Laplace b=1, k=100", [Term("laplace", 100, scale=1.0)]),
             Case("RR p=0.52, k=1000", [Term("rr", 1000, p=0.52)]),
             Case("RR p=0.75, k=100", [Term("rr", 100, p=0.75)]),
             Case("RR p=0.9, k=500", [Term("rr", 500, p=0.9)]),
             Case("k-RR K=10 p=0.5, k=100", [Term("krr", 100, p=0.5, buckets=10)]),
             Case("k-RR K=100 p=0.2, k=1000", [Term("krr", 1000, p=0.2, buckets=100)], deltas=(1e-5,)),
             Case("DG σ=1, k=10", [Term("dgauss", 10, sigma=1.0)]),
             Case("DG σ=2, k=100", [Term("dgauss", 100, sigma=2.0)]),
             Case("DG σ=5, k=100", [Term("dgauss", 100, sigma=5.0)], deltas=(1e-5,))]
    deltas = (1e-5, 1e-10, 1e-30)
    if runner.quick:
        cases, deltas = cases[:2] + cases[3:4] + cases[7:8], (1e-5, 1e-30)
    lattices = {}

    def lattice(term):
        key = (term.kind, term.count, term.p, term.buckets, term.sigma)
        if key not in lattices:
            if term.kind == "rr":
                lattices[key] = references.randomized_response_loss(term.p, term.count)
            elif term.kind == "krr":
                lattices[key] = references.kary_randomized_response_loss(term.buckets, term.p, term.count)
            else:
                lattices[key] = references.discrete_gaussian_loss(term.sigma, term.count)
        return lattices[key]

    def reference_for(case, delta, results):
        term, = case.terms
        if term.kind != "laplace":
            return Reference.exact(lattice(term).epsilon(delta), "exact enumeration of the lattice law (numpy)")
        estimate = next((results[case.name, delta, name] for name in ("afa contour", "afa auto")
                         if results[case.name, delta, name].answered), None)
        if estimate is None:
            return Reference.missing("none: no afa estimate to start the Newton step from")
        function = functools.partial(laplace_delta, count=term.count, a=1.0 / term.scale)
        return Reference.exact(references.newton_epsilon(function, estimate.value, delta),
                               "exact mpmath enumeration (tests/_reference.py), one Newton step")

    base = afa_contender("auto")
    columns = [base, afa_contender("exact"), afa_contender("contour"), afa_contender("pld"), DP_PLD, PRV,
               AUTODP_RDP, AUTODP_AFA]
    run_grid(runner, section, cases, deltas, columns, base, reference_for, flags, {"afa pld": (1e-5, 1e-30)})
    return section


def distinct_cases(kind: str, count: int) -> list[Term]:
    """``count`` distinct mechanisms (numpy seed 0): Gaussians with relative sigmas uniform in [1, 10] and uses
    uniform in 1..100, scaled so that the composition has mu = 2 (eps(1e-5) = 9.997256 for every n); a
    half-and-half Gaussian / Laplace mix with scales uniform in [20, 200] sqrt(n / 100) and uses in 1..99; or
    subsampled Gaussians (sigma uniform in [1.5, 3], q in [0.005, 0.02], 10 steps each)."""
    rng = np.random.default_rng(0)
    if kind == "gaussian":
        sigmas, uses = rng.uniform(1, 10, count), rng.integers(1, 101, count)
        sigmas = sigmas * math.sqrt(float(np.sum(uses / sigmas ** 2))) / 2
        return [Term("gaussian", int(k), sigma=float(s)) for s, k in zip(sigmas, uses)]
    if kind == "mix":
        scales, uses = rng.uniform(20, 200, count) * math.sqrt(count / 100), rng.integers(1, 100, count)
        return [Term("gaussian", int(k), sigma=float(s)) if index % 2 == 0 else Term("laplace", int(k), scale=float(s))
                for index, (s, k) in enumerate(zip(scales, uses))]
    sigmas, rates = rng.uniform(1.5, 3.0, count), rng.uniform(0.005, 0.02, count)
    return [Term("subsampled_gaussian", 10, sigma=float(s), q=float(q)) for s, q in zip(sigmas, rates)]


@dataclass
class Family:
    """A row family of a scaling table: ``build(size)`` gives the terms; ``reference(size, terms, results)`` the
    Reference (``describe`` says what it is)."""

    name: str
    build: Callable
    columns: list
    base: Contender
    reference: Callable
    describe: str


def scaling_grid(runner: Runner, section: Section, families: list[Family], sizes, delta: float, flags: Flags,
                 label: str, growth: Callable) -> None:
    """Time (and error where a reference exists) against a size parameter, one family at a time.  A contender
    that timed out, or whose predicted time (its last measured time x growth(last size, size)) exceeds
    PREDICTED_LIMIT, is not run at this size nor at the larger ones."""
    for family in families:
        error_rows, time_rows = [], []
        last: dict = {}  # contender name -> (cell, size) of its last measured size
        stopped: dict = {}  # contender name -> why the larger sizes are not run
        for size in sizes:
            terms = family.build(size)
            results = {}
            for contender in family.columns:
                if contender.name not in stopped and contender.name in last:
                    cell, last_size = last[contender.name]
                    predicted = cell.seconds * growth(last_size, size)
                    if cell.status == "timeout":
                        stopped[contender.name] = f"timed out at {label}={last_size}"
                    elif math.isfinite(predicted) and predicted > PREDICTED_LIMIT:
                        stopped[contender.name] = (f"predicted > {PREDICTED_LIMIT:.0f} s: {seconds_text(cell.seconds)}"
                                                   f" at {label}={last_size}, × {growth(last_size, size):.3g}")
                cell = runner.measure(contender, terms, delta, stopped.get(contender.name))
                results[contender.name] = cell
                if cell.status not in ("skipped", "unneeded", "n/a", "not installed"):
                    last[contender.name] = (cell, size)
            reference = family.reference(size, terms, results)
            print(f"  {family.name} {label}={size}: "
                  + ", ".join(f"{c.name}={results[c.name].status}" for c in family.columns), flush=True)
            where = f"§{section.title.split('.')[0]} {family.name}, {label}={size}"
            runner.summary.add(where, family.base, results, family.columns, reference)
            error_rows.append([str(size), reference.text()] + [
                error_text(results[c.name], c, reference, section.notes, flags, where) for c in family.columns])
            time_rows.append([str(size)] + [time_text(results[c.name], c, results[family.base.name], section.notes)
                                            for c in family.columns])
        names = [c.name for c in family.columns]
        section.blocks.append(
            f"### {family.name}\n\nReference: {family.describe}.\n\n**Time** (× = peer time / {family.base.name} "
            "time):\n\n" + table([label] + names, time_rows)
            + "\n\n**Error** (ε − ε_ref) / ε_ref (the ε itself where there is no reference):\n\n"
            + table([label, "ε_ref"] + names, error_rows))


def heterogeneous(runner: Runner, flags: Flags) -> Section:
    delta = 1e-5
    section = Section("4. Heterogeneous compositions: 10 to 10 000 distinct mechanisms", (
        f"ε(δ = {delta:g}) of n distinct mechanisms (numpy seed 0; see distinct_cases in run_all.py), cold: the "
        "time includes composing the n mechanisms.  Peers get the same list (dp_accounting: a ComposedDpEvent of "
        "n SelfComposedDpEvents; prv_accountant: n privacy random variables).  Each library's time at the next "
        f"size is predicted from the previous one (linear in n) and the cell is skipped when the prediction "
        f"exceeds {PREDICTED_LIMIT:.0f} s."))
    sizes = (10, 100, 1000, 10_000)
    if runner.quick:
        sizes = (10, 100)

    def exact_gaussian(size, terms, results):
        mu = math.sqrt(sum(t.count / t.sigma ** 2 for t in terms))
        return Reference.exact(afa.numerics.exact.gaussian_epsilon(delta, mu), "closed form")

    def column_reference(name):
        def reference(size, terms, results):
            cell = results[name]
            if not cell.answered:
                return Reference.missing(f"{name} did not answer")
            return Reference(cell.value, cell.lower, cell.upper, name)
        return reference

    base = afa_contender("auto")
    families = [
        Family("distinct Gaussians", functools.partial(distinct_cases, "gaussian"),
               [base, DP_PLD, PRV, AUTODP_GAUSSIAN], base, exact_gaussian,
               "afa.numerics.exact's closed form of the composed Gaussian, μ² = Σ kᵢ / σᵢ² = 4"),
        Family("distinct Gaussians and Laplaces (half each)", functools.partial(distinct_cases, "mix"),
               [base, afa_contender("quadrature"), DP_PLD, PRV, AUTODP_RDP], base, column_reference("afa quadrature"),
               "afa's real-line quadrature (method='quadrature', its own column: a different inversion of the same "
               "characteristic function, absolute error ≈1e-13 in δ, stated bounds)"),
        Family("distinct subsampled Gaussians, 10 steps each", functools.partial(distinct_cases, "subsampled"),
               [base, afa_contender("pld"), DP_PLD, PRV, AUTODP_RDP], base, column_reference("afa pld"),
               "afa's certified PLD bracket (method='pld', its own column), where it answers"),
    ]
    scaling_grid(runner, section, families, sizes, delta, flags, "n", lambda a, b: b / a)
    return section


def count_scaling(runner: Runner, flags: Flags) -> Section:
    delta = 1e-5
    section = Section("5. Time against the number of compositions k", (
        f"ε(δ = {delta:g}) of k uses of one mechanism, cold.  Gaussian: σ = √k / 2 (μ = 2 for every k, so ε stays "
        "9.997256 and only the count changes); Laplace: b = √k (ε stays near 4.4); DP-SGD: q = 0.01, σ = 1 (ε "
        "grows with k).  afa composes by adding k log φ, so its cost should not grow with k.  A library is skipped "
        f"at the next k when its time × 10 (linear growth) exceeds {PREDICTED_LIMIT:.0f} s."))
    sizes = (10, 100, 1000, 10_000, 100_000, 1_000_000)
    if runner.quick:
        sizes = (10, 1000, 100_000)

    def gaussian_reference(size, terms, results):
        return Reference.exact(afa.numerics.exact.gaussian_epsilon(delta, 2.0), "closed form")

    def none(size, terms, results):
        return Reference.missing("none")

    base = afa_contender("auto")
    families = [
        Family("Gaussian, μ = 2", lambda k: [Term("gaussian", k, sigma=math.sqrt(k) / 2)],
               [base, DP_PLD, PRV, AUTODP_GAUSSIAN], base, gaussian_reference, "the closed form, μ = 2"),
        Family("Laplace, b = √k", lambda k: [Term("laplace", k, scale=math.sqrt(k))],
               [base, DP_PLD, PRV, AUTODP_RDP], base, none, "none (each answer's ε is shown)"),
        Family("DP-SGD, q = 0.01, σ = 1", lambda k: [Term("subsampled_gaussian", k, sigma=1.0, q=0.01)],
               [base, DP_PLD, PRV, AUTODP_RDP], base, none, "none (each answer's ε is shown)"),
    ]
    scaling_grid(runner, section, families, sizes, delta, flags, "k", lambda a, b: b / a)
    return section


def corners(runner: Runner, flags: Flags) -> Section:
    section = Section("18. The slow and approximate corners of issue 22", (
        "The compositions where afa was slowest or least accurate: DiscreteGaussian(3) x 100 (reference: exact "
        "enumeration of the lattice law, benchmarks/references.py); MixtureOfGaussians((0, 1), (0.99, 0.01), "
        "σ = 1) x 100 (the Poisson-subsampled Gaussian's pair, which is what the peers are given); the near-atom "
        "and few-step rows of the subsampled Gaussian and DP-SGD with q = 0.01, σ = 1, k = 100 (reference: afa's "
        "contour, else the contour 'auto' ran with a larger node budget, inside afa's certified PLD bracket; else "
        "the bracket's midpoint); "
        "DataDependentGaussian(1, 1.5, 1) x 2-4 (no peer has it; reference: the eps where the 30-digit noncentral "
        "chi-square integral crosses δ, benchmarks/bench_data_dependent.py)."))
    subsampled = [(2.0, 0.001, 1000, (1e-6,)), (0.8, 0.001, 100, (1e-6,)), (0.8, 0.001, 1000, (1e-6,)),
                  (2.0, 0.001, 10, (1e-14,)), (1.0, 0.01, 100, (1e-5,))]
    cases = [Case("DG σ=3, k=100", [Term("dgauss", 100, sigma=3.0)], (1e-6,)),
             Case("MoG (0, 1) / (0.99, 0.01), σ=1, k=100", [Term("mog", 100, sigma=1.0, q=0.01)], (1e-5, 1e-10))]
    cases += [Case(f"subsampled σ={sigma:g}, q={q:g}, k={k}", [Term("subsampled_gaussian", k, sigma=sigma, q=q)],
                   deltas) for sigma, q, k, deltas in subsampled]
    cases += [Case(f"DDG(1, 1.5, 1), k={k}", [Term("ddg", k, sigma=1.0, scale=1.5)], (1e-10,)) for k in (2, 3, 4)]
    if runner.quick:
        cases = [cases[0], cases[1], cases[-1]]
    pld = afa_contender("pld")

    def reference_for(case, delta, results):
        term, = case.terms
        if term.kind == "dgauss":
            law = references.discrete_gaussian_loss(term.sigma, term.count)
            return Reference.exact(law.epsilon(delta), "exact enumeration of the lattice law")
        if term.kind == "ddg":
            import bench_data_dependent

            guess = results[case.name, delta, pld.name]
            start = guess.value if guess.answered else results[case.name, delta, "afa auto"].value
            value = float(bench_data_dependent.reference_epsilon(term.count, delta, start))
            return Reference.exact(value, "30-digit noncentral chi-square integral")
        # near the atom the plain contour refuses; auto's wide-node-budget contour is the estimate then
        return bracket_reference(results, case, delta, pld.name, ("afa contour", "afa auto"))

    base = afa_contender("auto")
    columns = [base, afa_contender("contour"), pld, DP_PLD, PRV, AUTODP_RDP]
    run_grid(runner, section, cases, None, columns, base, reference_for, flags)
    section.blocks.append(reference_source_table(cases, None))
    return section


# =========================================================================== warm-up and report

def afa_revision() -> str:
    """The git commit of the checkout afa is imported from, and whether afa/ had uncommitted changes."""
    import subprocess
    root = Path(afa.__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "afa"], capture_output=True,
                               text=True, check=True).stdout.rstrip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return commit + (" with uncommitted changes in afa/: " + ", ".join(line[3:] for line in dirty.splitlines())
                     if dirty else "")


def warm_up() -> None:
    """One-time per-process work (imports, afa's symbolic templates compiled, peers' lazy imports) done in the
    parent, so that every child starts warm but builds its composition cold.  Only calls known to be quick."""
    gaussian, laplace = [Term("gaussian", 3, sigma=2.0)], [Term("laplace", 3, scale=2.0)]
    subsampled = [Term("subsampled_gaussian", 7, sigma=3.0, q=0.05)]
    calls = [(gaussian, ("auto", "contour", "quadrature", "pld")), (laplace, ("auto", "pld")),
             ([Term("rr", 5, p=0.6)], ("auto", "pld")), ([Term("krr", 5, p=0.5, buckets=4)], ("auto",)),
             ([Term("dgauss", 3, sigma=2.0)], ("auto",)), (subsampled, ("auto", "pld")),
             (gaussian + [Term("laplace", 2, scale=3.0)], ("auto",))]
    for terms, methods in calls:
        for method in methods:
            lib.afa_epsilon(terms, 1e-5, method)
    for terms in (gaussian, laplace, subsampled):
        for function, peer in ((lib.dp_pld_epsilon, "dp-accounting"), (lib.prv_epsilon, "prv-accountant"),
                               (lib.autodp_rdp_epsilon, "autodp")):
            if lib.INSTALLED[peer]:
                function(terms, 1e-5)
    clear_afa_caches()


def report(sections: list[Section], flags: Flags, started: datetime.datetime, wall: float, runner: Runner,
           complete: bool, facts, versions) -> str:
    head = [
        "# afa benchmark results",
        f"Generated by `bash benchmarks/run.sh` (benchmarks/run_all.py{' --quick' if runner.quick else ''}) on "
        f"{started:%Y-%m-%d %H:%M} UTC; suite wall time {wall / 60:.1f} min ({wall:.0f} s; the set-up step is not "
        f"included){'' if complete else ' — INCOMPLETE: the run is still going or was interrupted'}.",
        "## Machine\n\n" + table(["", ""], [[label, value] for label, value in facts]
                                 + [["load average at the end", ", ".join(f"{v:.2f}" for v in os.getloadavg())]]),
        "## Library versions\n\n" + table(["library", "version"], [[name, version] for name, version in versions]),
        "## How to read the tables\n\n" + "\n".join([
            "- Every cell is ε(δ) asked of one library on a fresh object in a fresh forked process (cold: afa's "
            "per-mechanism caches are cleared and the accountant is rebuilt; only the one-time imports and compiled "
            "templates of a warm-up are shared).  Calls are killed after "
            f"{CELL_TIMEOUT:.0f} s; the suite's own budget was {runner.deadline - runner.started:.0f} s"
            + (f" and {runner.budget_skips} cells were skipped when it ran out." if runner.budget_skips else "."),
            f"- **Time**: median of {REPEATS} calls after a first one (of more for fast calls, as many as take about "
            f"{FILL_SECONDS} s, at most {MAX_REPEATS}: every contender alike); † = the first call alone (it took "
            f"longer than {SINGLE_SHOT} s).  (×r) = that peer's time / afa's default-method time on the same row, "
            "measured in the same run: r > 1 means afa was faster.  The machine is shared: compare ratios, not absolute times.",
            "- **Error**: (ε − ε_ref) / ε_ref, signed.  ε_ref and its source are given per table; an interval after "
            "ε_ref is a certified bracket it lies in.  A method name in parentheses is the engine afa's 'auto' "
            "chose.  ✗ = the answer's own claim is incompatible with the reference: an upper bound below it, or "
            "stated bounds / a certified bracket that exclude it (listed under Flags).",
            "- ∞: the library returned infinity; refused / crashed [n]: it raised (a deliberate refusal such as "
            "AccuracyError or ValueError, or another exception), note n quotes it; skipped [n]: not run, note n says "
            "why; n/a: the library cannot express this composition; not installed: the peer is absent.",
        ]),
        "## Flags\n\n" + flags.markdown(),
        "## Summary\n\n" + runner.summary.markdown(),
    ]
    kept = [path.read_text().strip() for path in KEPT_RESULTS if path.exists()]
    # The suite's own sections 1-5, the sections kept from other scripts (6-17), then the corners (18) with the
    # corners' own measurements (CORNER_RESULTS), then the calibration (19, CALIBRATION_RESULTS).
    first = [section.markdown() for section in sections if int(section.title.split(".")[0]) <= 5]
    last = [section.markdown() for section in sections if int(section.title.split(".")[0]) > 5]
    if last and CORNER_RESULTS.exists():
        last.append(CORNER_RESULTS.read_text().strip())
    if CALIBRATION_RESULTS.exists():
        last.append(CALIBRATION_RESULTS.read_text().strip())
    return "\n\n".join(head + first + kept + last) + "\n"


#: Sections measured by other scripts, kept in RESULTS.md (in this order) when it is rewritten: the soundness
#: fuzz's latest counts (``benchmarks/fuzz.py --markdown``), the sweep timings (``benchmarks/sweep.py``), the
#: trade-off curve timings (``benchmarks/bench_tradeoff.py``), the targeted scripts' timings
#: (``bench_gaussian_closed_form.py``, ``bench_mixture_of_gaussians.py``, ``first_epsilon.py``,
#: ``bench_heterogeneous.py``, ``bench_small_k.py``), the start-up times (``import_time.py``), the exact
#: lattice compositions (``bench_lattice.py``), the mixed PLD (``bench_mixed_pld.py``), the discrete
#: multi-mechanism timings (``bench_discrete_fuzz.py``) and the data-dependent Gaussians
#: (``bench_data_dependent.py``).
KEPT_RESULTS = [Path(__file__).resolve().parent / name
                for name in ("fuzz_results.md", "sweep_results.md", "tradeoff_results.md", "targeted_results.md",
                             "first_epsilon_results.md", "heterogeneous_results.md", "small_k_results.md",
                             "import_time_results.md", "lattice_results.md", "mixed_pld_results.md",
                             "discrete_fuzz_results.md", "data_dependent_results.md")]


#: The subsections of section 18 measured by ``benchmarks/bench_near_atom.py`` and ``bench_small_k.py``, kept after
#: it.
CORNER_RESULTS = Path(__file__).resolve().parent / "near_atom_results.md"
#: Section 19, DP-SGD noise calibration against dp_accounting's (``benchmarks/bench_calibration.py``), kept last.
CALIBRATION_RESULTS = Path(__file__).resolve().parent / "calibration_results.md"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small subset (smoke test, about 2 minutes)")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET, help="time budget of the suite in seconds")
    parser.add_argument("--output", type=Path, default=Path(__file__).resolve().parent / "RESULTS.md")
    parser.add_argument("--sections", default="123456", help="which sections to run, e.g. 13")
    arguments = parser.parse_args()

    logging.getLogger().setLevel(logging.ERROR)  # dp_accounting's absl warnings
    warnings.simplefilter("ignore")
    started = datetime.datetime.now(datetime.timezone.utc)
    facts, versions = machine_facts(), package_versions(PACKAGES)
    versions.insert(1, ("afa source (git)", afa_revision()))
    for label, value in facts + versions:
        print(f"{label}: {value}")
    clock = time.perf_counter()
    warm_up()
    print(f"warm-up {time.perf_counter() - clock:.1f} s", flush=True)
    runner = Runner(arguments.budget - (time.perf_counter() - clock), arguments.quick)
    flags = Flags()
    sections: list[Section] = []
    builders = {"1": gaussians, "2": dp_sgd, "3": finite_and_laplace, "4": heterogeneous, "5": count_scaling,
                "6": corners}
    for key in arguments.sections:
        section_start = time.perf_counter()
        print(f"section {key}", flush=True)
        section = builders[key](runner, flags)
        section.seconds = time.perf_counter() - section_start
        sections.append(section)
        arguments.output.write_text(report(sections, flags, started, time.perf_counter() - clock, runner, False,
                                           facts, versions))
        print(f"section {key} done in {section.seconds:.0f} s", flush=True)
    wall = time.perf_counter() - clock
    arguments.output.write_text(report(sections, flags, started, wall, runner, True, facts, versions))
    print(f"wrote {arguments.output} ({wall:.0f} s)")


if __name__ == "__main__":
    sys.exit(main())
