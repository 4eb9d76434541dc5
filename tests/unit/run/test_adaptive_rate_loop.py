"""The adaptive sweep at an arrival rate (rate stages only, the measure-until-decided default on a server of unknown
restart spread): its loop (adaptive_sweep.run_adaptive) with each server life stubbed by synthetic rate windows:
every first life runs each rate stage, a repeat the target rate's alone; the verdict at the target rate is the one
it measures until decided; what the dry run says of it."""
from types import SimpleNamespace

from unit.decision.rate_windows_factory import rate_window

from lookahead_runner.config import ResolvedServer, config_from_dict
from lookahead_runner.decision.adaptive import ModelView
from lookahead_runner.run.strategies import adaptive_sweep
from lookahead_runner.run.strategies.life_pool import OneAtATime
from lookahead_runner.runfolder import results
from lookahead_runner.runfolder.cost import capacity_probes
from lookahead_runner.runfolder.plan import (Plan, PlannedLife, has_plan, life_state, read_plan, read_status,
                                             write_plan, write_status)
from lookahead_runner.vllm.probe import Capabilities

SERVICE_MS = {0: 1000.0, 2: 800.0, 4: 600.0}   # each K's e2e beyond its TTFT: K=4 the fastest at every rate
STAGES = [{"rate": 8.0, "duration_s": 20}, {"rate": 16.0, "duration_s": 20}, {"rate": 24.0, "duration_s": 20}]
# the simulator drawing a restart spread per life: a server whose spread is unknown, so the default is adaptive
CONFIG = config_from_dict({
    "server": {"extra_args": ["--sim-restart-spread", "0.05"]}, "speculation": {"k": [0, 2, 4]},
    "load": {"stages": STAGES}, "decision": {"target_rate": 16.0, "slo": {"ttft_p99_ms": 500}, "resamples": 400}})
GRID_OF_TWO_REPEATS = 6


class Lives:
    """Stands in for the server lives: each run writes its status and a rate window per stage it ran."""

    def __init__(self, run_dir):
        self.run_dir, self.ran, self.windows = run_dir, [], {}

    def run_one(self, config, life):
        out = results.life_dir(self.run_dir, life.setting.name, life.repeat)
        if life_state(out) == "done":
            return
        out.mkdir(parents=True, exist_ok=True)
        self.ran.append((life.key, [stage.rate for stage in config.load.stages]))
        self.windows[life.key] = [self.window(life.setting.k, life.repeat, stage.rate, config)
                                  for stage in config.load.stages]
        write_status(out, "done", start_s=120.0, measure_s=20.0 * len(config.load.stages))

    def window(self, k, repeat, rate, config):
        return rate_window(k, rate, int(rate * 20), int(rate * 20 * (0.8 if k == 0 and rate > 20 else 1.0)),
                           repeat=repeat, service_ms=SERVICE_MS[k] * (1 + repeat / 100), p=config.decision)

    def read_run(self, run_dir):
        plan = read_plan(run_dir)
        statuses = {l.dir: read_status(run_dir / l.dir) for l in plan.lives if life_state(run_dir / l.dir) != "missing"}
        windows = [("", w) for key, ws in self.windows.items() if key in statuses and statuses[key].state == "done"
                   for w in ws]
        return SimpleNamespace(plan=plan, statuses=statuses, rate_windows=windows,
                               evidence=lambda: (_ for _ in ()).throw(AssertionError("no users evidence at a rate")))


def run(tmp_path, monkeypatch, lives: Lives, config=CONFIG):
    monkeypatch.setattr(adaptive_sweep, "read_run", lives.read_run)
    monkeypatch.setattr(adaptive_sweep, "write_tables", lambda run_dir: None)
    if not has_plan(tmp_path):
        write_plan(tmp_path, adaptive_sweep.start_plan(Plan(
            run_id="t", config=config.model_dump(mode="json"), probe={"version": "0.32.0"}, target_users=0,
            lives=[PlannedLife(setting="k0", k=0, repeat=0, argv=[], dir="x")])))
    said = []
    choice = adaptive_sweep.run_adaptive(config, Capabilities("0.32.0", frozenset({"--speculative-config"})),
                                         tmp_path, said.append, OneAtATime(lives.run_one),
                                         ResolvedServer.resolve(config.server))
    return choice, said


