"""The adaptive sweep's loop (adaptive_sweep.run_adaptive) with each server life stubbed by synthetic windows:
what it writes to plan.json, where it stops, and how --resume carries on."""
from types import SimpleNamespace

from unit.synthetic import window

from lookahead_runner.run.strategies import adaptive_sweep
from lookahead_runner.run.strategies.life_pool import OneAtATime
from lookahead_runner.runfolder import results
from lookahead_runner.decision.adaptive import ModelView, Prediction
from lookahead_runner.config import config_from_dict
from lookahead_runner.decision import evidence
from lookahead_runner.runfolder.plan import Plan, PlannedLife, has_plan, life_state, read_plan, read_status, write_plan, write_status
from lookahead_runner.config import ResolvedServer
from lookahead_runner.vllm.probe import Capabilities

REQ_PER_S = {0: 20.0, 2: 45.0, 4: 50.0, 8: 30.0}   # the demo's shape: K=4 best, K=8 past the top
CONFIG = config_from_dict({
    "speculation": {"k": [0, 2, 4, 8]}, "sweep": {"strategy": "adaptive"},
    "load": {"stages": [{"users": 16, "duration_s": 20}, {"users": 64, "duration_s": 20}]},
    "decision": {"target_users": 64, "resamples": 200}})


def caps() -> Capabilities:
    return Capabilities("0.32.0", frozenset({"--speculative-config"}))


class Lives:
    """Stands in for the server lives: each run writes its status and a window per stage it ran."""

    def __init__(self, run_dir, stop_after: int | None = None):
        self.run_dir, self.stop_after, self.ran, self.windows = run_dir, stop_after, [], {}

    def run_one(self, config, life):
        out = results.life_dir(self.run_dir, life.setting.name, life.repeat)
        if life_state(out) == "done":
            return
        if self.stop_after is not None and len(self.ran) >= self.stop_after:
            raise KeyboardInterrupt("cut")
        out.mkdir(parents=True, exist_ok=True)
        self.ran.append((life.key, [stage.users for stage in config.load.stages]))
        self.windows[life.key] = [window(life.setting.k, stage.users, REQ_PER_S[life.setting.k] * (1 + life.repeat / 100),
                                         life.repeat) for stage in config.load.stages]
        write_status(out, "done", start_s=120.0, measure_s=20.0 * len(config.load.stages))

    def read_run(self, run_dir):
        plan = read_plan(run_dir)
        statuses = {l.dir: read_status(run_dir / l.dir) for l in plan.lives if life_state(run_dir / l.dir) != "missing"}
        windows = [w for key, ws in self.windows.items() if key in statuses and statuses[key].state == "done"
                   for w in ws]
        return SimpleNamespace(plan=plan, statuses=statuses, evidence=lambda: evidence(windows, 64))


def start(tmp_path, monkeypatch, lives: Lives, config=CONFIG, model=ModelView(why_not="no performance model here"),
          pool=None):
    monkeypatch.setattr(adaptive_sweep, "read_run", lives.read_run)
    monkeypatch.setattr(adaptive_sweep, "model_view", lambda data, config: model)
    monkeypatch.setattr(adaptive_sweep, "write_tables", lambda run_dir: None)
    if not has_plan(tmp_path):
        write_plan(tmp_path, adaptive_sweep.start_plan(Plan(
            run_id="t", config=config.model_dump(mode="json"), probe={"version": "0.32.0"}, target_users=64,
            lives=[PlannedLife(setting="k0", k=0, repeat=0, argv=[], dir="x")])))
    said = []
    choice = adaptive_sweep.run_adaptive(config, caps(), tmp_path, said.append, pool or OneAtATime(lives.run_one),
                                         ResolvedServer.resolve(config.server))
    return choice, said


