"""The restart spread behind a stage's throughput noise: measured once, pooled over K, borrowed by single-life K.

One server life per K cannot show how far the next life of that K would land (docs/restart-spread.md). Two
restarted lives of any K can: their spread is this server's restart spread, the same for every K at the stage
(`throughput_noises` pools it over every K with two or more lives, a K noisier beyond an F test apart), so a K
measured once borrows it. Its own uncertainty travels with it: its degrees of freedom make the Student's t every
borrowing K is drawn from, and its chi-square interval is shown beside it ("restart spread 3.1 % [2.0, 6.8]").
What earlier runs on this server measured (the ledger, runfolder/spread_ledger.py, as plan.json recorded it)
joins the pool as more degrees of freedom: unless this run's repeats are wider beyond the same F test (the server
changed: then this run's alone), and never below what this run's data show (the pooled figure is at least this
run's own spread, and a single-life K whose windows are noisier inside keeps that). Where no K has two lives,
the earlier runs' spread is the spread, drawn as a repeat's (Student's t with their degrees of freedom).
Pure: the prepared cells and the noises `throughput_noises` made in, the noises with their origin out.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

from scipy import stats

from ...config.decision import DecisionConfig, EarlierSpread
from .measure import PreparedCell, ThroughputNoise, _noisier, _spread


@dataclass(frozen=True)
class SpreadOrigin:
    """Where a stage's restart spread came from: this run's restarted lives, earlier runs on this server, or both;
    with its chi-square interval. `squares` / `this_df`: this run's own part (what the ledger keeps of the run)."""

    rel_sd: float
    low: float
    high: float
    df: int
    lives: int = 0                       # this run's lives behind it (of K with two or more)
    ks: tuple[int, ...] = ()             # those K
    squares: float = 0.0
    this_df: int = 0
    earlier: EarlierSpread | None = None  # the earlier runs pooled in
    note: str = ""                       # why the earlier runs' spread was left out, when it was
    # what the ledger keeps of this run: every K with two or more lives, a K apart (noisier beyond the F test)
    # too: the next run's stages pool or set it apart again on their own data
    ledger_squares: float = 0.0
    ledger_df: int = 0
    ledger_lives: int = 0

    def text(self) -> str:
        """e.g. "restart spread 3.1 % [2.0, 6.8] per server life, from 2 earlier runs on this server (last
        2026-12-02)"."""
        parts = []
        if self.lives:
            ks = ", ".join(f"K={k}" for k in self.ks)
            parts.append(f"{self.lives} lives of {ks} in this run")
        if self.earlier is not None:
            runs = self.earlier.runs
            parts.append(f"{runs} earlier run{'s' if runs != 1 else ''} on this server (last {self.earlier.last})")
        head = (f"restart spread {self.rel_sd * 100:.1f} % [{self.low * 100:.1f}, {self.high * 100:.1f}] per server "
                f"life, from {' and '.join(parts)}")
        return head + (f"; {self.note}" if self.note else "")


def chi2_bounds(rel_sd: float, df: int, level: float) -> tuple[float, float]:
    """The interval of a standard deviation estimated with `df` degrees of freedom (chi-square)."""
    if not df or not math.isfinite(rel_sd):
        return math.nan, math.nan
    tail = (1 - level) / 2
    return (rel_sd * math.sqrt(df / stats.chi2.ppf(1 - tail, df)),
            rel_sd * math.sqrt(df / stats.chi2.ppf(tail, df)))


def measured_now(cells: Mapping[int, PreparedCell], pooled: ThroughputNoise,
                 by_k: Mapping[int, ThroughputNoise]) -> tuple[float, int, int, tuple[int, ...]]:
    """This run's pooled part: (squares, degrees of freedom, lives, K) of the K with two or more lives that share
    the stage's pool (a K noisier beyond the F test keeps its own and is not in it)."""
    if pooled.source != "repeats":
        return 0.0, 0, 0, ()
    ks = tuple(k for k, cell in sorted(cells.items()) if len(cell.windows) >= 2 and by_k.get(k) is pooled)
    parts = [_spread(cells[k], "repeats") for k in ks]
    return sum(sq for sq, _ in parts), sum(df for _, df in parts), sum(len(cells[k].windows) for k in ks), ks