def test_the_default_at_a_rate_decides_there_in_fewer_lives_than_the_grid(tmp_path, monkeypatch):
    assert CONFIG.sweep.strategy == "adaptive" and CONFIG.adaptive_by_default and CONFIG.adaptive_rate == 16.0
    lives = Lives(tmp_path)
    choice, said = run(tmp_path, monkeypatch, lives)
    ran = dict(lives.ran)
    assert choice.stop == "decided" and "K=4 wins" in choice.why, (choice, lives.ran)
    assert len(lives.ran) < GRID_OF_TWO_REPEATS
    # a K's first life runs every rate stage (the others place its capacity within the SLO); a repeat the target's
    firsts = [key for key, _ in lives.ran if key.endswith("/r0")]
    repeats = [key for key, _ in lives.ran if not key.endswith("/r0")]
    assert all(ran[key] == [8.0, 16.0, 24.0] for key in firsts) and repeats
    assert all(ran[key] == [16.0] for key in repeats)
    plan = read_plan(tmp_path)
    assert [l.dir for l in plan.lives] == [key for key, _ in lives.ran]
    assert all(l.rates == [16.0] and l.stages is None for l in plan.lives if l.dir in repeats)
    assert all(l.rates is None for l in plan.lives if l.dir in firsts)
    assert any(l.purpose == "spread" for l in plan.lives)           # one repeated life measured the spread
    assert any("predicts users stages" in line for line in said)    # the model drives nothing at a rate


def test_a_resumed_sweep_at_a_rate_reruns_a_cut_repeat_at_the_target_rate_alone(tmp_path, monkeypatch):
    whole = Lives(tmp_path / "whole")
    (tmp_path / "whole").mkdir()
    choice, _ = run(tmp_path / "whole", monkeypatch, whole)
    repeat = next(key for key, _ in whole.ran if not key.endswith("/r0"))
    cut = Lives(tmp_path / "cut")
    (tmp_path / "cut").mkdir()
    plan = read_plan(tmp_path / "whole")
    upto = [l for l in plan.lives][: [l.dir for l in plan.lives].index(repeat) + 1]
    write_plan(tmp_path / "cut", plan.model_copy(update={"lives": upto}))
    for life in upto[:-1]:   # every life before the repeat done; the repeat cut half-way
        cut.run_one(adaptive_sweep.stages_of(CONFIG, life.stages, life.rates),
                    adaptive_sweep.Life(adaptive_sweep.Setting(life.k), life.repeat))
    cut.ran.clear()
    resumed, _ = run(tmp_path / "cut", monkeypatch, cut)
    assert cut.ran[0] == (repeat, [16.0])
    assert (resumed.stop, resumed.why) == (choice.stop, choice.why)


def test_the_model_drives_nothing_at_a_rate():
    view = adaptive_sweep.model_view(None, CONFIG)
    assert not view.trusted and "predicts users stages" in view.why_not


def test_what_the_plan_says_at_a_rate():
    text = adaptive_sweep.describe(CONFIG, ModelView(why_not="fewer than two K measured"))
    assert text.startswith("adaptive sweep (no sweep.strategy given, rate stages on a server whose restart spread "
                           "is unknown: ")
    assert "where the verdict at 16 req/s is least sure" in text and " users " not in text
    assert "a repeat runs the 16 req/s stage alone" in text
    assert "(at most 6 server lives: 3 K x 2" in text


def test_its_verdict_at_the_rate_is_judged_at_the_look_it_stopped_at(tmp_path, monkeypatch):
    """The final verdict of an adaptive sweep at a rate names the look and the bar it stopped at, as the users
    verdict's does; its repeats (one rate stage each) are no capacity probes."""
    from lookahead_runner.run.verdict.rate_verdict import capacity_rows, rate_decision

    lives = Lives(tmp_path)
    choice, _ = run(tmp_path, monkeypatch, lives)
    data = lives.read_run(tmp_path)
    data.config, data.argv_by_k, data.setting_names = CONFIG, lambda value="": {}, lambda value="": {}
    decision = rate_decision(data, 16.0)
    assert decision.status == "decided" and decision.recommended.k == 4
    assert decision.looks is not None and decision.looks.look == len(lives.ran) and decision.looks.at_most == 6
    assert choice.why.startswith("decided at " + decision.looks.text.removeprefix("stopped at "))
    rows = capacity_rows(data)
    assert rows and all(row.rate_from and "probed" not in row.rate_from for row in rows)


def test_a_life_the_stop_needs_anyway_comes_before_one_it_may_not():
    """The restart spread measured on the leader's two lives, the baseline on one (its second life is needed before
    any stop: it is never spared where the spread is unknown), a rival on one life winning a few resamples: the
    baseline's second life first (the simulator sweep at 16 req/s: with it, decided at look 5; the rival's first,
    then the baseline's, took 6 lives, the grid's)."""
    from lookahead_runner.decision.adaptive import Budget, Spent, choose
    from lookahead_runner.decision.standing import Standing

    standing = Standing("not_decided", 4, {4: 0.939, 24: 0.041, 0: 0.02}, {0: 1.5, 4: 3.0, 24: 1.9},
                        wanted=(0, 24, 4), spread_measured=True, spare_baseline=False, contender_share=0.02)
    spent = Spent({0: 1, 4: 2, 24: 1}, {0: 1, 4: 2, 24: 1})
    choice = choose([0, 4, 24], standing, spent, ModelView(why_not="-"), Budget(6), 5)
    assert choice.k == 0 and "the baseline every gain is measured against" in choice.why, choice


