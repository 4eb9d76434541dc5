"""The restart spread behind a stage's throughput noise: measured once, pooled over K, borrowed by single-life K.

One server life per K cannot show how far the next life of that K would land (docs/restart-spread.md). Two
restarted lives of any K can: their spread is this server's restart spread, the same for every K at the stage
(`throughput_noises` pools it over every K with two or more lives, a K noisier beyond an F test apart), so a K
measured once borrows it. Its own uncertainty travels with it: its degrees of freedom make the Student's t every
borrowing K is drawn from, and its chi-square interval is shown beside it ("restart spread 3.1 % [2.0, 6.8]").
What earlier runs on this server measured (the ledger, runfolder/spread_ledger.py, as plan.json recorded it)
joins the pool as more degrees of freedom: unless this run's repeats are wider beyond the same F test (the server
changed: then this run's alone). The figure shown is the estimate its degrees of freedom and chi-square interval
belong to: the pool's, or this run's alone. Where no K has two lives, the earlier runs' spread is the spread, drawn
as a repeat's (Student's t with their degrees of freedom). It is a fact of the stage it was measured at (the spread
changes with concurrency: vLLM #53436): earlier runs' spread joins only the stage at their users.
A life's spread holds its window's own noise (batch means of its bins) beside the server start's: the window part
of the lives behind the spread is kept with it (`window_part`), and a K whose windows are noisier than theirs
beyond chance adds its own window noise to the restart part (the spread less their window part) instead of
borrowing theirs or keeping its own alone; its degrees of freedom are Satterthwaite's.
Pure: the prepared cells and the noises `throughput_noises` made in, the noises with their origin out.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
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
    # what the ledger keeps of this run: the pooled K's part (`squares`, `this_df`, `lives`), never a K set apart
    # (noisier beyond the F test: an outlier pair would widen every later run's spread), and its window part
    ledger_squares: float = 0.0
    ledger_df: int = 0
    ledger_lives: int = 0
    window_squares: float = 0.0          # the part of `squares` this run's windows' own noise makes
    window_df: int = 0                   # ... the degrees of freedom of their bins behind it

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


@dataclass(frozen=True)
class Part:
    """Restarted lives' part of a spread: squared relative deviations from their K's mean, the part of them the
    windows' own noise makes, degrees of freedom, lives, and the K they are of."""

    squares: float = 0.0
    window_squares: float = 0.0
    df: int = 0
    lives: int = 0
    ks: tuple[int, ...] = ()
    window_df: int = 0     # the degrees of freedom of the bins behind `window_squares`


def window_var(cell: PreparedCell) -> tuple[float, int]:
    """The relative variance of one life's throughput its window alone makes (the variance of a window's mean from
    its bins, batch means), the mean over the cell's windows; and the bins' degrees of freedom behind it."""
    variances, df = [], 0
    for window in cell.windows:
        bins = np.asarray(window.bins_req, dtype=float)
        if len(bins) >= 2 and bins.mean() > 0:
            variances.append(float(((bins / bins.mean() - 1) ** 2).sum()) / (len(bins) - 1) / len(bins))
            df += len(bins) - 1
    return (sum(variances) / len(variances), df) if variances else (0.0, 0)


def window_part(cell: PreparedCell) -> float:
    """What the windows' own noise adds, in expectation, to a K's squared deviations between lives: (n - 1) x
    their mean window variance (each life's mean is off by its window's noise besides its start's)."""
    return (len(cell.windows) - 1) * window_var(cell)[0]


def measured_now(cells: Mapping[int, PreparedCell], pooled: ThroughputNoise,
                 by_k: Mapping[int, ThroughputNoise]) -> Part:
    """This run's pooled part: the K with two or more lives that share the stage's pool (a K noisier beyond the F
    test keeps its own and is in neither the pool nor the ledger)."""
    if pooled.source != "repeats":
        return Part()
    ks = tuple(k for k, cell in sorted(cells.items()) if len(cell.windows) >= 2 and by_k.get(k) is pooled)
    parts = [_spread(cells[k], "repeats") for k in ks]
    return Part(sum(sq for sq, _ in parts), sum(window_part(cells[k]) for k in ks), sum(df for _, df in parts),
                sum(len(cells[k].windows) for k in ks), ks, sum(window_var(cells[k])[1] for k in ks))


