"""The adaptive sweep's chooser: which server lives to run next, or why to stop (pure; adaptive_sweep.py runs it).

It starts with the baseline and one K, then asks, as lives end, where the verdict at the target is least sure:
1. Could a K not run yet be the best? Model-free: the objective is taken to rise then fall with K (unimodal, as
   the stop rule assumes), so a K not run between the nearest measured K below and above the K still in the
   running (the leader and every K winning engine.contender_share of the resamples at the look's bar: 2 % at 90 %,
   0.5 % at a bar of 99 %) could be it, the smallest first. With a trusted performance model, first the model's
   best K at decision.production_users; then a K whose predicted objective, at the edge of the model's held-out
   error at the target (and its interval's top), reaches the leader's within the tie band, both as the model predicts them (its
   bias cancels), the most promising first; then the model-free rule's K the model does not rule out. It rules a K
   out (decision/perfmodel/prior.py) only where its KV pool is predicted to fill, or where it falls short of the
   leader by more than its held-out errors allow at the early-stop bar's error (a winner left out at most that
   often), with K measured below and above it (a K beyond every measured one is never ruled out: its prediction
   is an extrapolation). A K ruled out on its objective is run after all when the
   verdict comes to hang on it: it is the leader's neighbour in the grid and the sweep would otherwise stop not
   decided with nothing else to measure. A stop names each K the model ruled out (`Choice.skipped`), with its
   prediction. K at or above a stop the resamples agree on past the look's bar (engine.agreed_stop) are never run.
2. Otherwise, is it decided? Each life measured is a look, numbered by the lives measured, of at most
   sweep.max_lives; the engine says decided past the bar the error-spending rule sets for the look (gates/
   looks.py: at a confidence of 90 %, 99.3 % at look 3 of at most 8, 96.9 % at look 5, 92.7 % at look 8, so the
   verdict is wrong no more often over all its looks than one look is), or on a tie: every other K's gain over the
   smallest K inside the tie band at that bar (gates/stage.tie_confidence); and the restart spread is measured
   (one repeated life of any K measures it for every K, or earlier runs on this server did; a K measured once then
   borrows it). Until it is, the leader and the baseline (both ends of the stated gain) want `min_leader_lives`
   lives each, the leader first, so the first repeat measures the spread (`purpose` "spread"); then the baseline
   keeps its second (one outlier life of it would move every gain), and where the baseline leads, so does the K
   nearest it (one slow life of it would hide its gain), each spared where a life at half its figure could not
   turn the verdict (on the simulator only: a real host's outlier life read 40 % of its level), or where
   earlier runs on this server measured the spread (one life per K), unless a life is far from the level those
   runs measured for its K (`off_earlier`, past what the spread explains at a stated false-alarm rate: a second life
   of it, first, where the verdict hangs on it), or it is an end of the verdict those runs hold no level for (`unchecked`: no outlier check sees
   it, so it keeps its second). If not
   decided, one more life (the target stage only) of a K the verdict hangs on (`repeats_wanted`), the fewest
   lives first.
With N free slots, `choose_batch` proposes up to N, asking again with each proposal in flight. A life in flight
counts as run, not measured: a K whose first life runs is not "not run yet", a repeat running is not wanted
again; it counts toward max_lives_per_k and the budgets (sweep.max_server_minutes at a life's mean cost). What
a window in flight could change waits for it ("wait"): a K not run beyond one in flight, and every repeat.
It stops when decided, when nothing left could decide it, when the lives the budget leaves could not on the trend
measured (a futile look, gates/futility.py: not decided, never where this look as the last would decide), or before
a life would exceed a budget (sweep.max_lives, sweep.max_server_minutes), and says which; with lives in flight a
stop is asked again once they end.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from .explanation.text import pct, stop_text
# ModelView and Prediction are the chooser's view of the model: imported from here by the loop and the benchmarks
from .perfmodel.prior import (ModelSkip, ModelView, Prediction, as_skip, leader_mark, reach, ruled_out,
                              skip_text)
from .gates.futility import futile_why
from .standing import Standing

MAX_FAILED_STARTS = 2    # a K whose lives failed this often without a valid window is given up
BASELINE_OUTLIER_FACTOR = 0.5   # the worst a baseline life could read of its true figure (_baseline_spared)
CAPACITY_STOP = "capacity"      # Choice.purpose of a stop on a capacity within the SLO left open at a rate


@dataclass(frozen=True)
class Budget:
    max_lives: int
    max_server_s: float | None = None


@dataclass(frozen=True)
class Spent:
    """Lives ended so far per K (failed ones too), those with a valid window at the target, server-seconds; and the
    lives in flight per K (`pending`: chosen, not ended)."""

    lives: Mapping[int, int] = field(default_factory=dict)
    valid: Mapping[int, int] = field(default_factory=dict)
    server_s: float = 0.0
    next_life_s: float = 0.0       # what the next life is expected to cost (the mean of the lives so far)
    pending: Mapping[int, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Lives run or in flight."""
        return sum(self.lives.values()) + self.in_flight

    @property
    def in_flight(self) -> int:
        return sum(self.pending.values())

    def chosen(self, k: int) -> int:
        """K's lives run or in flight."""
        return self.lives.get(k, 0) + self.pending.get(k, 0)

    def with_pending(self, k: int) -> "Spent":
        return replace(self, pending={**self.pending, k: self.pending.get(k, 0) + 1})