CAPACITY = {0: 18.0, 2: 26.0, 4: 34.0}   # each K's true capacity within the SLO (req/s)
# both K hold 8 and 16 req/s and fall behind at 48: their brackets (16, 48) overlap, so the capacity, which decides
# first, is open on the config's rates alone (gates/rate_pick.py's `could_exceed`)
OPEN_CONFIG = config_from_dict({
    "server": {"extra_args": ["--sim-restart-spread", "0.05"]}, "speculation": {"k": [0, 4]},
    "load": {"stages": [{"rate": 8.0, "duration_s": 20}, {"rate": 16.0, "duration_s": 20},
                        {"rate": 48.0, "duration_s": 20}]},
    "decision": {"target_rate": 16.0, "slo": {"ttft_p99_ms": 500}, "resamples": 400}})


class CapacityLives(Lives):
    """Lives whose every rate window holds the SLO below the K's CAPACITY and falls behind above it."""

    def window(self, k, repeat, rate, config):
        return rate_window(k, rate, int(rate * 20), int(rate * 20 * (1.0 if rate <= CAPACITY[k] else 0.5)),
                           behind=rate > CAPACITY[k], repeat=repeat, service_ms=SERVICE_MS[k] * (1 + repeat / 100),
                           p=config.decision)


def test_a_capacity_the_rates_leave_open_is_probed_on_the_sweeps_own_lives(tmp_path, monkeypatch):
    lives = CapacityLives(tmp_path)
    choice, said = run(tmp_path, monkeypatch, lives, OPEN_CONFIG)
    plan = read_plan(tmp_path)
    probes = [l for l in plan.lives if l.purpose == "capacity"]
    # before: "not decided: K=0's capacity within the SLO could set it over K=4: rates between those measured
    # settle that, not lives at them"; now the sweep runs those rates itself, a probe life of one rate stage each
    assert choice.stop == "decided" and "K=4 wins" in choice.why, (choice, lives.ran)
    assert probes and all(len(l.rates) == 1 and 16.0 < l.rates[0] < 48.0 for l in probes)
    assert len(probes) <= capacity_probes(OPEN_CONFIG)
    assert any("a capacity probe (K=0's capacity within the SLO could set it over K=4)" in line for line in said)
    # the probes are not the verdict's lives: its looks count the lives at the target rate
    assert all(rates == [16.0] for key, rates in lives.ran if not key.endswith("/r0") and key not in
               {l.dir for l in probes})


def test_a_resumed_sweep_reruns_a_cut_probe_at_its_rate(tmp_path, monkeypatch):
    whole = CapacityLives(tmp_path / "whole")
    (tmp_path / "whole").mkdir()
    choice, _ = run(tmp_path / "whole", monkeypatch, whole, OPEN_CONFIG)
    plan = read_plan(tmp_path / "whole")
    probe = next(l for l in plan.lives if l.purpose == "capacity")
    upto = plan.lives[: [l.dir for l in plan.lives].index(probe.dir) + 1]
    cut = CapacityLives(tmp_path / "cut")
    (tmp_path / "cut").mkdir()
    write_plan(tmp_path / "cut", plan.model_copy(update={"lives": upto}))
    for life in upto[:-1]:
        cut.run_one(adaptive_sweep.stages_of(OPEN_CONFIG, life.stages, life.rates),
                    adaptive_sweep.Life(adaptive_sweep.Setting(life.k), life.repeat))
    cut.ran.clear()
    resumed, _ = run(tmp_path / "cut", monkeypatch, cut, OPEN_CONFIG)
    assert cut.ran[0] == (probe.dir, probe.rates)   # its own rate: no config stage has it
    assert (resumed.stop, resumed.why) == (choice.stop, choice.why)


def test_a_given_sweep_max_lives_caps_the_probes_too(tmp_path, monkeypatch):
    capped = OPEN_CONFIG.model_copy(update={"sweep": OPEN_CONFIG.sweep.model_copy(update={"max_lives": 5})})
    assert capacity_probes(capped) == 0 and capacity_probes(OPEN_CONFIG) == 4
    lives = CapacityLives(tmp_path)
    choice, _ = run(tmp_path, monkeypatch, lives, capped)
    assert len(lives.ran) == 5 and choice.stop == "budget", (choice, lives.ran)
    assert sum(1 for l in read_plan(tmp_path).lives if l.purpose == "capacity") == 1


