"""The command line a person reads once (issue 48), through the installed entry point: `lookahead-runner --version`,
each subcommand offering only the flags that mean something to it, and a `--set` error blamed on `--set`."""
import subprocess
import sys
from importlib.metadata import version

import pytest

pytestmark = pytest.mark.e2e


def cli(*argv: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lookahead_runner", *argv], capture_output=True, text=True,
                          timeout=60, cwd=cwd)


def test_version_prints_the_installed_version():
    done = cli("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"lookahead-runner {version('lookahead-runner')}"


def test_ramp_offers_no_flag_that_means_nothing_for_one_k():
    ramp = cli("ramp", "--help")
    assert ramp.returncode == 0
    for flag in ("--no-early-stop", "--confirm", "--no-confirm"):
        assert flag not in ramp.stdout, flag
    sweep = cli("sweep", "--help").stdout
    assert all(flag in sweep for flag in ("--no-early-stop", "--confirm", "--no-confirm"))
    refused = cli("ramp", "--no-early-stop")
    assert refused.returncode == 2 and "unrecognized arguments: --no-early-stop" in refused.stderr


def test_a_set_error_is_blamed_on_set_not_on_the_file(tmp_path):
    (tmp_path / "sweep.toml").write_text("[load]\nstages = [{ users = 2, duration_s = 5 }]\n")
    done = cli("sweep", "--config", "sweep.toml", "--set", "speculation.k=abc", "--dry-run", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == ("lookahead-runner: --set speculation.k: Input should be a valid list; "
                                   "e.g. --set 'speculation.k=[0,2,4,8]'")
    out = cli("sweep", "--config", "sweep.toml", "--out", "runs", "--set", "speculation.draft_modle=x",
              "--dry-run", cwd=tmp_path)
    assert out.stderr.strip() == ("lookahead-runner: --set speculation.draft_modle: unknown key; did you mean "
                                  "speculation.draft_model?")
