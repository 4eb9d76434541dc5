"""A server as found: the model it serves, and whether it takes the load's requests, before any stage.

- `with_served_model`: where the config names no model (server.url without server.model; `ramp --url` on the
  demo's config), the first model GET /v1/models lists, as `vllm bench serve` takes it.
- `check_workload`: one request exactly as the load sends it (its endpoint, sampling options, chat template
  kwargs; 4 tokens) once the server is ready. A server that refuses it (a model it does not serve, a key it does
  not take, a 400 such as a missing chat template) refuses every request at every K alike: the run stops here in one
  line with the server's own message and the fix (a PreflightError: exit 2), instead of measuring failures. A 5xx
  or a 429 is no refusal of the workload: the load's own records show it.
"""
from __future__ import annotations

import dataclasses
import http.client
import json
import urllib.error
import urllib.request

from ...config import ResolvedServer, SweepConfig
from ...contracts.auth import keyed_request
from ...vllm.endpoints import CHAT_PATH, COMPLETIONS_PATH, MODELS_PATH
from ...workload.request import chat_payload, completion_payload
from ...workload.sse import error_message, model_ids
from .preflight import PreflightError

CHECK_TOKENS = 4
TIMEOUT_S = 60.0


def served_models(base_url: str, headers: dict[str, str], key_env: str = "", timeout_s: float = 10.0) -> list[str]:
    """The ids GET /v1/models lists, first the one vLLM serves by default. An HTTP error is a refusal (a
    PreflightError in one line); no answer at all is [] (the caller says what it needed it for)."""
    url = base_url.rstrip("/") + MODELS_PATH
    try:
        with urllib.request.urlopen(keyed_request(url, headers), timeout=timeout_s) as response:
            body = response.read()
    except urllib.error.HTTPError as err:
        said = error_message(_body(err)) or err.reason
        raise PreflightError(refusal(err.code, said, f"GET {MODELS_PATH}", "", key_env) or
                             f"GET {url} answered HTTP {err.code}: {said}; is server.url a vLLM server?") from None
    except (OSError, http.client.HTTPException):  # no answer, or a cut or garbled one
        return []
    return model_ids(body)


def with_served_model(config: SweepConfig, server: ResolvedServer,
                      say=print) -> tuple[SweepConfig, ResolvedServer]:
    """The config (and its resolved server, which plan.json records) with server.model filled in from the running
    server where it names none."""
    if config.server.model or not config.server.url:
        return config, server
    models = served_models(config.server.url, server.headers, config.server.api_key_env)
    if not models:
        raise PreflightError(f"server.url: GET {config.server.url.rstrip('/')}{MODELS_PATH} listed no model; is the "
                             "server up? Or set server.model to the model it serves")
    also = f"; it also serves {', '.join(models[1:])}" if len(models) > 1 else ""
    say(f"model: {models[0]} (the first GET {MODELS_PATH} lists{also})")
    model = {"model": models[0]}
    return (config.model_copy(update={"server": config.server.model_copy(update=model)}),
            dataclasses.replace(server, masked=server.masked.model_copy(update=model)))


def check_workload(config: SweepConfig, base_url: str, headers: dict[str, str]) -> None:
    """One request as the load sends it; a refusal stops the run (PreflightError) with the server's message."""
    load, model = config.load, config.server.served_model
    variant = load.variants[0]
    exact = not variant.natural_output
    if load.endpoint == "chat":
        path = CHAT_PATH
        body = chat_payload(model, "warm up", CHECK_TOKENS, variant.temperature, load.top_p, load.seed,
                            load.chat_template_kwargs, exact=exact)
    else:
        path = COMPLETIONS_PATH
        body = completion_payload(model, "warm up", CHECK_TOKENS, variant.temperature, load.top_p, load.seed)
        if not exact:  # natural lengths: the load sends neither (workload/request.set_payload)
            del body["min_tokens"], body["ignore_eos"]
    request = keyed_request(base_url + path, {"Content-Type": "application/json", **headers}, json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            response.read()
    except urllib.error.HTTPError as err:
        said = error_message(_body(err)) or err.reason
        served = _served_quietly(base_url, headers) if err.code == 404 else []
        why = refusal(err.code, said, f"POST {path}", model, config.server.api_key_env, served, bool(config.server.url))
        if why:
            raise PreflightError(why) from None
    except (OSError, http.client.HTTPException):  # no answer, or a cut one: the load's own records say what happened
        return


def refusal(code: int, said: str, what: str, model: str, key_env: str, served: list[str] | None = None,
            external: bool = False) -> str:
    """The line a refused request stops the run with: the server's own message and the fix; "" where the status
    is no refusal of the workload (a 5xx, a 429: the load's records show those)."""
    answered = f"{what} answered HTTP {code}: {said}"
    if code in (401, 403):
        fix = (f"check the key in the environment variable {key_env} (server.api_key_env)" if key_env
               else "set server.api_key_env to the environment variable holding the key the server takes "
                    "(its --api-key)")
        return f"the server refused the load's API key ({answered}); {fix}"
    if code == 404 and model and "model" in said.lower():
        return f"the server does not serve the model {model!r} ({answered}); {_model_fix(served or [], external)}"
    if code == 400 and "chat template" in said.lower():
        return (f"load.endpoint = \"chat\": the server has no chat template for {model} (it answered HTTP 400: "
                f"{said}); give vLLM one with --chat-template FILE in server.extra_args, or set load.endpoint = "
                "\"completions\"")
    if code == 404:
        return (f"the server has no such endpoint ({answered}); check server.url and load.endpoint (a vLLM server "
                "answers /v1/completions and /v1/chat/completions)")
    if 400 <= code < 500 and code != 429:
        return (f"the server refused the load's request ({answered}); change the setting it names "
                "(the load's in [load], or the server's flags in server.extra_args)")
    return ""


def _model_fix(served: list[str], external: bool) -> str:
    names = f" ({', '.join(served)})" if served else ""
    if external:
        return (f"set server.model to a model it serves{names}, or leave server.model out: the served model is "
                "then taken from GET /v1/models")
    return f"set server.model to the name it serves{names} (its --served-model-name, or the model it was started with)"


def _body(err: urllib.error.HTTPError) -> bytes:
    """An HTTP error's body; b"" where the server cut it short."""
    try:
        return err.read()
    except (OSError, http.client.HTTPException):
        return b""


def _served_quietly(base_url: str, headers: dict[str, str]) -> list[str]:
    """The served models for a fix's text; [] where they cannot be listed."""
    try:
        return served_models(base_url, headers)
    except PreflightError:
        return []
