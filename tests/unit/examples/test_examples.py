"""The example configs ship in the package (`lookahead-runner example` lists them and writes one out): each written
out loads as it is, with its request set beside it; each first line says which server it runs on and that its load
is synthetic; the template leaves the strategy and the repeats to the default; one real-vLLM example is EAGLE-3 on
chat with a request set, rate stages, an SLO and a target rate. Writing never overwrites a file without force."""
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

from lookahead_runner import cli
from lookahead_runner.config import load_config
from lookahead_runner.examples import ExampleError, catalogue, find, write

NAMES = [example.name for example in catalogue()]


def written(name: str, folder: Path, monkeypatch) -> Path:
    """The example written to FOLDER/NAME.toml, run from FOLDER as a user runs it."""
    monkeypatch.chdir(folder)
    write(find(name), Path(f"{name}.toml"))
    return folder / f"{name}.toml"


def test_the_examples_are_found():
    assert set(NAMES) >= {"sweep", "chat", "requests", "cluster", "eagle3-chat", "mtp", "ngram", "draft-model"}
    assert "eagle" not in NAMES   # raw completions with ignore_eos: not how an EAGLE head trained on chat is used


@pytest.mark.parametrize("name", NAMES)
def test_an_example_written_out_loads(name, tmp_path, monkeypatch, ray_installed):
    config = load_config(written(name, tmp_path, monkeypatch))
    assert config.name and config.speculation.k


def test_a_request_set_is_written_beside_its_config_and_named_by_its_path(tmp_path, monkeypatch, ray_installed):
    monkeypatch.chdir(tmp_path)
    paths = write(find("chat"), Path("configs/my-chat.toml"))
    assert [p.as_posix() for p in paths] == ["configs/my-chat.toml", "configs/chat.jsonl"]
    config = load_config(Path("configs/my-chat.toml"))
    assert config.load.requests == "configs/chat.jsonl" and config.load.endpoint == "chat"
    # a second example reading the same set finds it there, the same bytes: no --force needed
    assert [p.as_posix() for p in write(find("eagle3-chat"), Path("configs/eagle.toml"))] == ["configs/eagle.toml"]


@pytest.mark.parametrize("name", NAMES)
def test_the_first_line_says_the_server_and_that_the_load_is_synthetic(name, tmp_path, monkeypatch, ray_installed):
    example = find(name)
    config = load_config(written(name, tmp_path, monkeypatch))
    server = "simulator" if config.server.is_simulator else "real vllm"
    assert server in example.summary.lower(), example.summary
    assert "synthetic" in example.summary, example.summary
    assert example.text.splitlines()[0] == f"# {example.summary}" and len(example.summary) <= 110


def test_the_template_leaves_the_strategy_and_the_repeats_to_the_default(tmp_path, monkeypatch):
    config = load_config(written("sweep", tmp_path, monkeypatch))
    given = tomllib.loads(find("sweep").text)
    assert "strategy" not in given.get("sweep", {}) and "repeats" not in given["load"]
    assert config.adaptive_by_default   # measures until decided on a real vLLM, as the README says
    assert not config.server.is_simulator and max(config.speculation.k) <= 8


def test_the_real_vllm_eagle3_example_is_chat_at_rate_stages_with_an_slo(tmp_path, monkeypatch):
    config = load_config(written("eagle3-chat", tmp_path, monkeypatch))
    assert config.server.command == ["vllm"] and not config.server.is_simulator
    assert config.speculation.method == "eagle3" and config.speculation.draft_model
    assert config.load.endpoint == "chat" and config.load.requests == "chat.jsonl"
    rates = [stage.rate for stage in config.load.stages]
    assert None not in rates and len(rates) >= 2
    assert config.decision.slo and config.decision.target_rate in rates
    # no strategy and no repeats: it measures until decided at its target rate (issues 48/49)
    assert config.adaptive_by_default and config.adaptive_rate == config.decision.target_rate