@dataclass(frozen=True)
class Choice:
    k: int | None                   # None: stop
    all_stages: bool = True         # false: the target stage only
    why: str = ""                   # why this life, or why stop
    stop: str = ""                  # "decided" | "budget" | "exhausted" (nothing left to run that could decide it)
    #                                 | "futile" (the lives left could not decide it, on the trend measured)
    #                                 | "wait" (lives in flight first: only with some)
    purpose: str = ""               # "spread": a repeat that measures the restart spread for every K; on a stop,
    #                                 CAPACITY_STOP: the verdict hangs on a capacity open (capacity probes may settle it)
    skipped: tuple[ModelSkip, ...] = ()   # a stop: the K not run that the model ruled out, with its figures


@dataclass(frozen=True)
class Batch:
    """The lives to start now, the most informative first; `reason`: why no more (None: the free slots are full),
    final only when no life is in flight (`in_flight`: ask again when one ends, its windows may change it)."""

    lives: tuple[Choice, ...] = ()
    reason: Choice | None = None
    in_flight: int = 0

    @property
    def ends_sweep(self) -> bool:
        return not self.lives and not self.in_flight


def first_k(ks: list[int], model: ModelView) -> tuple[int, str]:
    """The K run beside the baseline first: the model's best prediction (its KV pool not filling), else the middle
    of the grid."""
    others = ks[1:]
    predicted = {k: p for k, p in model.predictions.items() if k in others and not p.preempting}
    if model.trusted and predicted:
        best = max(predicted, key=lambda k: predicted[k].objective)
        return best, f"K={best}: the model's best prediction at the target ({predicted[best].objective:.3g})"
    middle = others[(len(others) - 1) // 2]
    return middle, f"K={middle}: the middle of the grid ({_untrusted(model)})"


def _untrusted(model: ModelView) -> str:
    return "no trusted model" if not model.why_not else f"model not used: {model.why_not}"


def contenders(standing: Standing) -> list[int]:
    out = {k for k, share in standing.shares.items() if k is not None and share >= standing.contender_share}
    if standing.leader is not None:
        out.add(standing.leader)
    return sorted(out & set(standing.measured)) or ([standing.leader] if standing.leader is not None else [])


def bracket(ks: list[int], standing: Standing) -> tuple[float, float]:
    """(low, high), exclusive: where the best K lies if the objective is unimodal in K."""
    running = contenders(standing)
    if not running:
        return -math.inf, math.inf
    below = [k for k in standing.measured if k < min(running)]
    above = [k for k in standing.measured if k > max(running)]
    return (max(below) if below else -math.inf), (min(above) if above else math.inf)


def _untried(ks: list[int], standing: Standing, spent: Spent) -> list[int]:
    """K with no life run or in flight, below an agreed stop."""
    return [k for k in ks if not spent.chosen(k) and (standing.stopped_at is None or k < standing.stopped_at)]


def model_skips(ks: list[int], standing: Standing, spent: Spent, model: ModelView,
                p_tie: float = 0.03) -> tuple[ModelSkip, ...]:
    """The K not run yet that a trusted model rules out against the leader (decision/perfmodel/prior.py), in K order."""
    leader = standing.leader
    if not model.trusted or leader is None or leader not in standing.objective:
        return ()
    out = ruled_out(_untried(ks, standing, spent), leader, standing.objective[leader], standing.measured, model, p_tie)
    return tuple(out[k] for k in sorted(out))


def could_win(ks: list[int], standing: Standing, spent: Spent, model: ModelView,
              p_tie: float = 0.03) -> tuple[list[int], str]:
    """K not run yet that could be the best, most promising first, and on what ground."""
    untried = _untried(ks, standing, spent)
    low, high = bracket(ks, standing)
    running, waiting = contenders(standing), [k for k in spent.pending if k not in standing.objective]
    between = [k for k in untried if low < k < high and not _past_one_in_flight(k, running, waiting)]
    leader = standing.leader
    if model.trusted and leader is not None and leader in standing.objective:
        if model.production_best in untried:
            return [model.production_best], "the model's best K at decision.production_users is not measured yet"
        skipped = {s.k for s in model_skips(ks, standing, spent, model, p_tie)}
        mark = leader_mark(model, leader, standing.objective[leader]) / (1 + p_tie)
        hopeful = sorted((k for k in untried if k in model.predictions and k not in skipped
                          and reach(model.predictions[k], model.heldout_error) >= mark),
                         key=lambda k: -model.predictions[k].objective)
        unknown = [k for k in untried if k not in model.predictions]
        # behind the leader by the model, but not ruled out (no K measured on one side of it): the model-free rule's
        extrapolated = sorted((k for k in between if k in model.predictions and k not in skipped and k not in hopeful),
                              key=lambda k: -model.predictions[k].objective)
        if hopeful or unknown:
            return (hopeful + unknown + extrapolated,
                    "the model predicts it could beat the leader without filling the KV pool")
        return extrapolated, ("it lies between the K measured around the leader; the model cannot rule it out, with no "
                              "K measured on one side of it")
    return between, "it lies between the K measured around the leader"


def _past_one_in_flight(k: int, running: list[int], waiting: list[int]) -> bool:
    """Is a K whose first window is still in flight between `k` and the K in the running? Its window could close
    the bracket before `k` (the serial sweep would have had it first)."""
    if not running:
        return bool(waiting)
    if k > max(running):
        return any(max(running) < w < k for w in waiting)
    return k < min(running) and any(k < w < min(running) for w in waiting)


def choose(ks: list[int], standing: Standing, spent: Spent, model: ModelView, budget: Budget,
           max_lives_per_k: int, min_leader_lives: int = 2, tie_tolerance: float = 0.03) -> Choice:
    """The next life, or the reason to stop. `ks` is the planned K, the baseline first."""
    ks = sorted(ks)
    pick = _next(ks, standing, spent, model, max_lives_per_k, min_leader_lives, tie_tolerance)
    if pick.k is None:
        return replace(pick, skipped=model_skips(ks, standing, spent, model, tie_tolerance))
    running = f", {spent.in_flight} of them in flight" if spent.in_flight else ""
    if spent.total >= budget.max_lives:
        return Choice(None, why=f"budget: sweep.max_lives = {budget.max_lives} lives run{running} (next would have "
                                f"been {pick.why})", stop="budget",
                      skipped=model_skips(ks, standing, spent, model, tie_tolerance))
    booked = spent.server_s + spent.next_life_s * (1 + spent.in_flight)  # each life in flight at a life's mean cost
    if budget.max_server_s is not None and booked > budget.max_server_s:
        flight = f", ~{spent.next_life_s * spent.in_flight / 60:.1f} in flight" if spent.in_flight else ""
        return Choice(None, why=f"budget: another life (~{spent.next_life_s / 60:.1f} min) would pass "
                                f"sweep.max_server_minutes = {budget.max_server_s / 60:g} "
                                f"({spent.server_s / 60:.1f} spent{flight}; next would have been {pick.why})",
                      stop="budget", skipped=model_skips(ks, standing, spent, model, tie_tolerance))
    if futile := _futile(standing, spent, budget, max_lives_per_k, pick):
        return replace(futile, skipped=model_skips(ks, standing, spent, model, tie_tolerance))
    return pick


def choose_batch(n: int, ks: list[int], standing: Standing, spent: Spent, model: ModelView, budget: Budget,
                 max_lives_per_k: int, min_leader_lives: int = 2, tie_tolerance: float = 0.03) -> Batch:
    """Up to `n` lives (the free slots) to start now: `choose` asked again with each one counted as in flight
    (`spent.pending` holds the lives in flight already)."""
    lives: list[Choice] = []
    reason = None
    for _ in range(max(n, 0)):
        choice = choose(ks, standing, spent, model, budget, max_lives_per_k, min_leader_lives, tie_tolerance)
        if choice.k is None:
            reason = choice
            break
        lives.append(choice)
        spent = spent.with_pending(choice.k)
    return Batch(tuple(lives), reason, spent.in_flight)


def _next(ks: list[int], standing: Standing, spent: Spent, model: ModelView, max_lives_per_k: int,
          min_leader_lives: int, tie_tolerance: float) -> Choice:
    base = ks[0]
    given_up = {k for k in ks if spent.lives.get(k, 0) >= MAX_FAILED_STARTS and not spent.valid.get(k, 0)}
    if base in given_up:
        return Choice(None, why=f"the baseline K={base} gave no valid window in {spent.lives[base]} lives",
                      stop="exhausted")
    base_measured = spent.valid.get(base, 0) or base in standing.objective
    if not spent.chosen(base) or (not base_measured and not spent.pending.get(base, 0)):
        return Choice(base, why=f"K={base}: the baseline")
    if all(spent.chosen(k) == 0 for k in ks[1:]):
        k, why = first_k(ks, model)
        return Choice(k, why=why)
    if not base_measured:  # its life is in flight: everything after rests on it
        return Choice(None, why=f"the baseline K={base}'s first window is not in yet", stop="wait")
    retry = [k for k in ks if spent.lives.get(k, 0) and not spent.valid.get(k, 0) and k not in given_up
             and not spent.pending.get(k, 0)]
    if retry:
        return Choice(retry[0], why=f"K={retry[0]} again: its life gave no valid window at the target")
    hopeful, ground = could_win([k for k in ks if k not in given_up], standing, spent, model, tie_tolerance)
    if hopeful:
        return Choice(hopeful[0], why=f"K={hopeful[0]}: not run yet and could be the best ({ground})")
    waiting = [k for k in ks if spent.pending.get(k, 0) and k not in standing.objective]
    if waiting:  # the leader, the verdict and its repeats hang on their windows
        return Choice(None, why=f"the first window of K {', '.join(map(str, waiting))} is not in yet", stop="wait")
    leader = standing.leader
    if standing.status == "no_eligible":
        return Choice(None, why="no K passes its gates at the target", stop="exhausted")
    # both ends of the gain a verdict states (the leader, the baseline) stand on one life each until the restart
    # spread is measured: one repeated life (of the leader first) measures it for every K, and from then on a K
    # measured once borrows it. The baseline, which every gain is measured against, keeps its second life (unless
    # spared): one outlier life of it, which no spread measured on other K reveals, once made a confident wrong
    # verdict; where earlier runs on this server measured the spread, none is bought (one life per K) but for an end
    # whose life no level of theirs can check (`unchecked`): the outlier guard is blind there
    spared = standing.spare_baseline and _baseline_spared(standing, base, tie_tolerance)
    ends = (leader,) if spared else (leader, base)
    # where the baseline leads, its nearest rival is the other end of the closest gain the verdict states: one slow
    # life of it hides its gain as one of the baseline hides a loss (a 20 %-slow life of a K truly +3.5 % read
    # "decided, K=0, 99 %"), so it keeps its second life too, on the same terms as the baseline
    rival = _nearest_rival(standing, base) if leader == base else None
    if rival is not None and not (standing.spare_baseline and _rival_spared(standing, rival, tie_tolerance)):
        ends += (rival,)
    measuring = standing.spread_measured or any(spent.pending.get(k, 0) and spent.chosen(k) >= 2 for k in ks)
    if standing.spread_from_earlier:
        ends = tuple(k for k in ends if k in standing.unchecked)
    elif measuring:
        ends = tuple(k for k in ends if k in (base, rival))
    ends += tuple(sorted(standing.off_earlier))  # one life far from what earlier runs measured for its K
    short = [k for k in dict.fromkeys(ends) if k is not None
             and spent.valid.get(k, 0) + spent.pending.get(k, 0) < min_leader_lives]
    if standing.status == "decided" and leader is not None:
        if not short:
            share = standing.shares.get(leader, 0.0)
            spared_text = (f" (the baseline on {spent.valid.get(base, 0)} life: K={leader} is more than twice as "
                           "fast)" if spared and spent.valid.get(base, 0) < min_leader_lives
                           and not standing.spread_from_earlier else "")
            return Choice(None, why=stop_text(leader, share, standing.look, standing.tie, tie_tolerance)
                          + spared_text, stop="decided")
        wanted = short
    else:
        wanted = [k for k in standing.wanted if not spent.pending.get(k, 0)] + short  # one repeat in flight: asked
    # a life off earlier runs' level first; among K on as few lives, an end the stop needs anyway (`short`) before
    # a repeat it may not: no stop comes while one is short, and its life may settle the rest
    wanted = sorted({k for k in wanted if spent.chosen(k) < max_lives_per_k},
                    key=lambda k: (k not in standing.off_earlier, spent.valid.get(k, 0), k not in short, k != leader,
                                   -standing.shares.get(k, 0.0), k))
    if not wanted:
        if spent.in_flight:
            return Choice(None, why="the repeats the verdict hangs on are in flight", stop="wait")
        if standing.status != "decided" and not standing.decided_at_last_look:
            after_all = _hangs_on_skipped(ks, standing, spent, model, tie_tolerance)
            if after_all is not None:
                return after_all
        why = (f"K={', '.join(map(str, standing.capacity_open))}'s capacity within the SLO could set it over "
               f"K={leader}: rates between those measured settle that, not lives at them (what to run next)"
               if standing.capacity_open else "every K the verdict hangs on has load.max_repeats lives"
               if standing.wanted or leader is not None else "nothing left to measure could decide it")
        said = (("decided at decision.confidence, short of an early stop's bar" if standing.last_look is None else
                 f"decided as the last look ({standing.last_look.text()})") if standing.decided_at_last_look
                else "not decided")
        return Choice(None, why=f"{said}: {why}", stop="exhausted",
                      purpose=CAPACITY_STOP if standing.capacity_open else "")
    k = wanted[0]
    who = (f"it {_share_text(standing, k)}" if k == leader else "the baseline every gain is measured against"
           if k == base else f"the K nearest the baseline K={base} that leads")
    spread = "the restart spread, which every K measured once borrows"
    if k in standing.off_earlier and k in short:
        why = (f"its one life reads {standing.off_earlier[k]:+.0%} off what earlier runs on this server measured for "
               "it: an outlier life?")
    elif standing.spread_from_earlier and k in standing.unchecked and k in short:
        why = ("earlier runs on this server hold no level of it to check its one life against: a second guards "
               "against one outlier life")
    elif measuring:
        why = (f"{who} on {spent.valid.get(k, 0)} life; a second guards against one outlier life (the restart "
               "spread is measured)" if k in short else f"the verdict hangs on it ({_share_text(standing, k)})")
    else:
        why = (f"{who} on {spent.valid.get(k, 0)} life; a second measures {spread}" if k in short
               else f"the verdict hangs on it ({_share_text(standing, k)}); it measures {spread}")
    return Choice(k, all_stages=False, why=f"K={k} once more (life {spent.chosen(k) + 1}): {why}",
                  purpose="" if measuring else "spread")


def _futile(standing: Standing, spent: Spent, budget: Budget, max_lives_per_k: int, pick: Choice) -> Choice | None:
    """A stop, not decided, where the lives the budget leaves could not, on the trend measured, bring the verdict
    past the bar of any look the sweep could end at (decision/gates/futility.py); None where a life may still
    help. A pick of a K's first life (all stages) is never futile: that life may change the leader."""
    if pick.all_stages:
        return None
    left = budget.max_lives - (spent.total - spent.in_flight)   # a life in flight is one the budget has left
    if budget.max_server_s is not None and spent.next_life_s > 0:
        left = min(left, int((budget.max_server_s - spent.server_s) // spent.next_life_s))
    why = futile_why(standing, spent.valid, left, max_lives_per_k)
    return Choice(None, why=why, stop="futile") if why else None


def _hangs_on_skipped(ks: list[int], standing: Standing, spent: Spent, model: ModelView,
                      tie_tolerance: float) -> Choice | None:
    """A K the model ruled out on its objective that is the leader's neighbour in the grid, where the sweep would
    otherwise stop not decided with nothing else to measure: the verdict then rests on the model's word about it
    (one life of it tests that word where it matters). The one predicted highest first."""
    at = ks.index(standing.leader) if standing.leader in ks else None
    if at is None:
        return None
    neighbours = set(ks[max(at - 1, 0):at + 2]) - {standing.leader}
    skips = [s for s in model_skips(ks, standing, spent, model, tie_tolerance) if s.k in neighbours and not s.kv_fills]
    if not skips:
        return None
    skip = max(skips, key=lambda s: (s.predicted, -s.k))
    return Choice(skip.k, why=f"K={skip.k} after all: not decided with nothing else to measure, and it neighbours the "
                              f"leader K={standing.leader} (the model predicted it {pct(skip.behind)} behind)")


def _baseline_spared(standing: Standing, base: int, tie_tolerance: float) -> bool:
    """A decided leader so far ahead that a baseline life reading half its true figure (an outlier worse than any
    seen: not-the-lever's K=0 once read 12.2 req/s against 20.1) could not turn the verdict: the baseline's second
    life could change only the stated gain, never the K."""
    leader = standing.leader
    if standing.status != "decided" or leader is None or leader == base:
        return False
    ahead, behind = standing.objective.get(leader, math.nan), standing.objective.get(base, math.nan)
    return behind > 0 and ahead >= behind / BASELINE_OUTLIER_FACTOR * (1 + tie_tolerance)


def _nearest_rival(standing: Standing, base: int) -> int | None:
    """The measured K other than the baseline whose objective is nearest the baseline's (the highest): the K a slow
    life could hide a gain of. A K a gate fails counts: a slow life lengthens its latency too."""
    rivals = [k for k in standing.objective if k != base and math.isfinite(standing.objective[k])]
    return max(rivals, key=lambda k: (standing.objective[k], -k)) if rivals else None


def _rival_spared(standing: Standing, rival: int, tie_tolerance: float) -> bool:
    """The baseline's lead so large that the rival's life reading half its true figure (BASELINE_OUTLIER_FACTOR, as
    `_baseline_spared`) could not turn the verdict."""
    ahead, behind = standing.objective.get(standing.leader, math.nan), standing.objective.get(rival, math.nan)
    return behind > 0 and ahead >= behind / BASELINE_OUTLIER_FACTOR * (1 + tie_tolerance)


def _share_text(standing: Standing, k: int) -> str:
    share = standing.shares.get(k)
    lead = "leads" if k == standing.leader else "wins"
    if share is None:
        return "no share yet"
    return f"{lead} in {pct(share, digits=0 if share >= 0.1 else 1)} of the resamples"


def run_note(ks: list[int], lives_by_k: Mapping[int, int], stopped_because: str, stop: str = "", slots: int = 1,
             skipped=(), probes: int = 0, ended_early: int = 0) -> str:
    """The decision's reason line about an adaptive sweep: what it ran (`probes`: how many of those lives were
    capacity probes, at a rate; `ended_early`: how many of those ended clearly over capacity), what it left out (each K the model ruled out with its prediction: `skipped`,
    ModelSkip or plan.json's record of one), why it stopped."""
    ran = ", ".join(f"K={k} x{n}" if n > 1 else f"K={k}" for k, n in sorted(lives_by_k.items()))
    left = [k for k in sorted(ks) if not lives_by_k.get(k)]
    named = [as_skip(s) for s in skipped if s.k in left]
    left = [k for k in left if k not in {s.k for s in named}]
    why_left = ("the budget ran out first" if stop == "budget" else "the sweep has not finished" if not stop else
                "when it stopped, none could be the best on what was measured (or predicted by a trusted model)")
    skipped = "".join(f"; {skip_text(s)}" for s in named)
    skipped += f"; K {', '.join(map(str, left))} not run: {why_left}" if left else ""
    pace = "one at a time" if slots <= 1 else f"up to {slots} at a time (one per slot)"
    if probes:
        ran += (f"; {probes} of them capacity probe{'s' if probes != 1 else ''}, one rate stage each at a rate the "
                "config does not list" + (f", {ended_early} ended early, clearly over capacity" if ended_early else ""))
    return (f"Adaptive sweep: {sum(lives_by_k.values())} lives chosen {pace} ({ran}){skipped}; "
            f"stopped: {stopped_because or 'not yet (interrupted)'}.")
