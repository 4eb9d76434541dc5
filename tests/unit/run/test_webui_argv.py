"""`sweep --web`: the option, and the Locust argv of a life with and without the web UI (no Locust import;
tests/e2e/test_webui_routes.py parses the same argv with Locust's own parser)."""

from __future__ import annotations

import socket
from pathlib import Path
from types import SimpleNamespace

from lookahead_runner.cli import build_parser
import pytest

from lookahead_runner.config import ConfigError, config_from_dict
from lookahead_runner.contracts.auth import LIVE_TOKEN_ENV
from lookahead_runner.run.life.load import WEB_HOST, live_env, live_port_now, live_view_port, locust_argv, web_url

LOAD = SimpleNamespace(stages=[SimpleNamespace(users=2, duration_s=5.0)], prompt_tokens=32, output_tokens=16,
                       temperature=0.0, request_timeout_s=30.0, processes=1, locust_extra_args=[])


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_web_is_an_option_of_every_run_command():
    parser = build_parser()
    assert parser.parse_args(["sweep", "--config", "x.toml", "--web"]).web is True
    assert parser.parse_args(["sweep", "--config", "x.toml"]).web is False
    assert parser.parse_args(["demo", "--web"]).web is True
    assert parser.parse_args(["ramp", "--web"]).web is True


def test_headless_by_default_with_the_setting_name():
    argv = locust_argv("http://127.0.0.1:8000", Path("/tmp/life"), "m", LOAD, setting_name="k4/r0")
    assert "--headless" in argv
    assert _value(argv, "--setting-name") == "k4/r0"
    assert not {"--web-port", "--web-host", "--autostart", "--autoquit"} & set(argv)


def test_web_mode_serves_the_ui_locally_and_still_runs_the_stages_unattended():
    argv = locust_argv("http://127.0.0.1:8000", Path("/tmp/life"), "m", LOAD, setting_name="k2/r1", web_port=18089)
    assert "--headless" not in argv
    assert "--autostart" in argv
    assert float(_value(argv, "--autoquit")) >= 0  # Locust quits by itself after the last stage
    assert (_value(argv, "--web-host"), _value(argv, "--web-port")) == (WEB_HOST, "18089")
    assert _value(argv, "--setting-name") == "k2/r1"
    assert _value(argv, "--stages") == "2:5"
    assert "--follow-sweep" in argv  # the page follows the sweep to the next life's UI on the same port
    assert web_url(18089).startswith("http://127.0.0.1:18089/?tab=lookahead&token=")


def test_the_live_view_address_carries_the_sweep_token_which_locust_gets_by_its_environment_only():
    token = web_url(18089).rsplit("token=", 1)[1]
    assert len(token) >= 22 and web_url(18090).endswith(f"token={token}")  # one token for the whole sweep
    assert live_env(18089) == {LIVE_TOKEN_ENV: token} and live_env(None) == {}
    argv = locust_argv("http://127.0.0.1:8000", Path("/tmp/life"), "m", LOAD, web_port=18089)
    assert not any(token in arg for arg in argv)  # an argv is readable by every local user (ps)


def test_locust_workers_master_listens_on_this_machine_only():
    argv = locust_argv("http://h", Path("/tmp/life"), "m", SimpleNamespace(**{**vars(LOAD), "processes": 2}))
    assert _value(argv, "--master-bind-host") == "127.0.0.1"


@pytest.mark.parametrize("extra", [["--web-host", "0.0.0.0"], ["--web-host=0.0.0.0"], ["--web-port", "80"], ["-P", "80"],
                                   ["-P80"], ["--master-bind-host", "*"], ["--web_host", "::"],
                                   # Locust's parser takes a unique prefix of a flag (argparse's allow_abbrev)
                                   ["--web-po", "80"], ["--master-bind-h=0.0.0.0"],
                                   # a master of its own, listening on every interface (Locust's default)
                                   ["--processes", "4"], ["--proc=4"], ["--master"]])
def test_locust_arguments_that_rebind_or_expose_the_web_ui_are_refused(extra):
    with pytest.raises(ConfigError) as err:
        config_from_dict({"load": {"locust_extra_args": extra}}, "c")
    assert str(err.value).startswith("c: load.locust_extra_args: ") and "\n" not in str(err.value)
    assert "127.0.0.1" in str(err.value)


def test_other_locust_arguments_still_pass():
    assert config_from_dict({"load": {"locust_extra_args": ["--loglevel", "INFO", "-L", "DEBUG"]}}, "c")


def test_without_a_setting_name_no_option_is_passed():
    assert "--setting-name" not in locust_argv("http://h", Path("/tmp/life"), "m", LOAD)


def _listen(port: int) -> socket.socket:
    """A web server's socket on `port`, as Locust's (gevent's) is: SO_REUSEADDR, bound, listening."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((WEB_HOST, port))
    sock.listen()
    return sock


def test_a_life_whose_live_port_another_process_took_gets_a_free_one_and_says_so():
    """Locust exits (code 2, no stage run) when its --web-port is taken: the life would fail for the live view."""
    with live_view_port(True) as held:
        assert live_port_now(held) == (held, "")  # between lives only the holder has it: free for the life
        _listen(held).close()  # and a web server can take it beside the holder
        squatter = _listen(held)  # another process took it between two lives
        try:
            port, note = live_port_now(held)
            assert port != held and note == (f"live view: port {held} is taken by another process; this life's "
                                              f"live view is at {web_url(port)}")
            _listen(port).close()
        finally:
            squatter.close()
        assert live_port_now(held) == (held, "")  # back once it is given up
    assert live_port_now(None) == (None, "")