def restarted(cells: Mapping[int, PreparedCell]) -> tuple[float, int, int]:
    """(squares, degrees of freedom, lives) of every K with two or more lives, in the stage's pool or apart."""
    ks = [k for k, cell in cells.items() if len(cell.windows) >= 2]
    parts = [_spread(cells[k], "repeats") for k in ks]
    return sum(sq for sq, _ in parts), sum(df for _, df in parts), sum(len(cells[k].windows) for k in ks)


def _noisier_inside(cell: PreparedCell, spread: ThroughputNoise) -> tuple[float, int]:
    """A single-life K's relative standard error from inside its window (batch means) and its degrees of freedom
    where it is wider than the restart spread beyond the F test the pool uses (a few bins are a rough estimate:
    their own degrees of freedom make its Student's t); (0, 0) otherwise."""
    squares, df = _spread(cell, "bins")
    if not df or not cell.throughput_units:
        return 0.0, 0
    per_life = squares / cell.throughput_units   # the variance of the window's mean, x its degrees of freedom
    if _noisier((per_life, df), (spread.rel_sd ** 2 * spread.df, spread.df)) <= 1:
        return 0.0, 0
    return math.sqrt(per_life / df), df


def _with_origin(cells: Mapping[int, PreparedCell], pooled: ThroughputNoise, by_k: dict[int, ThroughputNoise],
                 new: ThroughputNoise) -> tuple[ThroughputNoise, dict[int, ThroughputNoise]]:
    """`new` replaces the pool for every K on it; a single-life K whose window is noisier inside keeps that."""
    out = {}
    for k, noise in by_k.items():
        if noise is not pooled:
            out[k] = noise
            continue
        own, df = _noisier_inside(cells[k], new) if len(cells[k].windows) == 1 else (0.0, 0)
        out[k] = new if not own else dataclasses.replace(
            new, rel_sd=own, df=df, scope=f"K={k}'s own window, noisier inside than the restart spread", origin=None)
    return new, out


def with_restart_spread(cells: Mapping[int, PreparedCell], noises: tuple[ThroughputNoise, dict[int, ThroughputNoise]],
                        p: DecisionConfig) -> tuple[ThroughputNoise, dict[int, ThroughputNoise]]:
    """The stage's noises (`throughput_noises`) with the restart spread's origin, and the earlier runs' spread pooled
    in where the config carries one (module docstring)."""
    pooled, by_k = noises
    earlier, level = p.earlier_spread, p.interval_level
    squares, df, lives, ks = measured_now(cells, pooled, by_k) if not p.one_life_per_k else (0.0, 0, 0, ())
    if df:
        note = ""
        if earlier is not None and _noisier((squares, df), (earlier.squares, earlier.df)) > 1:
            note = (f"the {earlier.runs} earlier run{'s' if earlier.runs != 1 else ''} on this server measured "
                    f"{earlier.rel_sd:.1%}, narrower beyond an F test: left out (the server changed?)")
            earlier = None
        total_sq, total_df = squares + (earlier.squares if earlier else 0.0), df + (earlier.df if earlier else 0)
        rel_sd = max(math.sqrt(total_sq / total_df), pooled.rel_sd)  # never below what this run shows
        origin = SpreadOrigin(rel_sd, *chi2_bounds(rel_sd, total_df, level), total_df, lives, ks, squares, df,
                              earlier, note, *restarted(cells))
        new = dataclasses.replace(pooled, rel_sd=rel_sd, df=total_df, origin=origin)
        return _with_origin(cells, pooled, by_k, new)
    if earlier is None or not earlier.df:
        return pooled, by_k
    origin = SpreadOrigin(earlier.rel_sd, *chi2_bounds(earlier.rel_sd, earlier.df, level), earlier.df,
                          earlier=earlier)
    if p.one_life_per_k:  # same-server repeats: the spread from life to life is the prior term, at its upper end
        prior = {"restart_sd": origin.high, "restart_source": origin.text() + ", its upper end", "one_life": True}
        return (dataclasses.replace(pooled, **prior),
                {k: dataclasses.replace(n, **prior) if n.source != "none" else n for k, n in by_k.items()})
    # every K one life: each life's throughput varies by the earlier runs' spread, drawn as a repeat's
    new = ThroughputNoise(earlier.rel_sd, earlier.df, "repeats", "from earlier runs on this server", origin=origin)
    return _with_origin(cells, pooled, {k: pooled for k in by_k}, new)


