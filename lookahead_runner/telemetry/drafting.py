"""Was the setting in effect? The tokens a life really drafted per step against what its K promises.

Drafted tokens per step = delta(vllm:spec_decode_num_draft_tokens) / delta(vllm:spec_decode_num_drafts) over a
window: vLLM counts one draft per request per step that verified drafts, with the tokens it held (a step whose K
is 0 counts neither). So the ratio is the K the drafting steps really ran, whatever the batch.

Expected:
- a single-K life: K (a K=0 life: no drafts at all);
- a per-batch-size schedule: the schedule's K at the window's real batch. The runner has the real batch as the
  sampled `running` gauge (one reading per /metrics scrape), not per step, so the batch's spread over the window
  stands for its steps: each reading weighs as many drafts as it has running requests (a step at batch b drafts
  b times), over the readings whose K is above 0 (the only steps the ratio sees). The approximation: readings
  equally spaced in time stand for equal numbers of steps, though a step at the larger K takes longer. Where the
  batch crosses a boundary between two drafting K the expected value lies between them, placed by the readings:
  such a window is in effect within `mix_band` (the mix's share of its readings, Wilson's interval at MIX_LEVEL,
  widened by MIN_DRAFTING_SHARE as the share rule below is), less the tolerance below it. Before issue 46 anything
  between the two K passed, so a server ignoring the schedule (its largest K at every step) was missed in a third
  of all its windows (benchmarks/calibration's drafting group, 5,000 trials, seed 0: 290 of 787; windows whose
  batch crossed a boundary 301 of 778 missed, any fault); with the band, 0 of 787 and 42 of 778, false alarms 0.1 %
  of 5,895 windows either way (counters that saw no draft read 0, as the runner reads them). Where one side's K is 0, a window that made no draft at all is in effect too (every
  step it ran may have been on that side).

Where the schedule's K is 0 at every batch read in a window, a few drafts still come from steps whose batch dipped
under the boundary between two scrapes; a server ignoring the schedule drafts in nearly every decode step. So
there the window is not in effect only when the share of decode steps that drafted, drafts / (generation tokens -
accepted tokens) (each step of a request emits its accepted tokens + 1; a request's first token counts as a step
too, so an always-drafting server reads 1 less the share of first tokens), is above MIN_DRAFTING_SHARE; unknown
counters leave it to the ratio alone. Where some readings fall on the K=0 side and some not, the ratio (which sees
drafting steps only) reads the drafting side's K whether or not the schedule was applied, so the share decides
again: the expected share s is the batch-weighted share of readings on the drafting side. (Seen on a loaded host: a
stage at 34 users whose batch dipped under the boundary of 20 now and then hid an ignored schedule from the ratio.)

The share's limit (drafting_share_limit) scales with the steps expected at K=0, q = 1 - s: a window is not in
effect where the steps that did not draft fall short of q by more than the fraction MIN_DRAFTING_SHARE, i.e. its
share is above s + MIN_DRAFTING_SHARE x (1 - s). Why: a schedule that is applied leaves at least q of the steps
undrafted (first tokens only add to them, and a drafting step lasts longer than a K=0 one, so the readings, equally
spaced in time, understate the K=0 steps); an ignored one leaves only the first tokens, a share f of the steps. So
an applied schedule is flagged only where the readings overstate its K=0 share by more than 1 / (1 - 0.25) = 4/3
(their sampling error), and an ignored one is caught wherever f < 0.75 q. An additive margin (s + 0.25) could
never be passed once s exceeded 0.75 less f, whatever the server did. At s = 0 the limit is MIN_DRAFTING_SHARE, the
limit where no draft is expected at all; where q is as small as f (a batch almost always on the drafting side)
the share cannot tell the two apart, and nothing is claimed.

Tolerance (TOLERANCE_FRAC of the expected K, at least MIN_TOLERANCE_TOKENS): on the simulator a life without a
fault drafts exactly K per step in every window; on real vLLM 0.32 (CPU, draft model = the target, K=2 and K=4,
2 and 4 users, 5 s stages) every window read exactly 2.0 and 4.0 (880 / 440 and 1932 / 483 over the lives), so the
measured spread is 0 (tests/vllm_cpu/test_real_vllm.py::test_every_window_of_a_draft_model_life_drafted_its_k). A
draft is cut short only in a request's last K tokens before max_model_len, which the runner's fixed lengths keep
rare. 10 % leaves room for that and for the schedule's batch approximation, and still tells 2 of 4 (50 %) or 4 of
0 apart.

The requests' own figure (check_window): with vLLM 0.32's --per-request-spec-decode-metrics each response carries
num_draft_tokens and num_spec_steps (vllm/v1/metrics/stats.py RequestSpecDecodeMetrics; the scheduler observes the
same steps the counters count, those with a scheduled draft). Over a window's successful requests (by completion,
as its latencies), sum(num_draft_tokens) / sum(num_spec_steps) is the K their steps drafted (there is no histogram
by draft length: acceptance_histogram is by accepted tokens). Where the counters are missing (a filtering proxy,
another version's names) the check judges this figure and says so: for a single K against K; for a schedule
against the schedule's K at the batches read while those requests ran (from the first one's send to the window's
end), not at the window's alone, since a request's steps reach outside the window (below). Not against any K the
schedule runs: a server that ignores a schedule drafts its largest K (num_speculative_tokens) in every step, one
of its K, so it would pass at every batch (the demo's confirmation under --sim-fault ignore-spec-schedule read
8.0 at a real batch of 52, where the schedule runs K=4, and was called in effect). Any of its K only where no batch
was read. Where both are known and differ by more than the tolerance:
- a single K: the window is not in effect. K is the same at every step, so a request's steps before the window
  drafted what the window's did. Measured on the simulator: equal in 11 windows (K 2, 3, 4 at 4-48 users; K=4 at
  12 and 34), 1.49 / 1.50 and 1.50 / 1.50 in the 2 windows of drafts-short=0.5 at K=3; on real vLLM 0.32 equal in
  4 windows (perturbed draft, K=2 and 4: 2.0 and 4.0). Two figures that part mean the counters are not this
  server's steps (a metrics URL to another server, a proxy summing several) or the responses are not;
- a schedule: only a note (the confirmation stage's drafted_note, under the report's confirmation table). A
  request's steps reach outside the window, at other batches and so another K, and a window on the K=0 side counts
  a few drafts from dips that no request finishing there made: on the simulator's confirmation life at 34 users
  (expected K=0) the counters read 4.0 (a few drafts), the requests 0.0.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from ..vllm.schedule import Schedule

TOLERANCE_FRAC = 0.10
# the level at which a window's readings of the batch place the mix of two drafting K (mix_band): by its readings'
# sampling alone, a window the schedule ran falls outside in at most 1 % of windows. Measured (benchmarks/calibration,
# the drafting group, 5,000 trials): false alarms 0.1 % of 5,895 windows with and without the band (none added)
MIX_LEVEL = 0.99
MIN_TOLERANCE_TOKENS = 0.25
MIN_DRAFTING_SHARE = 0.25

CLAMPED = "K clamped by num_speculative_tokens (the schedule's or the flag's largest K)"
CUT_AT_MAX_MODEL_LEN = "drafts cut short near max_model_len"
SCHEDULE_IGNORED = "a per-batch-size schedule the engine ignores (vLLM #51510: Model Runner V2's drafter)"
DATA_PARALLEL = "data parallelism > 1 switching the schedule off (vLLM PR #32374)"
STALE_FLAG = "a speculative config left on a K=0 life (a stale flag)"
LIKELY_CAUSES = (CLAMPED, CUT_AT_MAX_MODEL_LEN, SCHEDULE_IGNORED, DATA_PARALLEL, STALE_FLAG)

COUNTERS = "counters"    # the figure the check judged came from the server's two counters
REQUESTS = "requests"    # from the window's requests' own metrics (the counters missing)
SCHEDULE_SPLIT = ("on a schedule the two can differ: a request's steps reach outside the window, where the batch "
                  "and so the K differ")


@dataclass(frozen=True, slots=True)
class Expected:
    """What a window should draft per step: `value` (the mix), within [low, high] K (one K: low = high)."""

    value: float
    low: float
    high: float
    batch: float | None = None       # the window's mean real batch (a schedule's expectation reads it)
    skips: bool = False              # some readings on a K=0 range: a window with no draft at all is in effect
    share: float | None = None       # then: the share of its decode steps expected to draft (batch-weighted readings)
    readings: int = 0                # the readings of the batch on drafting ranges the mix was read from

    @property
    def drafts(self) -> bool:
        return self.high > 0


@dataclass(frozen=True, slots=True)
class DraftCheck:
    """What check_window found: the figure it judged, from which source, why not in effect ("": in effect), and a
    note where the two sources disagree on a schedule (not a fault there)."""

    measured: float | None
    source: str                      # COUNTERS, REQUESTS (the counters missing) or "" (neither known)
    reason: str = ""
    note: str = ""


def expected_drafts(k: int, schedule: Sequence[Sequence[int]] | None = None,
                    batches: Iterable[float] = ()) -> Expected:
    """The drafted tokens per step a window of this life should show; `batches`: the real batch read in the window
    (the `running` gauge), used only with a schedule ([[lo, hi, K], ...], the largest K = `k`)."""
    readings = [b for b in batches if b is not None and not math.isnan(b) and b > 0]
    mean_batch = sum(readings) / len(readings) if readings else None
    if not schedule or k <= 0:
        return Expected(float(max(k, 0)), float(max(k, 0)), float(max(k, 0)), mean_batch)
    table = Schedule.from_ranges(schedule)
    if not readings:  # no reading of the batch: any of the schedule's K
        ks = [r.k for r in table.ranges if r.k > 0] or [0]
        return Expected(float(max(ks)), float(min(ks)), float(max(ks)), None)
    weighted = [(b, table.k_for(max(1, round(b)), k)) for b in readings]
    drafting = [(b, kb) for b, kb in weighted if kb > 0]
    if not drafting:
        return Expected(0.0, 0.0, 0.0, mean_batch, skips=True)
    value = sum(b * kb for b, kb in drafting) / sum(b for b, _ in drafting)
    skips = len(drafting) < len(weighted)
    share = sum(b for b, _ in drafting) / sum(b for b, _ in weighted) if skips else None
    return Expected(value, float(min(kb for _, kb in drafting)), float(max(kb for _, kb in drafting)), mean_batch,
                    skips=skips, share=share, readings=len(drafting))


def anywhere_on(k: int, schedule: Sequence[Sequence[int]]) -> Expected:
    """What a request's steps may have drafted on a schedule whatever the batch: any of its K above 0; no draft at
    all (skips) where a range has K=0."""
    whole = expected_drafts(k, schedule)
    return dataclasses.replace(whole, skips=any(r.k <= 0 for r in Schedule.from_ranges(schedule).ranges))


def drafting_share_limit(expected_share: float | None) -> float:
    """The share of decode steps that may draft where `expected_share` of them are expected to (None or 0: none):
    the steps expected at K=0 may fall short by MIN_DRAFTING_SHARE of themselves (see the module's docstring)."""
    expected_share = expected_share or 0.0
    return expected_share + MIN_DRAFTING_SHARE * (1.0 - expected_share)


def mix_band(expected: Expected) -> tuple[float, float]:
    """The drafted tokens per step an applied schedule may read where its readings of the batch fall on ranges of
    different drafting K (low < high): the mix's place between them, s = (value - low) / (high - low), as a share of
    its `readings` (Wilson's interval at MIX_LEVEL), then widened as the share rule widens the K=0 steps: its low
    end by MIN_DRAFTING_SHARE of itself (a step drafting more lasts longer, so readings equally spaced in time
    overstate the larger K's steps), its high end by MIN_DRAFTING_SHARE of what is left above it."""
    span = expected.high - expected.low
    s, n = (expected.value - expected.low) / span, max(expected.readings, 1)
    z = NormalDist().inv_cdf(0.5 + MIX_LEVEL / 2)
    centre = (s + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(max(s * (1 - s) / n + z * z / (4 * n * n), 0.0))
    s_low, s_high = max(centre - half, 0.0), min(centre + half, 1.0)
    s_low, s_high = s_low * (1 - MIN_DRAFTING_SHARE), s_high + MIN_DRAFTING_SHARE * (1 - s_high)
    return expected.low + span * s_low, expected.low + span * s_high


def tolerance(expected: float) -> float:
    return max(TOLERANCE_FRAC * expected, MIN_TOLERANCE_TOKENS)


def drafted_per_step(drafted: float | None, drafts: float | None) -> float | None:
    """Tokens per draft over an interval; None where the counters cannot tell or no draft was made (a stage
    window under load with no draft: analysis.py reads 0 there)."""
    if drafted is None or drafts is None or math.isnan(drafted) or math.isnan(drafts) or drafts <= 0 or drafted < 0:
        return None
    return drafted / drafts


def check_window(k: int, counters: float | None, requests: float | None, expected: Expected,
                 schedule: Sequence[Sequence[int]] = (), share: float | None = None,
                 request_batches: Iterable[float] = ()) -> DraftCheck:
    """A window's drafted tokens per step from both sources against what its setting promises: the counters' figure,
    else the requests' own (the counters missing); a single K whose two figures disagree is not in effect either,
    a schedule's only gets a note (see the module's docstring). `schedule`: the life's [[lo, hi, K], ...], if any;
    the requests' own figure is judged against its K at `request_batches`, the real batch read while the window's
    requests ran (any of its K where none was read), not the K at the window's batch alone."""
    measured, source = ((counters, COUNTERS) if counters is not None else (requests, REQUESTS) if requests is not None
                        else (None, ""))
    if schedule and source == REQUESTS:
        ran = expected_drafts(k, schedule, request_batches)
        reason = not_in_effect(k, measured, ran if ran.batch is not None else anywhere_on(k, schedule), True, None,
                               source)
    else:
        reason = not_in_effect(k, measured, expected, bool(schedule), share, source)
    split = disagreement(counters, requests)
    if not split:
        return DraftCheck(measured, source, reason)
    if schedule:
        return DraftCheck(measured, source, reason, note=f"{split} ({SCHEDULE_SPLIT})")
    if reason:  # no "; " inside a reason: the window's reasons are joined by it (analysis.py)
        return DraftCheck(measured, source, f"{reason}, the requests' own metrics {requests:.1f}")
    return DraftCheck(measured, source, f"K={k}: {split}")


def disagreement(counters: float | None, requests: float | None) -> str:
    """"" where the two figures agree within the tolerance of the larger (or one is unknown); else both."""
    if counters is None or requests is None or abs(counters - requests) <= tolerance(max(counters, requests)):
        return ""
    return (f"the counters read {counters:.1f} drafted tokens per step, the requests' own metrics "
            f"{requests:.1f}")


def drafting_share(drafts: float | None, generated: float | None, accepted: float | None) -> float | None:
    """The share of the interval's decode steps (one per request per step) that drafted; None where unknown."""
    values = (drafts, generated, accepted)
    if any(v is None or math.isnan(v) or v < 0 for v in values) or generated - accepted <= 0:
        return None
    return drafts / (generated - accepted)


def not_in_effect(k: int, measured: float | None, expected: Expected, schedule: bool = False,
                  share: float | None = None, source: str = COUNTERS) -> str:
    """"" when the window drafted what its setting promises (or the counters cannot tell); else the reason, e.g.
    "K=4 drafted 2.1 tokens per step (expected 4)". `share`: drafting_share, weighed where no draft is expected;
    `source` REQUESTS: the figure is the requests' own, which the reason says."""
    if measured is None:
        return ""
    if schedule and not expected.drafts and share is not None and share <= drafting_share_limit(0.0):
        return ""  # a few steps under the boundary between two readings of the batch
    if expected.skips and measured == 0:
        return ""  # the batch sat on the schedule's K=0 side whenever it stepped
    what = "the schedule" if schedule else f"K={k}"
    batch = f" at batch {expected.batch:.0f}" if schedule and expected.batch is not None else ""
    if expected.skips and expected.share is not None and share is not None and \
            share > drafting_share_limit(expected.share):  # the ratio sees only drafting steps: the share tells
        return (f"{what} drafted in {share:.0%} of its decode steps{batch} (expected about {expected.share:.0%}: "
                "K=0 in the others)")
    mixed = schedule and expected.readings > 0 and expected.low < expected.high
    if mixed:
        low, high = mix_band(expected)
        if low - tolerance(low) <= measured <= high:   # above it: no cut draft explains more tokens than the mix
            return ""
    elif expected.low - tolerance(expected.low) <= measured <= expected.high + tolerance(expected.high):
        return ""
    if mixed:
        target = (f"about {expected.value:.1f}: {low:.1f} to {high:.1f} by its {expected.readings} readings of the "
                  f"batch between K={expected.low:g} and K={expected.high:g}")
    elif not expected.drafts:
        target = "no drafts: K=0" + (f" at that batch" if schedule else "")
    elif expected.low != expected.high:
        about = f", about {expected.value:.1f}" if expected.batch is not None else ""  # no batch read: any of them
        target = f"between {expected.low:g} and {expected.high:g}{about}"
    else:
        target = f"{expected.value:g}"
    read = ", from the requests' own metrics: the counters missing" if source == REQUESTS else ""
    return f"{what} drafted {measured:.1f} tokens per step{batch} (expected {target}{read})"
