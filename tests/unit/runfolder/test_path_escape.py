"""Paths stay inside the run folder: a name built from the config (a grid value) is one safe folder name, a life's
folder is never emptied outside the run folder, and a run folder someone sends is read only inside itself (a plan
whose life folder is `../` or absolute, a life folder or a cache that is a link out of it)."""
import json
import os
import shutil

import pytest

from lookahead_runner.contracts.paths import OutsideFolder, inside, path_safe
from lookahead_runner.run.life.launch import Life
from lookahead_runner.run.life.life import fresh_life_dir
from lookahead_runner.runfolder.columns import read_table
from lookahead_runner.runfolder.plan import RunDirError
from lookahead_runner.runfolder.read import read_run
from lookahead_runner.vllm.knob import Setting

ESCAPE = "/../../../elsewhere"


@pytest.mark.parametrize("value", [ESCAPE, "..", "../x", "a/b", "a\\b", " .hidden", "$(touch x)", "\n", ""])
def test_a_grid_value_makes_one_safe_folder_name(value):
    name = Setting(0, False, "--max-num-seqs", value).name
    assert "/" not in name and "\\" not in name and name not in (".", "..") and not name.startswith(".")
    assert name == path_safe(name)


def test_safe_names_stay_as_they_were_and_unsafe_ones_stay_apart():
    assert Setting(4, False, "--max-num-seqs", "64").name == "k4-max-num-seqs64"
    assert Setting(2, spec_key="draft_sample_method", axis_value="probabilistic").name == \
        "k2-draft_sample_method-probabilistic"
    assert Setting(0, False, "--x", "a/b").name != Setting(0, False, "--x", "a_b").name  # a hash keeps them apart


def test_a_life_never_empties_a_folder_outside_the_run_folder(tmp_path):
    """The grid values ["/x", "/../../../elsewhere"]: the first life's folder made k0-max-num-seqs/, through which the
    second's led beside the output root, and that folder was emptied before the life started."""
    run_dir = tmp_path / "out" / "run"
    run_dir.mkdir(parents=True)
    precious = tmp_path / "elsewhere" / "r0" / "keep.txt"
    precious.parent.mkdir(parents=True)
    precious.write_text("mine")
    lives = [fresh_life_dir(run_dir, Life(Setting(0, False, "--max-num-seqs", value), 0)) for value in ("/x", ESCAPE)]
    assert precious.read_text() == "mine"
    assert all(life.resolve().is_relative_to(run_dir.resolve()) and life.is_dir() for life in lives)


@pytest.mark.parametrize("relative", ["../x", "/etc", "a/../../x", "", ".", "a/./../.."])
def test_inside_refuses_what_leaves_the_folder(tmp_path, relative):
    with pytest.raises(OutsideFolder):
        inside(tmp_path, relative)


def test_inside_refuses_a_link_out_of_the_folder(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "other").mkdir()
    os.symlink(tmp_path / "other", tmp_path / "run" / "k0")
    with pytest.raises(OutsideFolder):
        inside(tmp_path / "run", "k0/r0")
    assert inside(tmp_path / "run", "k2/r0") == tmp_path / "run" / "k2" / "r0"


@pytest.fixture
def sent(tmp_path, fixtures_dir):
    """A run folder someone sent: the two-life simulator run of the fixtures, and a folder of mine beside it that
    holds a copy of its second life."""
    folder = tmp_path / "sent"
    shutil.copytree(fixtures_dir.parent / "run-plan-v1", folder)
    mine = tmp_path / "mine"
    shutil.copytree(folder / "k2" / "r0", mine)
    return folder, mine


@pytest.mark.parametrize("where", ["../mine", "absolute", "k2/r0\0"])
def test_report_reads_no_life_folder_outside_the_run_folder(sent, where):
    """A NUL in the name (no file system's) is one line too, not os.path's ValueError as a traceback."""
    folder, mine = sent
    plan = json.loads((folder / "plan.json").read_text())
    plan["lives"][1]["dir"] = str(mine) if where == "absolute" else where
    (folder / "plan.json").write_text(json.dumps(plan))
    with pytest.raises(RunDirError, match=r"plan.json is not a plan this version can read \(lives\.1\.dir: "):
        read_run(folder)
    assert not (mine / ".cache").exists(), "a cache was written outside the run folder"


def test_report_follows_no_link_out_of_the_run_folder(sent):
    folder, mine = sent
    shutil.rmtree(folder / "k2" / "r0")
    os.symlink(mine, folder / "k2" / "r0")
    with pytest.raises(RunDirError, match=r"k2/r0 leads outside the run folder"):
        read_run(folder)
    assert not (mine / ".cache").exists()


def test_a_cache_folder_that_is_a_link_is_neither_read_nor_written(sent, tmp_path):
    folder, _ = sent
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, folder / "k0" / "r0" / ".cache")
    assert not read_table(folder / "k0" / "r0" / "requests.csv").empty
    assert list(elsewhere.iterdir()) == []
    os.symlink(tmp_path / "mine" / "requests.csv", folder / "k0" / "r0" / "linked.csv")
    assert read_table(folder / "k0" / "r0" / "linked.csv").empty  # a CSV that is a link is not read


def test_a_folder_leading_outside_the_run_is_one_line_and_exit_2_not_a_traceback(tmp_path, monkeypatch, capsys):
    """A life folder that is a link out of the run folder stops a resume in `fresh_life_dir` or `receive` with
    OutsideFolder: the CLI says it in one line, exit 2, as any other bad run folder."""
    from lookahead_runner import cli
    from lookahead_runner.contracts.paths import OutsideFolder
    from lookahead_runner.run.verdict import finalize

    def outside(*_args, **_kwargs):
        raise OutsideFolder(f"k0/r0 leads outside the run folder {tmp_path} (a link)")

    monkeypatch.setattr(finalize, "finalize", outside)
    assert cli.main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "k0/r0 leads outside the run folder" in err and "Traceback" not in err
