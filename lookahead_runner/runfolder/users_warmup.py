"""A users stage's default warm-up lasts until every user's first request of the stage has ended.

At a users stage's start its new users send their first requests at once (at the first stage, into an empty
server): until each has ended, the stage has not run one request cycle and what ends in that time is the
transient, not the stage's steady state. Held against a closed loop whose attainment is exact (the calibration
suite's `users` group), windows that started at 25 % of the stage while that was shorter than one request per
user held the true SLO attainment and goodput in 58 % of cells at a stated 95 %.

So a users stage's default window starts after the later of WindowRules.warmup_for(stage) and its first request
cycle: the end of the last of the stage's first `users` requests by send time, `users` the users the stage adds
(all of them at a life's first stage; those the stage before left running are in steady state already, each sending
when its request in flight ends). The new users spawn within about a second and send at once, so their first
requests are the stage's first sends (with the few a running user sent in that second). A stage that
leaves less than one such cycle to measure after it (so that every user's steady request counts at least once) is
too short: "stage too short for answers of N s; lengthen to M s", M the two cycles it needs (then the default 25 %
is within the first). Measured by the same suite, asking half a cycle or none also held the cells' intervals, keeping
a few more stages (benchmarks/README.md). An explicit load.warmup_s is kept as set. Rate stages keep WindowRules.warmup_for alone (rate_windows.py judges their own transient).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class UsersWarmup:
    window_start_s: float    # when the stage's window starts (the stage's clock)
    first_cycle_s: float     # from the stage's start to the end of every user's first request (NaN: none sent)
    too_short: str = ""      # "stage too short for answers of N s; lengthen to M s"; "" when the window is long enough


def first_cycle_s(sent_s: np.ndarray, done_s: np.ndarray, users: int) -> tuple[float, bool]:
    """(seconds from the stage's start to the end of the last of its first `users` requests by send time, whether
    one of them had not ended, `done_s` NaN, or the stage sent fewer than `users`). `sent_s` / `done_s`: the stage's
    users' requests, seconds from the stage's start. NaN where it sent none."""
    if not len(sent_s) or users <= 0:
        return math.nan, False
    first = np.argsort(sent_s, kind="stable")[:users]
    ends = done_s[first]
    unended = bool(np.isnan(ends).any()) or len(first) < users
    known = ends[~np.isnan(ends)]
    return (float(known.max()) if len(known) else math.nan), unended


def users_warmup(start_s: float, end_s: float, default_warmup_s: float, users: int, sent_s: np.ndarray,
                 done_s: np.ndarray, cut: np.ndarray | None = None) -> UsersWarmup:
    """The window of a users stage [start_s, end_s) whose default warm-up (WindowRules.warmup_for) is
    `default_warmup_s`, `users` the users it adds (0 or fewer: the default), from its users' requests sent in it (`cut`: whether the end of the stage or test killed
    each one, its `done_s` then a lower bound)."""
    stage_s, default = end_s - start_s, start_s + default_warmup_s
    cut = np.zeros(len(sent_s), dtype=bool) if cut is None else cut
    done = np.where(cut, np.nan, done_s)
    cycle, unended = first_cycle_s(sent_s - start_s, done - start_s, users)
    if unended:   # a first request was cut or never recorded: it ran at least to the stage's end
        cycle = max(stage_s, cycle) if math.isfinite(cycle) else stage_s
        return UsersWarmup(default, cycle, _too_short(cycle, over=True))
    if math.isnan(cycle):
        return UsersWarmup(default, cycle)
    if stage_s - cycle < cycle:
        return UsersWarmup(default, cycle, _too_short(cycle))
    # just after the last first request's end: a window counts the requests ending at or after its start
    return UsersWarmup(max(default, float(np.nextafter(start_s + cycle, math.inf))), cycle)


def _too_short(cycle_s: float, over: bool = False) -> str:
    """The stage needs its first cycle and one more to measure: twice the cycle (over it where a first request had
    not ended, the cycle a lower bound)."""
    return (f"stage too short for answers of {'over ' if over else ''}{cycle_s:.0f} s; "
            f"lengthen to {'more than ' if over else ''}{math.ceil(2 * cycle_s):.0f} s")
