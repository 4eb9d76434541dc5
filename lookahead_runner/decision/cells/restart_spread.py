"""The restart spread behind a stage's throughput noise: measured once, pooled over K, borrowed by single-life K.

One server life per K cannot show how far the next life of that K would land (docs/restart-spread.md). Two
restarted lives of any K can: their spread is this server's restart spread, the same for every K at the stage
(`throughput_noises` pools it over every K with two or more lives, a K noisier beyond an F test apart), so a K
measured once borrows it. Its own uncertainty travels with it: its degrees of freedom make the Student's t every
borrowing K is drawn from, and its chi-square interval is shown beside it ("restart spread 3.1 % [2.0, 6.8]").
What earlier runs on this server measured (the ledger, runfolder/spread_ledger.py, as plan.json recorded it)
joins the pool as more degrees of freedom: unless this run's repeats are wider beyond the same F test (the server
changed: then this run's alone). The figure shown is the estimate its degrees of freedom and chi-square interval
belong to: the pool's, or this run's alone, of every restarted life, a K set apart by the F test included (the K
that agree are a selection where one is set apart: `every_restarted_life`); a K measured once borrows that figure
there, with its degrees of freedom (it borrowed the selection's: 0.7 % beside a stated 2.4 %, and its gain interval
held the truth in 73.7 % of such stages at a stated 95 %: the suite's "one life, a pair set apart"). Its interval
holds the spread at decision.interval_level where the spread describes every life (the suite's "restart spread");
where an outlier life the test cannot set apart is among them, the spread stated takes the outlier in and is never
below the spread of the other lives (the suite's "outlier life: not below the truth"). Where no K has two lives,
the earlier runs' spread is the spread, drawn as a repeat's (Student's t with their degrees of freedom). It is a fact
of the stage it was measured at (the spread changes with concurrency: vLLM #53436): earlier runs' spread joins only the
stage at their users.
A life's spread holds its window's own noise (batch means of its bins) beside the server start's: the window part
of the lives behind the spread is kept with it (`window_part`), and a K whose windows are noisier than theirs
beyond chance adds its own window noise to the restart part (the spread less their window part) instead of
borrowing theirs or keeping its own alone; its degrees of freedom are Satterthwaite's. Where every K has one life and
the earlier runs kept their window part, this run's windows take its place whether longer or shorter (a spread from
other windows is not this run's: `_with_these_windows`). A single life far from the level earlier runs measured for
its K, beyond what the spread explains at a stated false-alarm rate, is an outlier until a second life says otherwise
(`off_earlier`: a verdict that hangs on it waits for it).
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
    test keeps its own and is in neither the pool nor the ledger; the spread stated takes it in:
    `every_restarted_life`)."""
    if pooled.source != "repeats":
        return Part()
    ks = tuple(k for k, cell in sorted(cells.items()) if len(cell.windows) >= 2 and by_k.get(k) is pooled)
    return _part(cells, ks)


def every_restarted_life(cells: Mapping[int, PreparedCell]) -> Part:
    """Every K with two or more lives, a K set apart by the F test included: the spread the stage states. Where a K
    is set apart, the K that agree are a selection, not an estimate: under one spread for every K a pair reading
    close by chance is what sets the other apart (10 % of stages of two K on two lives each), and their pool read
    0.0 % [0.0, 0.0] where the truth was several % (the calibration suite's "restart spread: grid x2")."""
    return _part(cells, tuple(k for k, cell in sorted(cells.items()) if len(cell.windows) >= 2))


def _part(cells: Mapping[int, PreparedCell], ks: tuple[int, ...]) -> Part:
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


