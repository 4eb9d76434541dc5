"""Fixed-length streaming completions at rising concurrency, for vLLM's /v1/completions (or, with
--endpoint chat, /v1/chat/completions: the prompt as one user message, docs/chat.md): the locustfile.

It ships inside the package, so an installed wheel has it; `lookahead-runner locustfile` prints its path:

    locust -f "$(lookahead-runner locustfile)" --host http://127.0.0.1:8000            # web UI
    locust -f "$(lookahead-runner locustfile)" --host http://127.0.0.1:8000 --headless \\
        --stages 4:20,16:20,32:20 --requests-csv requests.csv --stages-csv stages.csv --csv locust

    locust -f "$(lookahead-runner locustfile)" --host http://127.0.0.1:8000 --headless --processes 4 ...
    locust -f "$(lookahead-runner locustfile)" --host http://127.0.0.1:8000 --headless \\
        --stages 2/s:30,8/s:30 --arrival poisson --max-in-flight 64 --requests-csv requests.csv    # open loop

(In a checkout, `locust -f locustfiles/completions.py` runs the same users: that file imports them from here.)
Options: --stages, --prompt-tokens, --output-tokens, --model, --temperature, --top-p, --seed,
--prompt-file, --requests-csv, --stages-csv, --workload-json, --request-timeout-s, --endpoint,
--chat-template-kwargs, --request-set, --arrival, --burstiness, --arrival-seed, --max-in-flight (workload/options.py;
docs/traffic.md). An API key is read from the environment variable
LOOKAHEAD_API_KEY only, and sent as a bearer header.
Across hosts, start the master with the options and `--master --expect-workers N`, and each worker
with `locust -f "$(lookahead-runner locustfile)" --worker --master-host MASTER` (plus LOOKAHEAD_API_KEY,
and the --prompt-file at the same path): workers send their request rows to the master, which
writes requests.csv, stages.csv and workload.json exactly as a single process does.
With the web UI, the "vLLM live" and "vLLM history" tabs chart the server's side (lookahead_runner/live).

Locust loads this file by its path, and nothing in the package imports it: it is the Locust process's
entry point, so, like cli.py, it may wire the scenario to the live tabs above it.
"""

from locust import events, run_single_user, task

from lookahead_runner.live import webui
from lookahead_runner.workload import scenario
from lookahead_runner.workload.dispatcher import RateDispatcherBase
from lookahead_runner.workload.options import add_scenario_options
from lookahead_runner.workload.shape import StagedShape
from lookahead_runner.workload.user import StreamingCompletionsBase

# what `from lookahead_runner.workload.locustfile import *` gives a locustfile: the users and the shape Locust runs
__all__ = ["StreamingCompletionsUser", "RateDispatcher", "RisingConcurrency"]


class StreamingCompletionsUser(StreamingCompletionsBase):
    """Each user streams one completion after another, with no think time (closed loop).

    Every request: a prompt of exactly --prompt-tokens tokens of the served model (unique head, so no
    prefix-cache hits), exactly --output-tokens tokens out (min_tokens = max_tokens, ignore_eos),
    --temperature / --top-p / --seed, streamed with usage on every chunk. One row per request goes
    to --requests-csv.
    """

    @task
    def fixed_length_completion(self) -> None:
        self.stream_completion()


class RateDispatcher(RateDispatcherBase):
    """A rate stage's sender (open loop), one per Locust process: each request of this process's share of the
    schedule (--arrival, --burstiness, --arrival-seed) goes out at its time, whatever is outstanding, capped
    by --max-in-flight; the same requests and the same rows as the users above."""

    @task
    def send_on_schedule(self) -> None:
        self.dispatch_run()


class RisingConcurrency(StagedShape):
    """--stages "USERS:SECONDS,...": hold each USERS for SECONDS (spawned at USERS/s), then stop; a
    "RATE/s:SECONDS" stage sends RATE requests per second for SECONDS instead (RateDispatcher)."""

    user_class = StreamingCompletionsUser
    dispatcher_class = RateDispatcher


@events.init_command_line_parser.add_listener
def _add_options(parser, **_kwargs):
    add_scenario_options(parser)


@events.init.add_listener
def _on_init(environment, **_kwargs):
    scenario.on_init(environment)


@events.test_start.add_listener
def _on_test_start(environment, **_kwargs):
    scenario.on_test_start(environment)


@events.test_stop.add_listener
def _on_test_stop(environment, **_kwargs):
    scenario.on_test_stop(environment)


@events.quitting.add_listener
def _on_quitting(environment, **_kwargs):
    scenario.on_quitting(environment)


# the web UI's live tabs (nothing when headless); after the scenario's init, whose request log they tap
events.init_command_line_parser.add_listener(webui.add_options)
events.init.add_listener(webui.on_init)


if __name__ == "__main__":
    run_single_user(StreamingCompletionsUser)
