"""`[speculation] config = {...}` through the CLI on the simulated vLLM 0.32: the dry run prints every server life's
argv with the table's keys beside K (none at K = 0), and a key the runner writes is one line on stderr, exit 2,
nothing started."""
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e

SWEEP = """
name = "spec-config"
[server]
model = "sim/e2e-model"
extra_args = ["--max-num-seqs", "32"]
[speculation]
k = [0, 2, 4]
method = "ngram"
config = {config}
[load]
stages = [{{ users = 2, duration_s = 3 }}]
repeats = 2
preflight_s = 0
"""


def dry_run(tmp_path, config: str) -> subprocess.CompletedProcess:
    path = tmp_path / "sweep.toml"
    path.write_text(SWEEP.format(config=config))
    return subprocess.run([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(path), "--dry-run",
                           "--out", str(tmp_path / "runs")], capture_output=True, text=True, timeout=120)


def test_dry_run_shows_the_table_in_every_life_with_k(tmp_path):
    done = dry_run(tmp_path, '{ prompt_lookup_min = 2, prompt_lookup_max = 5, draft_sample_method = "probabilistic" }')
    assert done.returncode == 0, done.stderr
    lives = {line.split(":", 1)[0]: line.split(":", 1)[1] for line in done.stdout.splitlines()
             if line.startswith("k") and "/r" in line.split(":", 1)[0]}
    assert sorted(lives) == ["k0/r0", "k0/r1", "k2/r0", "k2/r1", "k4/r0", "k4/r1"]
    for life, argv in lives.items():
        if life.startswith("k0/"):
            assert "--spec" not in argv and "speculative" not in argv, argv
            continue
        assert f"--spec-method ngram --spec-tokens {life[1]}" in argv and "--spec-model" not in argv
        for pair in ("--speculative-config.prompt_lookup_min 2", "--speculative-config.prompt_lookup_max 5",
                     "--speculative-config.draft_sample_method probabilistic"):
            assert argv.count(pair) == 1, (life, argv)
    assert not (tmp_path / "runs").exists()


def test_a_key_the_runner_writes_is_one_line_and_exit_2(tmp_path):
    done = dry_run(tmp_path, "{ num_speculative_tokens = 3 }")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "speculation.config: num_speculative_tokens is written by the runner" in done.stderr
    assert "speculation.k" in done.stderr and done.stdout == ""
    assert not (tmp_path / "runs").exists()