def _satterthwaite(a: float, df_a: int, b: float, df_b: int, whole: float | None = None) -> int:
    """The degrees of freedom of a sum of two variance estimates (Welch-Satterthwaite), at least 1. `whole`: `a` is
    a spread estimated with `df_a` degrees of freedom less a part known far better (the restart part: the spread
    less its window part), so it varies as that spread does (variance 2 whole^2 / df_a), not as a chi-square of its
    own size: a restart part near nil is as uncertain as the spread it was taken from."""
    if not df_a or (a <= 0 and whole is None):
        return max(df_b, 1)
    spread = a if whole is None else max(whole, a)
    variance = spread * spread / df_a + (b * b / df_b if df_b else 0.0)
    return max(1, int((a + b) ** 2 / variance)) if variance > 0 else max(df_b, 1)   # nil both: the bins' df


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
        out[k] = dataclasses.replace(new, rel_sd=math.sqrt(restart + own), df=_satterthwaite(restart, new.df, own, df,
                                                                                          whole=new.rel_sd ** 2),
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
        # the figure stated: every restarted life's (the pool's where no K is set apart); measured on this run's
        # lives, where the sweep stopped at a look, at that look's level (Looks.interval_level)
        every = every_restarted_life(cells)
        stated_sq, stated_df = every.squares + total_sq - part.squares, every.df + total_df - part.df
        single = [k for k, noise in sorted(by_k.items()) if noise is pooled and len(cells[k].windows) == 1]
        stated = math.sqrt(stated_sq / stated_df)
        if apart := [f"K={k}" for k in every.ks if k not in part.ks]:
            on_one = f", {', '.join(f'K={k}' for k in single)} on one life with the {stated:.1%} stated" \
                if single else ""
            note = "; ".join(filter(None, (note, f"{', '.join(apart)} wider beyond an F test: the K that agree are "
                                                 f"resampled with their own {rel_sd:.1%}{on_one}")))
        origin = SpreadOrigin(stated, *chi2_bounds(stated, stated_df, p.reported_interval_level), stated_df,
                              every.lives, every.ks, every.squares, every.df, earlier, note, part.squares, part.df,
                              part.lives, part.window_squares, part.window_df)
        new = dataclasses.replace(pooled, rel_sd=rel_sd, df=total_df, origin=origin)
        noise, out = _with_origin(cells, pooled, by_k, new, window_sq, window_df)
        if apart and single:   # no pair of its own to sit beside: a K on one life borrows the spread stated
            stated_window_sq = window_sq + every.window_squares - part.window_squares
            stated_window_df = every.window_df + (earlier.window_df if earlier else 0) if known else 0
            borrowing = dataclasses.replace(new, rel_sd=stated, df=stated_df, origin=None,
                                            scope="every restarted life's, borrowed by a K on one life")
            out |= _with_origin(cells, pooled, {k: by_k[k] for k in single}, borrowing, stated_window_sq,
                                stated_window_df)[1]
        return noise, out
    if earlier is None or not earlier.df:
        return pooled, by_k
    origin = SpreadOrigin(earlier.rel_sd, *chi2_bounds(earlier.rel_sd, earlier.df, level), earlier.df,
                          earlier=earlier)
    if p.one_life_per_k:  # same-server repeats: the spread from life to life is the prior term, at its upper end
        prior = {"restart_sd": origin.high, "restart_source": origin.text() + ", its upper end", "one_life": True}
        return (dataclasses.replace(pooled, **prior),
                {k: dataclasses.replace(n, **prior) if n.source != "none" else n for k, n in by_k.items()})
    # every K one life: each life's throughput varies by the earlier runs' spread, drawn as a repeat's
    if earlier.window_df and (mine := this_runs_windows(cells)) is not None:
        return _with_these_windows(cells, pooled, by_k, earlier, mine, level)
    new = ThroughputNoise(earlier.rel_sd, earlier.df, "repeats", "from earlier runs on this server", origin=origin)
    return _with_origin(cells, pooled, {k: pooled for k in by_k}, new, earlier.window_squares, earlier.window_df)


def this_runs_windows(cells: Mapping[int, PreparedCell]) -> tuple[float, int] | None:
    """The relative variance one life's window adds at this stage (the mean over its K of `window_var`) and its bins'
    degrees of freedom; None where no window holds two bins."""
    parts = [window_var(cell) for cell in cells.values()]
    parts = [(var, df) for var, df in parts if df]
    if not parts:
        return None
    return sum(var for var, _ in parts) / len(parts), sum(df for _, df in parts)


def _with_these_windows(cells: Mapping[int, PreparedCell], pooled: ThroughputNoise, by_k: dict[int, ThroughputNoise],
                        earlier: EarlierSpread, mine: tuple[float, int],
                        level: float) -> tuple[ThroughputNoise, dict[int, ThroughputNoise]]:
    """Every K on one life, the earlier runs' spread borrowed where they kept its window part: a life here varies by
    their restart part (their spread less what their windows' noise made) and this run's own windows' noise, which
    may be longer or shorter than theirs (a spread measured on 4x longer windows, stated as it is, claimed half the
    spread of this run's lives). Its degrees of freedom are Satterthwaite's, its interval chi-square's: the restart
    part is their whole spread less a window part their bins fix, so it is as uncertain as their whole spread
    (variance 2 s^4 / df), not as a chi-square of its own size would be (a restart part near nil would otherwise
    leave the bins' hundreds of degrees of freedom, and an interval far too narrow)."""
    theirs = earlier.window_squares / earlier.df
    restart = max(earlier.rel_sd ** 2 - theirs, 0.0)
    own, own_df = mine
    rel_sd = math.sqrt(restart + own)
    df = _satterthwaite(restart, earlier.df, own, own_df, whole=earlier.rel_sd ** 2)
    note = (f"its window part this run's ({math.sqrt(own):.1%} per life; theirs {math.sqrt(theirs):.1%})"
            if not math.isclose(own, theirs, rel_tol=0.05) else "")
    origin = SpreadOrigin(rel_sd, *chi2_bounds(rel_sd, df, level), df, earlier=earlier, note=note)
    new = ThroughputNoise(rel_sd, df, "repeats", "from earlier runs on this server, with this run's windows",
                          origin=origin)
    return _with_origin(cells, pooled, {k: pooled for k in by_k}, new, own * df, own_df)


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



# A single life far from the level earlier runs on this server measured for its K is taken for an outlier until a
# second life says otherwise (a life on a host whose other work took the server's CPUs read 40 % of its level; a
# restart can land in a slow regime, vLLM #39903), and the verdict waits for that life (gates/stage.py). Where the
# spread describes the life, its deviation from the level over the spread it is drawn with (the life's and the
# level's over the earlier runs: s (1 + 1/runs)^0.5) is Student's t with the spread's degrees of freedom, so the
# guard flags a life past the t quantile of a stated false-alarm rate (`outlier_false_alarm`): the share of lives
# the spread's prediction interval at decision.interval_level leaves out, split over the K it checks, so a run
# whose lives the spread describes is held back for one more life in at most 1 - interval_level of sweeps (5 %;
# 2.5 % per K with two K). The floor follows the spread: at a 1 % spread over two runs (4 degrees of freedom) a life
# 4.3 % off is flagged (the 15 %-slow baseline, which the old 25 % floor let through); at 5 % over one run,
# 25 % (a 15 %-slow life is then within what the spread explains: only a second life can tell it). The calibration
# suite measures both rates (benchmarks/calibration, "outlier flag").


def outlier_false_alarm(level: float, checked: int) -> float:
    """The false-alarm rate the guard runs at on each of `checked` K: 1 - `level` (decision.interval_level) split
    over them (Bonferroni), so the run is held back at most 1 - `level` of the time where the spread describes every
    life."""
    return (1 - level) / max(checked, 1)


def outlier_limit(spread: float, df: int, runs: int, false_alarm: float, level_window: float = 0.0,
                  window_df: int = 0) -> float:
    """The relative deviation of one life from the earlier runs' level that the spread (`spread`, estimated with `df`
    degrees of freedom) explains but in `false_alarm` of lives: Student's t quantile times the spread of the life
    and of the level over `runs` runs. The level is never known better than its lives' windows allow (`level_window`:
    their relative window variance, on `window_df` of bins), however alike its lives read: an earlier run's two lives
    of equal counts (0.0 % on 1 degree of freedom) left a limit of 0 and held a life 0.1 % off. The life's own window
    noise is in `spread` already (a K on one life draws it: `_with_these_windows`, `_with_origin`)."""
    runs = max(runs, 1)
    if spread * spread >= level_window:
        return float(stats.t.ppf(1 - false_alarm / 2, df)) * spread * math.sqrt(1 + 1 / runs)
    df = _satterthwaite(spread * spread, df, level_window / runs, window_df)
    return float(stats.t.ppf(1 - false_alarm / 2, df)) * math.sqrt(spread * spread + level_window / runs)


def off_earlier(objective: Mapping[int, float], lives: Mapping[int, int], noises: Mapping[int, ThroughputNoise],
                earlier: EarlierSpread | None, level: float) -> dict[int, float]:
    """K measured once whose objective is off the level earlier runs on this server measured for it beyond what its
    spread explains (`outlier_limit` at `outlier_false_alarm` of `level`, decision.interval_level): K -> its relative
    deviation. A K whose spread has no degrees of freedom is not tested."""
    if earlier is None or not earlier.levels:
        return {}
    checked = [k for k, value in objective.items() if lives.get(k) == 1 and earlier.levels.get(str(k))
               and math.isfinite(value) and k in noises and noises[k].df and math.isfinite(noises[k].rel_sd)]
    false_alarm = outlier_false_alarm(level, len(checked))
    levels_window = (earlier.window_squares / earlier.df, earlier.window_df) if earlier.window_df and earlier.df else (0.0, 0)
    out = {}
    for k in checked:
        deviation = objective[k] / earlier.levels[str(k)] - 1
        if abs(deviation) > outlier_limit(noises[k].rel_sd, noises[k].df, earlier.runs, false_alarm, *levels_window):
            out[k] = deviation
    return out


def unchecked(lives: Mapping[int, int], earlier: EarlierSpread | None) -> frozenset[int]:
    """K measured once that earlier runs on this server hold no level for: no outlier check can see their life."""
    if earlier is None:
        return frozenset()
    return frozenset(k for k, n in lives.items() if n == 1 and str(k) not in earlier.levels)


def off_earlier_text(deviations: Mapping[int, float], earlier: EarlierSpread) -> list[str]:
    """The diagnoses naming each such K."""
    return [f"K={k}'s one life reads {deviation:+.0%} off the level earlier runs on this server measured for it "
            f"({earlier.levels[str(k)]:.3g}, last {earlier.last}), more than the restart spread explains: an outlier "
            "life? one more life of it would tell."
            for k, deviation in sorted(deviations.items())]