def test_probes_that_never_settle_it_stop_at_their_own_allowance(tmp_path, monkeypatch):
    # a probe that narrows nothing (far above every bracket): the verdict keeps hanging on the capacity. The probes
    # stop at their allowance beside the verdict's lives (a review found 7 probes where the dry run said 6: the
    # allowance was counted on every life, so lives the verdict left unused went to probes)
    import itertools

    from lookahead_runner.decision.capacity.search import Probe, within
    rates = itertools.count()

    def never_settles(data, config, leader, at_stake, spent, budget, named):
        return within(Probe(4, 100.0 + next(rates), "narrows nothing"), spent, budget, named)

    three = config_from_dict({
        "server": {"extra_args": ["--sim-restart-spread", "0.05"]}, "speculation": {"k": [0, 2, 4]},
        "load": {"stages": [{"rate": r, "duration_s": 20} for r in (8.0, 16.0, 48.0)]},
        "decision": {"target_rate": 16.0, "slo": {"ttft_p99_ms": 500}, "resamples": 400}})
    assert three.sweep.strategy == "adaptive" and capacity_probes(three) == 6
    monkeypatch.setattr(adaptive_sweep, "verdict_probe", never_settles)
    lives = CapacityLives(tmp_path)
    choice, said = run(tmp_path, monkeypatch, lives, three)
    probes = [l for l in read_plan(tmp_path).lives if l.purpose == "capacity"]
    assert len(probes) == capacity_probes(three), (len(probes), lives.ran)
    assert len(lives.ran) - len(probes) <= 6                          # the verdict's own cap: 3 K x 2
    assert choice.stop == "budget" and "the capacity probes' allowance = 6 lives run" in choice.why, choice.why


def test_with_no_probe_left_the_sweep_stops_and_says_why_the_probes_stopped(tmp_path, monkeypatch):
    from lookahead_runner.decision.capacity.search import Probe
    monkeypatch.setattr(adaptive_sweep, "verdict_probe", lambda *args: Probe(
        None, why="no probe left could narrow a bracket: K=0: the rate between them was run", stop="exhausted"))
    lives = CapacityLives(tmp_path)
    choice, _ = run(tmp_path, monkeypatch, lives, OPEN_CONFIG)
    assert not [l for l in read_plan(tmp_path).lives if l.purpose == "capacity"]
    assert choice.stop == "exhausted" and choice.why.startswith("not decided: K=0's capacity within the SLO"), choice
    assert choice.why.endswith("; the capacity probes: no probe left could narrow a bracket: K=0: the rate between "
                               "them was run"), choice.why


def test_a_sweep_resumed_after_its_probes_stopped_ends_as_the_uninterrupted_one(tmp_path, monkeypatch):
    # nothing kept in memory across rounds: cut after its last probe, resumed, it asks no more and stops alike
    import itertools

    from lookahead_runner.decision.capacity.search import Probe, within
    rates = itertools.count()

    def never_settles(data, config, leader, at_stake, spent, budget, named):
        return within(Probe(4, 100.0 + next(rates), "narrows nothing"), spent, budget, named)

    monkeypatch.setattr(adaptive_sweep, "verdict_probe", never_settles)
    (tmp_path / "whole").mkdir()
    whole = CapacityLives(tmp_path / "whole")
    choice, _ = run(tmp_path / "whole", monkeypatch, whole, OPEN_CONFIG)
    plan = read_plan(tmp_path / "whole")
    (tmp_path / "cut").mkdir()
    cut = CapacityLives(tmp_path / "cut")
    write_plan(tmp_path / "cut", plan)
    for life in plan.lives:
        cut.run_one(adaptive_sweep.stages_of(OPEN_CONFIG, life.stages, life.rates),
                    adaptive_sweep.Life(adaptive_sweep.Setting(life.k), life.repeat))
    cut.ran.clear()
    resumed, _ = run(tmp_path / "cut", monkeypatch, cut, OPEN_CONFIG)
    assert cut.ran == [] and (resumed.stop, resumed.why) == (choice.stop, choice.why)


def test_the_capacity_table_counts_the_adaptive_sweeps_probes():
    from types import SimpleNamespace

    from lookahead_runner.run.verdict.rate_verdict import capacity_probes as probed

    def life(k, repeat, rates=None, purpose=""):
        return PlannedLife(setting=f"k{k}", dir=f"k{k}/r{repeat}", k=k, repeat=repeat, argv=[], rates=rates,
                           purpose=purpose)

    plan = SimpleNamespace(sweep_lives=lambda: [life(0, 0), life(0, 1, [16.0], "spread"), life(0, 2, [27.7], "capacity"),
                                                life(4, 0), life(4, 1, [16.0]), life(4, 2, [47.1], "capacity")])
    assert probed(SimpleNamespace(config=OPEN_CONFIG, plan=plan)) == {0: 1, 4: 1}   # the repeats at 16 are none
