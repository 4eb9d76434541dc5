"""The sweep's life loop (runner.run_lives) with the server lives and the decision stubbed out."""
from types import SimpleNamespace

from lookahead_runner.runfolder import results
from lookahead_runner.run import runner
from lookahead_runner.run.strategies import early_stop
from lookahead_runner.config import config_from_dict
from lookahead_runner.run.life.launch import Life
from lookahead_runner.runfolder.plan import life_state, write_status
from lookahead_runner.vllm.knob import Setting


def test_a_resumed_run_measures_what_is_left_of_the_stop_k_and_skips_only_larger_k(tmp_path, monkeypatch):
    """On --resume the stop rule sees every K the first run finished and fires at once (here at K=2): an
    unfinished life of K=2 itself is still measured, only larger K are skipped."""
    config = config_from_dict({"speculation": {"k": [0, 2, 4]}, "load": {"repeats": 2}})
    lives = [Life(Setting(k), r) for k in (0, 2, 4) for r in range(2)]
    for life in lives[:3]:  # k0/r0, k0/r1, k2/r0 finished before the interruption
        out = results.life_dir(tmp_path, life.setting.name, life.repeat)
        out.mkdir(parents=True)
        write_status(out, "done")
    monkeypatch.setattr(runner, "write_tables", lambda run_dir: SimpleNamespace(evidence=lambda **_: None))
    monkeypatch.setattr(early_stop, "next_setting", lambda evidence, p, ks: (None, 2))
    ran = []
    progress = SimpleNamespace(life_started=lambda key: None, life_finished=lambda key: None)
    runner.run_lives(config, tmp_path, lives, lambda life: life.key, lambda text: None, progress,
                     lambda cfg, setting, repeats: ran.append((setting.k, repeats)), early_stop=True)
    assert ran == [(2, [1])]
    assert life_state(results.life_dir(tmp_path, "k4", 0)) == "skipped"
    assert life_state(results.life_dir(tmp_path, "k2", 1)) == "missing"  # the stub measured nothing
