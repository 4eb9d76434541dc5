"""The verdict at an arrival rate as the adaptive sweep's chooser reads it between lives (decision/standing.py's
`Standing`), judged at a look's bar as the users stage's is (standing.standing_of, engine.early_judged): the claim is
that a sweep that stops at the first look whose verdict at the rate clears its bar states no more confidence than
its looks together hold (gates/looks.py), and that it buys the lives the verdict at the rate hangs on.

Exported (the sweep loop, run/strategies/adaptive_sweep.py, calls them with these signatures):

    standing_at_rate(windows: Sequence[RateWindow], rate: float, p: DecisionConfig, early_stop: bool = True,
                     looks: Looks | None = None, variant: str = "", over=None, probing: bool = True
                     ) -> Standing
    valid_lives_at_rate(windows: Sequence[RateWindow], rate: float, variant: str = "") -> dict[int, int]

The final verdict at the bar the looks set is rate_decision.decide_at_rate(..., looks=looks): its decision.json
carries `looks` as the users verdict's does ("stopped at look 3 of at most 6: boundary 97.1 %").

`standing_at_rate`'s fields:
- status: the verdict at `rate` judged at this look's bar (`Looks.at(number)`, number = the lives with a valid window
  at the rate, summed over K where looks count lives, the most of any K where they count repeats; without looks
  the fixed early-stop bar, engine.early_look), "decided" only past it; "not_decided" below it; "no_eligible",
  "no_measurement" as the verdict says;
- leader: the verdict's pick; shares: each K's win share in the resamples;
- objective: per K measured at the rate, its speed there (1000 / e2e ms at decision.latency_percentile, as
  measured: higher is better; the pick's second rule after the capacity within the SLO, gates/rate_pick.py);
- blocked: the K a gate fails at the rate;
- wanted: while not decided, the K whose next life could decide it: the pick, each rival winning at least
  engine.contender_share of the resamples at this look's bar, and the baseline while the restart spread at the rate
  is not measured or a gate of the pick is unknown; fewest lives at the rate first; none while a capacity is at
  stake (`capacity_open` below: rates between, not lives, settle that);
- capacity_open: the K whose capacity within the SLO holds the verdict (`capacity_at_stake`: rate_pick's `open`, or
  the K whose capacity the brackets' own draws open over the pick in the contender share of the resamples); the
  sweep probes rates between or beyond their brackets' ends (run/strategies/adaptive_sweep.py), the chooser's stop
  names them;
- spread_measured: some K has two server lives at the rate (same-server repeats share one), or the spread is not
  unknown (decision.restart_spread, or the simulator's documented one); spare_baseline = not p.spread_unknown;
- look / last_look / decided_at_last_look: as engine.early_judged (decided_at_last_look: decided at the bar all the
  error left would set, the verdict if no life follows); tie: always False (a tie at a rate is the rule's own: the
  smallest K kept where none is told apart beyond the tie band, decided by its share);
- stopped_at: None (no stop rule skips larger K at a rate); early_stop is accepted for standing_of's signature.
Pure: rate windows in, a Standing out.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..config import DecisionConfig
from .cells.rate_window import RateWindow
from .engine import contender_share, early_look
from .gates.looks import Looks
from .rate_decision import RateEval, judge_at_rate, judged_at, lives_at_rate, look_number
from .standing import Standing


def valid_lives_at_rate(windows: Sequence[RateWindow], rate: float, variant: str = "") -> dict[int, int]:
    """Per K, its lives (repeats) with a valid window at `rate`."""
    return lives_at_rate(windows, rate, variant)


def spread_measured_at(ev: RateEval, p: DecisionConfig) -> bool:
    """Whether the restart spread at the rate is known: measured by a K's two lives there (cells/rate_spread.py: not
    by same-server repeats, which share one life), or stated by the config."""
    return (ev.spread is not None and ev.spread.measured) or not p.spread_unknown


def capacity_at_stake(ev: RateEval, share_bar: float, in_resamples: bool = True) -> tuple[int, ...]:
    """The K whose capacity within the SLO holds the verdict at the rate: those whose bracket leaves room for a
    capacity beyond the pick's (gates/rate_pick.py's `open`); else, not decided and with the resamples in which the
    pick did not stand for a capacity open on the brackets' own draws (`RateEval.drawn_open`: not where no K passed
    its gates, nor where the restart spread's life factors alone opened it, which more lives at the rate narrow) at
    `share_bar` or more (each resample once), each K no gate fails that was open in some: a probe between the brackets' ends
    sets them apart, another life at the rates measured does not (`in_resamples` False: the first case alone,
    where no probe is left to run)."""
    if ev.capacity_open or ev.status != "not_decided" or ev.pick is None or not in_resamples:
        return ev.capacity_open
    opened = [k for k, share in ev.drawn_open.items()
              if share > 0 and k != ev.pick and k in ev.eligible and not ev.blocked_by(k)]
    return tuple(sorted(opened)) if opened and ev.drawn_open_share >= share_bar else ()


def _wanted(ev: RateEval, p: DecisionConfig, lives: Mapping[int, int], known: bool,
            at_stake: tuple[int, ...]) -> tuple[int, ...]:
    """engine.wanted_of at a rate: the K whose next life could decide the verdict, fewest lives first."""
    if ev.status != "not_decided" or ev.pick is None or at_stake:
        return ()    # capacity at stake: another life at the rates measured cannot settle it (rate_text.next_runs)
    bar = contender_share(p, ev.resamples)
    wanted = {ev.pick} | {k for k, share in ev.shares.items() if k is not None and share >= bar}
    if ev.unknown(ev.pick) or not known:
        wanted.add(ev.base_k)
    return tuple(sorted(wanted, key=lambda k: (lives.get(k, 0), k != ev.pick, k)))


def standing_at_rate(windows: Sequence[RateWindow], rate: float, p: DecisionConfig, early_stop: bool = True,
                     looks: Looks | None = None, variant: str = "",
                     over: Mapping[int, Sequence[float]] | None = None, probing: bool = True) -> Standing:
    """The verdict at `rate` as a `Standing` (the module's docstring says each field; `probing` False: no capacity
    probe is left to run, so a capacity open only in the resamples is not at stake and lives are wanted)."""
    del early_stop  # no stop rule at a rate (the module's docstring)
    ev = judge_at_rate(windows, rate, p, variant, over)
    if ev is None:
        return Standing("no_measurement", contender_share=contender_share(p, p.resamples))
    number = look_number(windows, rate, looks, variant) if looks is not None else 0
    look, last = (looks.at(number), looks.at(number, last=True)) if looks is not None else (None, None)
    final_config = early_look(p, last) if last else p     # the verdict if no life follows
    final = judged_at(ev, final_config)
    config = early_look(p, look) if final.status == "decided" else final_config   # a look that could buy a life
    judged = judged_at(ev, config)
    lives = valid_lives_at_rate(windows, rate, variant)
    known = spread_measured_at(ev, p)
    share_bar = contender_share(config, judged.resamples)
    at_stake = capacity_at_stake(judged, share_bar, probing)
    return Standing(
        judged.status, judged.pick, {k: s for k, s in judged.shares.items() if k is not None},
        {k: st.speed for k, st in judged.standings.items()},
        frozenset(k for k in judged.ks if judged.blocked_by(k)), None, _wanted(judged, config, lives, known, at_stake),
        known, False, {}, not p.spread_unknown, decided_at_last_look=final.status == "decided",
        contender_share=share_bar, look=look, last_look=last, tie=False, capacity_open=at_stake)
