"""A config with rate stages as the runner hands it to Locust and to the pre-flight."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from lookahead_runner.config import config_from_dict
from lookahead_runner.run.life.load import locust_argv
from lookahead_runner.run.life.preflight import in_flight, preflight_stage
from lookahead_runner.workload.stages import parse_stages


def _config(stages, **load):
    return config_from_dict({"load": {"stages": stages, "preflight_s": 2.0, **load}})


def _flag(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_rate_stages_and_their_pacing_reach_locust():
    config = _config([{"users": 8, "duration_s": 20}, {"rate": 4.5, "duration_s": 30}], arrival="poisson",
                     burstiness=0.5, arrival_seed=11, max_in_flight=64)
    argv = locust_argv("http://127.0.0.1:1", Path("/tmp/x"), "m", config.load.model_copy(update={"processes": 1}))
    assert _flag(argv, "--stages") == "8:20,4.5/s:30"
    assert [s.label for s in parse_stages(_flag(argv, "--stages"))] == ["8 users", "4.5 req/s"]
    assert (_flag(argv, "--arrival"), _flag(argv, "--burstiness"), _flag(argv, "--arrival-seed"),
            _flag(argv, "--max-in-flight")) == ("poisson", "0.5", "11", "64")
    assert config.target_users == 8 and config.load.peak_users == 8


def test_user_stages_alone_pass_no_pacing_options():
    config = _config([{"users": 8, "duration_s": 20}])
    argv = locust_argv("http://127.0.0.1:1", Path("/tmp/x"), "m", config.load.model_copy(update={"processes": 1}))
    assert "--arrival" not in argv and _flag(argv, "--stages") == "8:20"


def test_rate_stages_only_preflight_at_the_highest_rate():
    config = _config([{"rate": 2.0, "duration_s": 20}, {"rate": 12.0, "duration_s": 20}], max_in_flight=0)
    assert config.target_users == 0 and config.load.peak_users == 12
    stage = preflight_stage(config)
    assert (stage.rate, stage.users, stage.duration_s) == (12.0, None, 2.0)
    assert preflight_stage(_config([{"users": 4, "duration_s": 5}, {"rate": 9.0, "duration_s": 5}])).users == 4
    # its "users": the requests in flight on average (4 requests of 0.5 s each over 1 s: 2)
    requests = pd.DataFrame({"ok": [1, 1, 1, 1], "t_send_s": [0.0, 0.25, 0.5, 0.5], "t_done_s": [0.5, 0.75, 1.0, 1.0],
                             "e2e_ms": [500.0] * 4})
    assert in_flight(requests) == 2


def test_each_change_of_kind_gives_locust_time_to_drain_before_the_life_kills_it():
    from lookahead_runner.run.life.load import locust_deadline_s
    from lookahead_runner.workload.stages import DRAIN_GRACE_S

    users_only = _config([{"users": 2, "duration_s": 10}, {"users": 4, "duration_s": 10}], request_timeout_s=30)
    mixed = _config([{"users": 2, "duration_s": 10}, {"rate": 4.0, "duration_s": 10}, {"users": 4, "duration_s": 10}],
                    request_timeout_s=30)
    assert locust_deadline_s(users_only.load, 20.0) == 20.0 + 2 * 30 + 60
    # a rate stage's backlog may take up to a request's timeout to end, and the users' last requests as long
    assert locust_deadline_s(mixed.load, 30.0) == 30.0 + 2 * 30 + 60 + 2 * (30 + DRAIN_GRACE_S)
