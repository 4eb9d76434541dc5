"""The sweep's progress line: rates from the server's own counters between refreshes."""
from lookahead_runner.config import StageConfig
from lookahead_runner.progress import SweepProgress


def test_rates_are_deltas_of_the_servers_counters_between_refreshes():
    progress = SweepProgress([StageConfig(users=8, duration_s=10)], 1, enabled=False)
    assert progress._rates({}) == ""
    assert progress._rates({"t_s": 1.0, "requests_success_total": 10, "generation_tokens_total": 100}) == ""
    assert progress._rates({"t_s": 3.0, "requests_success_total": 20, "generation_tokens_total": 300}) == \
        ", 5.0 req/s, 100 tok/s"
    assert progress._rates({"t_s": 3.0, "requests_success_total": 20}) == ""  # no time passed
    assert progress._rates({"t_s": 4.0, "requests_success_total": 23}) == ", 3.0 req/s"  # a counter missing
    progress.life_started("k2/r0")
    assert progress._rates({"t_s": 9.0, "requests_success_total": 99}) == ""  # a new life starts afresh
