"""The one line a server's refusal ends the run with (issue 37, item 9): its own message and the fix, for each kind
of refusal; a 5xx or a 429 is no refusal of the workload. And a running server without a model named takes the one
it serves, never the default name of a server the runner starts."""
import pytest

from lookahead_runner.config import ConfigError, config_from_dict
from lookahead_runner.run.life.server_check import refusal

NOT_SERVED = "The model `sim/llama-3-8b` does not exist. Valid aliases: tiny-target."


def test_a_model_it_does_not_serve_names_what_it_serves_and_the_fix():
    running = refusal(404, NOT_SERVED, "POST /v1/completions", "sim/llama-3-8b", "", ["tiny-target"], external=True)
    assert running == ("the server does not serve the model 'sim/llama-3-8b' (POST /v1/completions answered HTTP 404: "
                       f"{NOT_SERVED}); set server.model to a model it serves (tiny-target), or leave server.model "
                       "out: the served model is then taken from GET /v1/models")
    started = refusal(404, NOT_SERVED, "POST /v1/completions", "sim/llama-3-8b", "", [], external=False)
    assert started.endswith("; set server.model to the name it serves (its --served-model-name, or the model it was "
                            "started with)")


@pytest.mark.parametrize("code, said, key_env, expected", [
    (401, "Unauthorized", "", "the server refused the load's API key (POST /v1/completions answered HTTP 401: "
                              "Unauthorized); set server.api_key_env to the environment variable holding the key the "
                              "server takes (its --api-key)"),
    (401, "Unauthorized", "MY_KEY", "the server refused the load's API key (POST /v1/completions answered HTTP 401: "
                                    "Unauthorized); check the key in the environment variable MY_KEY "
                                    "(server.api_key_env)"),
    (400, "you must provide a chat template if the tokenizer does not define one.", "",
     "load.endpoint = \"chat\": the server has no chat template for m (it answered HTTP 400: you must provide a chat "
     "template if the tokenizer does not define one.); give vLLM one with --chat-template FILE in server.extra_args, "
     "or set load.endpoint = \"completions\""),
    (400, "'min_tokens' is not permitted", "", "the server refused the load's request (POST /v1/completions answered "
                                               "HTTP 400: 'min_tokens' is not permitted); change the setting it names"),
    (404, "Not Found", "", "the server has no such endpoint (POST /v1/completions answered HTTP 404: Not Found); "
                           "check server.url and load.endpoint"),
    (500, "boom", "", ""),
    (429, "slow down", "", ""),
])
def test_each_refusal_is_one_line_with_the_servers_words(code, said, key_env, expected):
    line = refusal(code, said, "POST /v1/completions", "m", key_env)
    assert "\n" not in line and line.startswith(expected) and bool(line) == bool(expected)


def test_a_running_server_without_a_model_named_is_asked_for_it():
    running = config_from_dict({"server": {"url": "http://127.0.0.1:9"}, "speculation": {"k": [0]}})
    assert running.server.model == ""      # not the demo's "sim/llama-3-8b": it serves what it serves
    named = config_from_dict({"server": {"url": "http://127.0.0.1:9", "model": "m"}, "speculation": {"k": [0]}})
    assert named.server.model == "m"
    assert config_from_dict({}).server.model == "sim/llama-3-8b"   # a server the runner starts: the default
    with pytest.raises(ConfigError, match="model: give the model `serve` starts"):
        config_from_dict({"server": {"model": " "}})


@pytest.mark.parametrize("body", [b"<html>not an API</html>", b'{"object": "list", "data": []}',
                                  b'{"data": [{"id": null}, {"id": ""}, {"id": 7}, "m"]}',
                                  b'[{"id": "m"}]', b'{"data": "m"}'])
def test_a_models_answer_without_a_model_id_is_one_line_with_the_fix(body):
    """GET /v1/models answered 200 but named no model (a page, an empty list, ids that are no name): never a model
    called "None" or "7" sent to every request, but one line naming server.url and server.model."""
    import http.server
    import threading

    from lookahead_runner.config import ResolvedServer
    from lookahead_runner.run.life.preflight import PreflightError
    from lookahead_runner.run.life.server_check import served_models, with_served_model

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        assert served_models(url, {}, timeout_s=5) == []
        config = config_from_dict({"server": {"url": url}, "speculation": {"k": [0]}})
        with pytest.raises(PreflightError) as err:
            with_served_model(config, ResolvedServer.resolve(config.server), say=lambda line: None)
    finally:
        server.shutdown()
    assert str(err.value) == (f"server.url: GET {url}/v1/models listed no model; is the server up? Or set server.model "
                              "to the model it serves")


def test_a_server_that_cuts_its_answer_short_leaves_the_run_to_the_loads_own_records():
    """The check's answer streams (as the load's do): a server that dies mid-answer (its engine crashed on the first
    request) or answers no HTTP at all raised http.client's IncompleteRead or BadStatusLine, no OSError, out of the
    life: a traceback and a life left "running". Like no answer, the load's records say what happened."""
    import itertools
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from lookahead_runner.run.life.life import answers as still_answers, warm_up
    from lookahead_runner.run.life.server_check import check_workload, served_models

    answers = [b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"40\r\ndata: {\"choices\": [", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"data\": [",
               b"SSH-2.0-OpenSSH_9.6\r\n"]
    served = itertools.cycle(answers)

    class CutAnswers(BaseHTTPRequestHandler):
        def answer(self):
            # the whole request first: a close with its body unread resets the connection (an OSError)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.wfile.write(next(served))
            self.close_connection = True

        do_GET = do_POST = answer

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), CutAnswers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    config = config_from_dict({"server": {"url": url, "model": "m"}, "speculation": {"k": [0]}})
    try:
        for _ in answers:
            check_workload(config, url, {})           # returns: no refusal, no exception
        for _ in answers:
            assert served_models(url, {}, timeout_s=5) == []
        for _ in answers:   # the warm-up's (one request each) and the hang probe's after the load: a cut answer is
            warm_up(url, "m", {}, count=1)    # no hang, and must not lose the life just measured
            assert still_answers(url, "m", {}, timeout_s=5)
    finally:
        server.shutdown()
        server.server_close()