def _beyond_chance(own: tuple[float, int], typical: tuple[float, int]) -> bool:
    """A K's window variance (and its bins' degrees of freedom) beyond the typical one of the lives behind the spread
    by the one-sided F test the pool uses; a typical one of unknown degrees of freedom (a ledger entry that did not
    keep them) is taken as known (it stands on the bins of every life behind it)."""
    (own_var, own_df), (typical_var, typical_df) = own, typical
    if not own_df or own_var <= typical_var:
        return False
    if typical_var <= 0:
        return True
    if not typical_df:
        return own_var * own_df / typical_var > float(stats.chi2.ppf(0.95, own_df))
    return _noisier((own_var * own_df, own_df), (typical_var * typical_df, typical_df)) > 1


def _satterthwaite(a: float, df_a: int, b: float, df_b: int) -> int:
    """The degrees of freedom of a sum of two variance estimates (Welch-Satterthwaite), at least 1."""
    if a <= 0 or not df_a:
        return max(df_b, 1)
    return max(1, int((a + b) ** 2 / (a * a / df_a + (b * b / df_b if df_b else 0.0))))


def _with_origin(cells: Mapping[int, PreparedCell], pooled: ThroughputNoise, by_k: dict[int, ThroughputNoise],
                 new: ThroughputNoise, window_squares: float,
                 window_df: int) -> tuple[ThroughputNoise, dict[int, ThroughputNoise]]:
    """`new` replaces the pool for every K on it; a K whose windows are noisier than those of the lives behind it
    (their window part `window_squares` over `new`'s degrees of freedom, on `window_df` of bins) adds its own window
    noise to the restart part instead."""
    typical = window_squares / new.df if new.df else 0.0
    restart = max(new.rel_sd ** 2 - typical, 0.0)
    out = {}
    for k, noise in by_k.items():
        own, df = window_var(cells[k]) if noise is pooled else (0.0, 0)
        if noise is not pooled or not _beyond_chance((own, df), (typical, window_df)):
            out[k] = new if noise is pooled else noise
            continue
        out[k] = dataclasses.replace(new, rel_sd=math.sqrt(restart + own), df=_satterthwaite(restart, new.df, own, df),
                                     scope=f"K={k}'s: the restart spread with its own noisier windows", origin=None)
    return new, out


def stage_users(cells: Mapping[int, PreparedCell]) -> int | None:
    return next((cell.cell.users for cell in cells.values()), None)


def earlier_at(p: DecisionConfig, users: int | None) -> EarlierSpread | None:
    """The earlier runs' spread where it was measured at these users (0: as a plan.json before issue 46 took it,
    at the run's target: the engine gives it to the target stage alone)."""
    earlier = p.earlier_spread
    return earlier if earlier is not None and earlier.users in (0, users) else None


def with_restart_spread(cells: Mapping[int, PreparedCell], noises: tuple[ThroughputNoise, dict[int, ThroughputNoise]],
                        p: DecisionConfig) -> tuple[ThroughputNoise, dict[int, ThroughputNoise]]:
    """The stage's noises (`throughput_noises`) with the restart spread's origin, and the earlier runs' spread pooled
    in where the config carries one measured at this stage's users (module docstring)."""
    pooled, by_k = noises
    earlier, level = earlier_at(p, stage_users(cells)), p.interval_level
    part = measured_now(cells, pooled, by_k) if not p.one_life_per_k else Part()
    if part.df:
        note = ""
        if earlier is not None and _noisier((part.squares, part.df), (earlier.squares, earlier.df)) > 1:
            note = (f"the {earlier.runs} earlier run{'s' if earlier.runs != 1 else ''} on this server measured "
                    f"{earlier.rel_sd:.1%}, narrower beyond an F test: left out (the server changed?)")
            earlier = None
        # pooled where the F test finds them alike, this run's alone where not: either way the figure, its degrees
        # of freedom and its interval are of one estimate
        total_sq = part.squares + (earlier.squares if earlier else 0.0)
        total_df = part.df + (earlier.df if earlier else 0)
        window_sq = part.window_squares + (earlier.window_squares if earlier else 0.0)
        known = earlier is None or earlier.window_df   # an entry that kept no bins: the window part's taken as known
        window_df = part.window_df + (earlier.window_df if earlier else 0) if known else 0
        rel_sd = math.sqrt(total_sq / total_df)
        origin = SpreadOrigin(rel_sd, *chi2_bounds(rel_sd, total_df, level), total_df, part.lives, part.ks,
                              part.squares, part.df, earlier, note, part.squares, part.df, part.lives,
                              part.window_squares, part.window_df)
        new = dataclasses.replace(pooled, rel_sd=rel_sd, df=total_df, origin=origin)
        return _with_origin(cells, pooled, by_k, new, window_sq, window_df)
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
    return _with_origin(cells, pooled, {k: pooled for k in by_k}, new, earlier.window_squares, earlier.window_df)


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



