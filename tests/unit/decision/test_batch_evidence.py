"""The real-batch gate's evidence and the concurrency note say only what was measured, and read a queue the way
the gate does (decision/gates/checks.py `batch_check`, decision/explanation/reasons.py `diagnoses`)."""
import math

from unit.synthetic import window

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision import decide, evidence

P = DecisionConfig(resamples=200)


def batch_gate(decision, k):
    candidate = next(c for c in decision.candidates if c.k == k)
    return next(c for c in candidate.gates if c.name == "real batch")


def test_a_pass_names_no_preemption_or_kv_room_it_did_not_measure():
    """K=4 runs fewer and the gate passes; where the preemption counter or KV usage was not read, the evidence
    says so instead of "no preemption" / "KV not full"."""
    def stage(**k4):
        ws = [window(0, 16, 8.5, r, running_mean=15.5, waiting_mean=0.25, **k4) for r in range(2)]
        ws += [window(4, 16, 21.6, r, running_mean=13.7, waiting_mean=w, **k4) for r, w in enumerate((1.08, 0.83))]
        return batch_gate(decide(evidence(ws, 16), P, {}), 4)

    little_queued = stage(kv_usage_peak=math.nan, preemptions=math.nan)
    assert little_queued.status == "pass", little_queued
    assert "(preemptions not measured, KV usage not measured, little queued)" in little_queued.evidence, little_queued
    measured = stage()
    assert "(no preemption, KV not full, little queued)" in measured.evidence, measured

    ws = [window(0, 8, 6.33, r, running_mean=7.6, waiting_mean=0.2, kv_usage_peak=0.01) for r in range(2)]
    ws += [window(4, 8, 15.2, r, running_mean=6.6, waiting_mean=1.0, kv_usage_peak=0.01, preemptions=math.nan)
           for r in range(2)]
    queued = batch_gate(decide(evidence(ws, 8), P, {}), 4)
    assert queued.status == "pass" and "at its peak (preemptions not measured)" in queued.evidence, queued
    # how long each waits, in steps, is what tells it from a limit (a token budget this K's drafts fill)
    assert "some queued, but for 2.3 steps each beside a KV pool at 1%" in queued.evidence, queued


def concurrency_note(decision, k):
    return next(d for d in decision.diagnoses if d.startswith(f"Concurrency-bound at K={k},"))


def test_the_concurrency_note_reads_a_queue_as_the_gate_does():
    """8 users, K=4 running 5.5 with 1.0 waiting (15 % of their time at the server): a whole request queued,
    as the gate counts it, is not "not queued"; beside a KV pool at 1 % the note does not pin it on the
    scheduler (a step or two queued: the gate calls that turnover or a busy host); beside one at 70 % it does."""
    def stage(kv_peak):
        ws = [window(0, 8, 6.0, r, running_mean=6.0, waiting_mean=0.2, kv_usage_peak=0.01) for r in range(2)]
        ws += [window(4, 8, 12.0, r, running_mean=5.5, waiting_mean=1.0, kv_usage_peak=kv_peak) for r in range(2)]
        decision = decide(evidence(ws, 8), P, {})
        assert decision.recommended.k == 4, decision.verdict
        return concurrency_note(decision, 4), concurrency_note(decision, 0)

    roomy, base = stage(0.01)
    assert roomy.endswith("the limit is a busy host or turnover (a queue of a step or two beside a KV pool at "
                          "most half full)."), roomy
    assert base.endswith("the limit is request turnaround (users between requests, not queued)."), base
    fuller, _ = stage(0.7)
    assert fuller.endswith("the limit is the scheduler (--max-num-seqs / --max-num-batched-tokens)."), fuller