def test_writing_never_overwrites_a_file_without_force(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("chat.toml").write_text("mine\n", encoding="utf-8")
    with pytest.raises(ExampleError, match=r"^chat\.toml exists: pass --force to overwrite it, or --out OTHER\.toml$"):
        write(find("chat"), Path("chat.toml"))
    assert Path("chat.toml").read_text(encoding="utf-8") == "mine\n" and not Path("chat.jsonl").exists()
    Path("chat.jsonl").write_text("my requests\n", encoding="utf-8")   # a request set of the user's own
    with pytest.raises(ExampleError, match=r"^chat\.jsonl exists"):
        write(find("chat"), Path("other.toml"))
    assert not Path("other.toml").exists()
    write(find("chat"), Path("chat.toml"), force=True)
    written_lines = Path("chat.toml").read_text(encoding="utf-8").splitlines()
    shipped_lines = find("chat").text.splitlines()
    (changed,) = [(a, b) for a, b in zip(shipped_lines, written_lines) if a != b]   # the request set's path alone
    assert changed[1].startswith('requests = "chat.jsonl" ') and changed[0].index("#") == changed[1].index("#")
    assert Path("chat.jsonl").read_text(encoding="utf-8") != "my requests\n"


@pytest.mark.parametrize("name, nearest", [("eagle", "eagle3-chat"), ("draft_model", "draft-model"),
                                           ("chats", "chat")])
def test_an_unknown_name_is_one_line_with_the_nearest(name, nearest):
    with pytest.raises(ExampleError) as err:
        find(name)
    assert str(err.value) == f"no example {name!r}; the nearest is {nearest!r} (lookahead-runner example lists them)"


def test_the_command_lists_every_example_with_its_first_line(capsys):
    assert cli.main(["example"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for example in catalogue():
        assert any(line.split()[0] == example.name and line.endswith(example.summary) for line in lines)


def test_the_command_writes_one_and_refuses_an_unknown_name_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["example", "ngram", "--out", "mine.toml"]) == 0
    assert "mine.toml" in capsys.readouterr().out and Path("mine.toml").read_text() == find("ngram").text
    assert cli.main(["example", "ngram", "--out", "mine.toml"]) == 2
    assert capsys.readouterr().err == "lookahead-runner: mine.toml exists: pass --force to overwrite it, " \
                                      "or --out OTHER.toml\n"
    assert cli.main(["example", "eagle"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'eagle3-chat'" in err and not Path("eagle.toml").exists()


def test_the_cluster_example_runs_two_lives_at_once_on_a_ray_started_here(tmp_path, monkeypatch, ray_installed):
    config = load_config(written("cluster", tmp_path, monkeypatch))
    assert config.cluster.engine == "ray" and config.cluster.address == "" and config.cluster.gpus == 2
    assert config.cluster.life_gpus(config.server.extra_args) == 1 and config.load.planned_repeats == 2


@pytest.mark.parametrize("name, method, draft, constants", [
    ("eagle3-chat", "eagle3", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", {}),
    ("mtp", "mtp", None, {}),
    ("ngram", "ngram", None, {"prompt_lookup_min": 2, "prompt_lookup_max": 5}),
    ("draft-model", "draft_model", "meta-llama/Llama-3.2-1B-Instruct", {"draft_tensor_parallel_size": 2}),
])
def test_the_gpu_examples_start_a_real_vllm_with_their_method(name, method, draft, constants, tmp_path, monkeypatch):
    """docs/on-your-gpu.md's examples: a real `vllm` (not the simulator), the method, a draft model only where the
    method loads one, and the constant speculative keys; the TP > 1 ones name as many GPUs as their TP."""
    from lookahead_runner.vllm.knob import flag_value, loads_draft_model

    config = load_config(written(name, tmp_path, monkeypatch))
    assert config.server.command == ["vllm"] and not config.server.is_simulator
    assert config.speculation.method == method and config.speculation.config == constants
    assert loads_draft_model(method) == (draft is not None)
    if draft:
        assert config.speculation.draft_model == draft
    tp = int(flag_value(config.server.extra_args, "--tensor-parallel-size") or 1)
    gpus = config.server.env.get("CUDA_VISIBLE_DEVICES")
    assert gpus is None or len(gpus.split(",")) == tp


def test_a_config_written_where_its_request_set_goes_is_refused_not_overwritten(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["example", "chat", "--out", "chat.jsonl"]) == 2
    assert "chat.jsonl" in capsys.readouterr().err and list(tmp_path.iterdir()) == []
    assert cli.main(["example", "chat", "--out", "chat.jsonl", "--force"]) == 2
    assert list(tmp_path.iterdir()) == []


def test_force_replaces_the_files_whole_and_leaves_nothing_beside_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("chat.toml").write_text("mine\n", encoding="utf-8")
    write(find("chat"), Path("chat.toml"), force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.jsonl", "chat.toml"]
    assert Path("chat.toml").stat().st_mode & 0o777 == Path("chat.jsonl").stat().st_mode & 0o777