def measured(noise: ThroughputNoise) -> bool:
    """Whether the stage's restart spread was measured (by this run's restarted lives or earlier runs on this
    server): single-life K borrow it, so none needs a second life to show its own."""
    return noise.origin is not None and not noise.one_life


def borrowed(noise: ThroughputNoise, cells: Mapping[int, PreparedCell], always: bool = False) -> str:
    """The verdict's words on the measured spread: which K measured once borrowed it ("" where none did, unless
    `always`: a server whose spread was unknown before it was measured)."""
    single = [k for k, cell in sorted(cells.items()) if len(cell.windows) == 1]
    if not measured(noise) or not (single or always):
        return ""
    if not single:
        return f" {noise.origin.text()[0].upper()}{noise.origin.text()[1:]}."
    who = ", ".join(f"K={k}" for k in single)
    return f" {who} on one life{' each' if len(single) > 1 else ''}, with the {noise.origin.text()}."


def half_width(rel_sd: float, df: int, lives_a: int, lives_b: int, level: float) -> float:
    """The relative half-width of the gain interval of two K measured on these lives, each life off by `rel_sd`
    (estimated with `df` degrees of freedom: Student's t)."""
    if not df or not lives_a or not lives_b:
        return math.inf
    return float(stats.t.ppf((1 + level) / 2, df)) * rel_sd * math.sqrt(1 / lives_a + 1 / lives_b)


def lives_advice(noise: ThroughputNoise, cells: Mapping[int, PreparedCell], a: int, b: int, wanted: float,
                 p: DecisionConfig, cap: int = 100) -> str:
    """What more lives of two K would buy, priced from the measured restart spread (never from an assumed one)."""
    level = p.interval_level
    mine, theirs = len(cells[a].windows), len(cells[b].windows)
    now = half_width(noise.rel_sd, noise.df, mine, theirs, level)
    one_more = half_width(noise.rel_sd, noise.df + 1, mine + 1, theirs, level)
    each = 2 * (float(stats.norm.ppf((1 + level) / 2)) * noise.rel_sd / wanted) ** 2  # noise: the wider K's
    n = min(cap, max(math.ceil(each), max(mine, theirs) + 1))
    what = "restart spread" if noise.origin is not None else f"spread of {noise.scope}"
    return (f"from the measured {what} ({noise.rel_sd * 100:.1f} % per life, {noise.df} degrees of freedom): "
            f"one more life of K={a} would narrow the interval from about ±{now * 100:.0f} % to about "
            f"±{one_more * 100:.0f} %; about {n} repeats of both (load.repeats = {n}) to about "
            f"±{wanted * 100:.1f} %.")



# a single life this far from what earlier runs on this server measured for its K (the larger of these many restart
# spreads and this share) is taken for an outlier until a second life says otherwise: a life on a host whose other
# work took the server's CPUs read 40 % of its K's level (benchmarks/README.md, issue 38's real-vLLM runs)
SUSPECT_SPREADS = 4.0
SUSPECT_FLOOR = 0.25


def off_earlier(objective: Mapping[int, float], lives: Mapping[int, int], noise: ThroughputNoise,
                earlier: EarlierSpread | None) -> dict[int, float]:
    """K measured once whose objective is off the level earlier runs on this server measured for it (beyond
    SUSPECT_SPREADS x the spread, and SUSPECT_FLOOR): K -> its relative deviation."""
    if earlier is None or not earlier.levels:
        return {}
    limit = max(SUSPECT_SPREADS * (noise.rel_sd if math.isfinite(noise.rel_sd) else 0.0), SUSPECT_FLOOR)
    out = {}
    for k, value in objective.items():
        level = earlier.levels.get(str(k))
        if lives.get(k) == 1 and level and math.isfinite(value) and abs(value / level - 1) > limit:
            out[k] = value / level - 1
    return out


def off_earlier_text(deviations: Mapping[int, float], earlier: EarlierSpread) -> list[str]:
    """The diagnoses naming each such K."""
    return [f"K={k}'s one life reads {deviation:+.0%} off the {earlier.levels[str(k)]:.3g} earlier runs on this "
            f"server measured for it (last {earlier.last}): an outlier life? one more life of it would tell."
            for k, deviation in sorted(deviations.items())]
