"""The GPU-to-GPU spread line (decision/cells/gpu_spread.py)."""

from lookahead_runner.decision.cells.gpu_spread import LifeOnGpu, gpu_spread_line


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