def test_it_runs_fewer_lives_than_the_grid_and_stops_decided(tmp_path, monkeypatch):
    lives = Lives(tmp_path)
    choice, said = start(tmp_path, monkeypatch, lives)
    keys = [key for key, _ in lives.ran]
    assert keys[:2] == ["k0/r0", "k4/r0"] and choice.stop == "decided" and "K=4 wins" in choice.why
    assert "k4/r1" in keys and len(keys) < 8                     # the grid: 4 K x 2 repeats
    assert dict(lives.ran)["k4/r1"] == [64] and dict(lives.ran)["k4/r0"] == [16, 64]  # a repeat: the target only
    plan = read_plan(tmp_path)
    assert [l.dir for l in plan.lives] == keys and plan.adaptive.stop == "decided"
    assert plan.lives[-1].stages == [64] and "once more" in plan.lives[-1].chosen
    assert "--speculative-config" in plan.lives[1].argv and plan.lives[1].k == 4
    assert results.read_json(tmp_path / "plan.json")["adaptive"]["stop"] == "decided"  # as saved
    assert any("no performance model" in line for line in said) and said[-1].startswith("adaptive: stopped: decided")


def test_its_stop_names_the_look_and_the_boundary_the_verdict_cleared(tmp_path, monkeypatch):
    """Each life measured is a look of at most the budget's lives; the stop says which look and the share the
    error-spending rule set for it (decision/gates/looks.py), not a bar every look shares."""
    lives = Lives(tmp_path)
    choice, said = start(tmp_path, monkeypatch, lives)
    look = len(lives.ran)
    assert choice.stop == "decided" and choice.why.startswith(f"decided at look {look} of at most 8: boundary "), \
        choice.why
    assert read_plan(tmp_path).adaptive.stopped == choice.why and "K=4 wins in" in choice.why


def test_a_resumed_sweep_keeps_the_lives_done_and_ends_the_same(tmp_path, monkeypatch):
    whole = Lives(tmp_path / "whole")
    (tmp_path / "whole").mkdir()
    choice, _ = start(tmp_path / "whole", monkeypatch, whole)
    cut = Lives(tmp_path / "cut", stop_after=2)
    (tmp_path / "cut").mkdir()
    try:
        start(tmp_path / "cut", monkeypatch, cut)
    except KeyboardInterrupt:
        pass
    plan = read_plan(tmp_path / "cut")
    assert [l.dir for l in plan.lives] == [key for key, _ in whole.ran][:3]  # the third was chosen, then cut
    cut.stop_after = None
    resumed, _ = start(tmp_path / "cut", monkeypatch, cut)
    assert [key for key, _ in cut.ran] == [key for key, _ in whole.ran]          # none ran twice
    assert (resumed.stop, resumed.why) == (choice.stop, choice.why)


def test_the_budget_stops_it_and_says_so(tmp_path, monkeypatch):
    config = config_from_dict(CONFIG.model_dump() | {"sweep": {"strategy": "adaptive", "max_server_minutes": 6}})
    lives = Lives(tmp_path)
    choice, said = start(tmp_path, monkeypatch, lives, config)
    assert choice.stop == "budget" and "sweep.max_server_minutes = 6" in choice.why
    assert len(lives.ran) == 2                      # 2 x (120 + 40) s spent; a third would pass 360 s
    assert read_plan(tmp_path).adaptive.stop == "budget"


def test_a_trusted_model_leaves_out_the_k_it_predicts_cannot_win(tmp_path, monkeypatch):
    # K=2 at most 47 req/s (below K=4's measured 50 and its 3 % tie band); K=8 would fill the KV pool
    predicted = {0: Prediction(20, 19, 21), 2: Prediction(45, 43, 47), 4: Prediction(50, 48, 52),
                 8: Prediction(60, 50, 70, preempting=True)}
    lives = Lives(tmp_path)
    # held-out errors up to 5 % at the target, the skip at 1 %: K=2 is given up to 7.0 % past its prediction, 48.4
    held = ModelView(True, predicted, "", heldout_error=0.05, unit="req/s",
                     heldout_errors=(0.05, -0.01, 0.01, -0.01, 0.01, -0.01), skip_level=0.01)
    choice, said = start(tmp_path, monkeypatch, lives, model=held)
    # K=2 and K=8 never run; K=4 wins in 99.6 % of 1,600 draws at look 3, within their Monte Carlo error of its bar
    # (99.3 % of at most 8 lives: decision/gates/looks.py), so the baseline's second life decides it at look 4 (98.2 %)
    assert [key for key, _ in lives.ran] == ["k0/r0", "k4/r0", "k4/r1", "k0/r1"] and choice.stop == "decided"
    assert "the performance model is trusted" in said[0] and "the model's best prediction" in said[2]
    assert {l["model_trust"] for l in results.read_json(tmp_path / "plan.json")["lives"]} == {"trusted"}
    # plan.json names each K left out on the model's word, with what it predicted (the report's reason line reads it)
    skipped = results.read_json(tmp_path / "plan.json")["adaptive"]["model_skipped"]
    assert [(s["k"], s["predicted"], s["leader"], s["heldout_error"], s["kv_fills"], s["count"]) for s in skipped] == [
        (2, 45, 4, 0.05, False, 6), (8, 60, 4, 0.05, True, 6)]
    assert round(skipped[0]["bound"], 3) == 0.070 and skipped[0]["level"] == 0.01