# A single life this far from the level earlier runs on this server measured for its K is taken for an outlier until
# a second life says otherwise (a life on a host whose other work took the server's CPUs read 40 % of its level;
# a restart can land in a slow regime, vLLM #39903): beyond SUSPECT_SPREADS of its spread (the life's own and the
# level's, `off_earlier`) or SUSPECT_TIE_BANDS tie bands, whichever is larger.
# - The spreads term tests the life against the spread the ledger claims: the deviation over the estimated spread
#   is Student's t with the spread's degrees of freedom, so a life the spread does describe is called an outlier in
#   P(|t| > 4) of sweeps: 15.6 % at 1 degree of freedom, 5.7 % at 2, 1.6 % at 4, 0.4 % at 8, 0.07 % at 20 (the price
#   of a false alarm is one more life; of a miss, a confident verdict on an outlier).
# - The tie-band floor: a deviation of two tie bands carries a gain from one edge of the tie band to the other, so no
#   outlier that could turn a tie into a confident "Set K" (or hide a gain) by itself passes, however narrow the
#   spread; at the 3 % band it keeps the false alarms at 0.002 % at most at a spread of 1 %, 0.26 % at 1.5 % and
#   1.6 % at 2 % (the worst: one earlier run, one degree of freedom; 0.02 % and 0.3 % over five runs), and it is what
#   catches the 15 %-slow baseline under a 1 % spread (4 spreads over two runs: 4.9 %), which the old 25 %
#   floor let through.
# The rates: P(|d| > max(4 s (1 + 1/runs)^0.5, 2 band)) with d ~ N(0, sigma^2 (1 + 1/runs)) and s^2 ~ sigma^2
# chi2(df) / df, integrated over the chi-square; the spreads term alone is exactly P(|t_df| > 4).
SUSPECT_SPREADS = 4.0
SUSPECT_TIE_BANDS = 2.0


def off_earlier(objective: Mapping[int, float], lives: Mapping[int, int], noises: Mapping[int, ThroughputNoise],
                earlier: EarlierSpread | None, tie_band: float) -> dict[int, float]:
    """K measured once whose objective is off the level earlier runs on this server measured for it (beyond
    SUSPECT_SPREADS x its spread, the life's and the level's over the earlier runs, and SUSPECT_TIE_BANDS x
    `tie_band`): K -> its relative deviation."""
    if earlier is None or not earlier.levels:
        return {}
    out = {}
    for k, value in objective.items():
        level = earlier.levels.get(str(k))
        noise = noises.get(k)
        spread = noise.rel_sd if noise is not None and math.isfinite(noise.rel_sd) else 0.0
        limit = max(SUSPECT_SPREADS * spread * math.sqrt(1 + 1 / max(earlier.runs, 1)), SUSPECT_TIE_BANDS * tie_band)
        if lives.get(k) == 1 and level and math.isfinite(value) and abs(value / level - 1) > limit:
            out[k] = value / level - 1
    return out


def unchecked(lives: Mapping[int, int], earlier: EarlierSpread | None) -> frozenset[int]:
    """K measured once that earlier runs on this server hold no level for: no outlier check can see their life."""
    if earlier is None:
        return frozenset()
    return frozenset(k for k, n in lives.items() if n == 1 and str(k) not in earlier.levels)


def off_earlier_text(deviations: Mapping[int, float], earlier: EarlierSpread) -> list[str]:
    """The diagnoses naming each such K."""
    return [f"K={k}'s one life reads {deviation:+.0%} off the {earlier.levels[str(k)]:.3g} earlier runs on this "
            f"server measured for it (last {earlier.last}): an outlier life? one more life of it would tell."
            for k, deviation in sorted(deviations.items())]
