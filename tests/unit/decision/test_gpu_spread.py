"""The GPU-to-GPU spread line, and K confounded with a GPU (decision/cells/gpu_spread.py)."""

from lookahead_runner.decision.cells.gpu_spread import LifeOnGpu, confound_line, confound_plan_line, gpu_spread_line


def test_a_k_on_several_gpus_gets_its_spread():
    lives = [LifeOnGpu(0, "n1 GPU-a", 3.0), LifeOnGpu(0, "n1 GPU-a", 3.2), LifeOnGpu(0, "n1 GPU-b", 2.9),
             LifeOnGpu(4, "n1 GPU-b", 7.0)]  # K=4 on one GPU only: no spread to state
    line = gpu_spread_line(lives, 8)
    # GPU-a 3.1 mean, GPU-b 2.9: (3.1 - 2.9) / median 3.0
    assert line.startswith("GPU-to-GPU spread at 8 users: K=0 on 2 GPUs 2.90-3.10 req/s (6.7%).")
    assert "K=4" not in line and "like a restart" in line


def test_no_line_without_a_k_on_two_gpus():
    assert gpu_spread_line([LifeOnGpu(0, "n1 GPU-a", 3.0), LifeOnGpu(4, "n1 GPU-b", 7.0)], 8) == ""
    assert gpu_spread_line([], 8) == ""


def test_each_k_on_one_gpu_of_two_is_said_in_the_report_though_no_spread_shows():
    """One repeat per K on two slots: K=0 on one GPU, K=4 on the other; gpu_spread_line has nothing to say, so
    without this line a GPU difference would pass for K's."""
    lives = [LifeOnGpu(0, "n1 GPU-a", 3.0), LifeOnGpu(4, "n1 GPU-b", 7.0)]
    assert gpu_spread_line(lives, 8) == ""
    line = confound_line(lives)
    assert line.startswith("K and GPU confounded: the lives ran on 2 GPU sets, but not every K on each (K=0 on 1; "
                           "K=4 on 1)") and "load.repeats >= 2" in line, line


def test_no_confound_when_every_k_ran_on_every_gpu_or_one_gpu_ran_all():
    both = [LifeOnGpu(k, gpu, 1.0) for k in (0, 4) for gpu in ("n1 GPU-a", "n1 GPU-b")]
    assert confound_line(both) == ""
    assert confound_line([LifeOnGpu(0, "n1 GPU-a", 3.0), LifeOnGpu(4, "n1 GPU-a", 7.0)]) == ""
    assert confound_line([LifeOnGpu(0, "n1 GPU-a", 3.0), LifeOnGpu(0, "n1 GPU-b", 7.0)]) == ""  # one K: nothing to mix


def test_the_plan_warns_when_a_k_has_fewer_server_lives_than_slots():
    line = confound_plan_line(1, 2)
    assert line.startswith("K and GPU confounded: 2 slots, but each K has 1 server life, so it runs on 1 of the 2 GPU "
                           "sets") and "set load.repeats = 2" in line, line
    assert "load.repeat_mode = \"restart\"" in confound_plan_line(1, 3, restart=False)
    assert confound_plan_line(2, 2) == confound_plan_line(3, 2) == confound_plan_line(1, 1) == ""