class TwoSlots:
    """Stands in for two Ray slots: a submitted life is in flight until `wait` ends the oldest (then its windows)."""

    slots = 2

    def __init__(self, lives: Lives):
        self.lives, self.running, self.started = lives, [], []

    def free(self):
        return self.slots - len(self.running)

    def submit(self, config, life):
        out = results.life_dir(self.lives.run_dir, life.setting.name, life.repeat)
        if life_state(out) == "done":
            return
        out.mkdir(parents=True, exist_ok=True)
        write_status(out, "running")
        self.running.append((config, life))
        self.started.append((life.key, [l.key for _, l in self.running]))

    def in_flight(self):
        return [life for _, life in self.running]

    def wait(self):
        config, life = self.running.pop(0)
        self.lives.run_one(config, life)
        return [life]


def test_two_slots_run_two_lives_at_once_and_end_in_the_serial_verdict(tmp_path, monkeypatch):
    serial = Lives(tmp_path / "serial")
    (tmp_path / "serial").mkdir()
    alone, _ = start(tmp_path / "serial", monkeypatch, serial)
    lives = Lives(tmp_path / "two")
    (tmp_path / "two").mkdir()
    pool = TwoSlots(lives)
    choice, said = start(tmp_path / "two", monkeypatch, lives, pool=pool)
    assert pool.started[:2] == [("k0/r0", ["k0/r0"]), ("k4/r0", ["k0/r0", "k4/r0"])]  # the first two at once
    assert "adaptive: 2 lives at once on 2 slots" in said
    # the same verdict; a life may start beside another in flight on a look the other's window then changes, where
    # the serial sweep, seeing that window first, spares it (the baseline's second life; a third of the leader,
    # wanted before K=2's 2 % of 1,600 draws held the early-stop bar back)
    assert not pool.running and choice.stop == alone.stop == "decided"
    assert choice.why.startswith("decided at look ") and alone.why.startswith("decided at look ")
    assert "K=4 wins in" in choice.why and "K=4 wins in" in alone.why
    plan = read_plan(tmp_path / "two")
    assert all(l.chosen for l in plan.lives)
    extra = {l.dir for l in plan.lives} - set(key for key, _ in serial.ran)
    assert set(key for key, _ in serial.ran) <= {l.dir for l in plan.lives}
    assert all(len(at_once) == 2 for key, at_once in pool.started if key in extra), (extra, pool.started)
    ran = [key for key, _ in lives.ran]
    assert sorted(ran) == sorted(l.dir for l in plan.lives) and len(set(ran)) == len(ran)  # none twice
    # no K chosen twice for one reason: every K's lives are numbered 0, 1, ... in the order chosen
    for k in {l.k for l in plan.lives}:
        assert [l.repeat for l in plan.lives if l.k == k] == list(range(sum(l.k == k for l in plan.lives)))
    assert any(len(at_once) == 2 for _, at_once in pool.started[2:])  # and later lives overlap too


def test_a_resumed_sweep_on_two_slots_starts_the_cut_lives_at_once(tmp_path, monkeypatch):
    lives = Lives(tmp_path, stop_after=1)
    pool = TwoSlots(lives)
    try:
        start(tmp_path, monkeypatch, lives, pool=pool)
    except KeyboardInterrupt:
        pass
    cut = [l.dir for l in read_plan(tmp_path).lives if life_state(tmp_path / l.dir) != "done"]
    assert len(cut) == 2, cut                         # two lives in flight when it was cut: one ended, two chosen
    lives.stop_after, pool.running, pool.started = None, [], []
    choice, _ = start(tmp_path, monkeypatch, lives, pool=pool)
    assert [at_once for _, at_once in pool.started[:2]] == [cut[:1], cut]   # both cut lives again, at once
    assert choice.stop == "decided" and not pool.running


def test_the_loops_own_bound_waits_for_the_lives_in_flight(tmp_path, monkeypatch):
    """A chooser that never stops (the budget stops the real one long before): at the loop's bound the life still in
    flight ends and counts, rather than being killed with the slots and left for --resume."""
    from lookahead_runner.decision.adaptive import Batch, Choice

    monkeypatch.setattr(adaptive_sweep, "choose_batch",
                        lambda free, *rest: Batch(lives=tuple(Choice(4, why="once more") for _ in range(free))))
    lives = Lives(tmp_path)
    pool = TwoSlots(lives)
    choice, said = start(tmp_path, monkeypatch, lives, pool=pool)
    assert choice.stop == "budget" and said[-1] == "adaptive: stopped: the loop's own bound was reached"
    assert not pool.running
    assert all(life_state(tmp_path / l.dir) == "done" for l in read_plan(tmp_path).lives)


def test_the_capacity_loops_own_bound_waits_for_the_last_probe(tmp_path, monkeypatch):
    """The capacity search's counterpart: a chooser that never stops, and the probe running at the bound ends."""
    from lookahead_runner.decision.capacity.search import Probe
    from lookahead_runner.run.strategies import capacity_sweep

    config = config_from_dict({
        "speculation": {"k": [0, 4]}, "sweep": {"strategy": "capacity"},
        "load": {"stages": [{"rate": 7.0, "duration_s": 5}, {"rate": 14.0, "duration_s": 5}]},
        "decision": {"slo": {"ttft_p99_ms": 500}, "target_rate": 14}})
    monkeypatch.setattr(capacity_sweep, "read_run", lambda run_dir: SimpleNamespace(
        plan=read_plan(run_dir), statuses={}, rate_windows=[]))
    monkeypatch.setattr(capacity_sweep, "write_tables", lambda run_dir: None)
    monkeypatch.setattr(capacity_sweep, "probe_next", lambda *args: Probe(0, 10.0, why="once more"))
    write_plan(tmp_path, adaptive_sweep.start_plan(Plan(
        run_id="t", config=config.model_dump(mode="json"), probe={"version": "0.32.0"}, target_users=0, lives=[])))
    class Probes(TwoSlots):
        def wait(self):  # a probe's life ends (its windows are not read here)
            _, life = self.running.pop(0)
            write_status(results.life_dir(tmp_path, life.setting.name, life.repeat), "done")
            return [life]

    pool = Probes(Lives(tmp_path))
    choice = capacity_sweep.run_capacity(config, caps(), tmp_path, lambda line: None, pool,
                                         ResolvedServer.resolve(config.server))
    assert choice.stop == "budget" and "bound" in choice.why
    assert not pool.running


def test_why_it_is_the_default_names_the_spread_it_buys_or_the_ledger_it_borrows_from():
    """On a server whose spread is unknown the plan says one repeated life measures it; where the ledger holds it
    from earlier runs (config.decision.with_earlier, as the runner and the dry run set it), that every K measured
    once borrows it: the sweep buys no such life then (adaptive.py's `spread_from_earlier`)."""
    from lookahead_runner.config.decision import EarlierSpread

    config = CONFIG.model_copy(deep=True)
    config.decision.for_server("vllm")
    first = adaptive_sweep.why_default(config)
    assert first.endswith("one repeated life measures it, then every K measured once borrows it")
    config.decision.with_earlier(EarlierSpread(squares=4 * 0.02 ** 2, df=4, runs=2, lives=6, last="2026-12-07"))
    later = adaptive_sweep.why_default(config)
    assert "the ledger holds it from 2 earlier runs on this server (2.0%), so no life is bought to measure it" in later
    assert "one repeated life" not in later and "one life per K would decide only" not in later
