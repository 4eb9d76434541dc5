"""TOML and `--set` overrides -> a checked SweepConfig, or one ConfigError line naming the field and the fix."""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

from pydantic import ValidationError

from . import error_text
from .cluster import check_ray_installed
from .error_text import Source
from .resolved_server import ResolvedServer
from .strict import ConfigError
from .sweep import SweepConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


def error_line(err: ValidationError, source: str | Source) -> str:
    """A SweepConfig's validation error as one line (config/error_text.py)."""
    return error_text.error_line(err, source, SweepConfig)


def config_from_dict(data: dict, source: str | Source = "config") -> SweepConfig:
    try:
        config = SweepConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(error_line(err, source)) from None
    name = source.name if isinstance(source, Source) else source
    check_ray_installed(config.cluster, name)
    request_set = check_files(config, source)
    if _own_lengths_by_default(config, request_set):
        config = config_from_dict(data | {"load": data.get("load", {}) | {"output_tokens": "natural"}}, source)
    check_environment(config, name)
    return config


def _own_lengths_by_default(config: SweepConfig, request_set) -> bool:
    """A request set whose every request carries its own output length (max_tokens, or vLLM bench's output_tokens)
    and no load.output_tokens given: each request is sent with its own length, as `vllm bench serve` sends it
    (max_tokens, ending at its end of sequence), not the default fixed length."""
    return (request_set is not None and "output_tokens" not in config.load.model_fields_set
            and 0 < request_set.own_lengths == len(request_set))


def check_environment(config: SweepConfig, source: str = "config", environ=os.environ) -> None:
    """Secrets the config reads from the environment (a `${NAME}`, as a resumed run's plan.json holds
    them, and server.api_key_env) must be set now, not hours into the sweep."""
    ResolvedServer.resolve(config.server, environ, source)


def check_files(config: SweepConfig, source: str | Source = "config"):
    """Files the config names must be readable now, not hours into the sweep; the request set read (or None)."""
    request_set = check_request_set(config, source)
    path = config.load.prompt_file
    if not path:
        return request_set
    line = (source if isinstance(source, Source) else Source(source)).line
    if not os.path.isfile(path):
        why = "is not a file" if os.path.exists(path) else "does not exist"
        raise ConfigError(line("load.prompt_file", f"{path!r} {why}; give a JSONL file "
                               "({\"text\": ...} per line) or leave it empty for the built-in corpus"))
    from ..workload.prompt import read_corpus_file  # pure (no Locust): the same reader the load uses

    try:
        read_corpus_file(path)
    except OSError as err:
        raise ConfigError(line("load.prompt_file", f"cannot read {path!r} ({err.strerror}); check its permissions")) \
            from None
    except UnicodeDecodeError:
        raise ConfigError(line("load.prompt_file", f"{path!r} is not UTF-8 text; "
                               "write one {\"text\": ...} per line")) from None
    except ValueError as err:
        raise ConfigError(line("load.prompt_file", str(err))) from None
    return request_set


def check_request_set(config: SweepConfig, source: str | Source = "config"):
    """load.requests read whole now: a bad line is one error naming the file and the line, before anything starts.
    The RequestSet read, or None without one."""
    path = config.load.requests
    if not path:
        return None
    line = functools.partial((source if isinstance(source, Source) else Source(source)).line, "load.requests")
    from ..workload.request_set import RequestSetError, read_request_set  # pure: the reader the load uses

    if not os.path.isfile(path):
        why = "is not a file" if os.path.exists(path) else "does not exist"
        raise ConfigError(line(f"{path!r} {why}; give a JSONL request set "
                               "({\"prompt\": ...} or {\"messages\": [...]} per line) or leave it empty"))
    try:
        request_set = read_request_set(path)
    except OSError as err:
        raise ConfigError(line(f"cannot read {path!r} ({err.strerror}); check its permissions")) from None
    except UnicodeDecodeError:
        raise ConfigError(line(f"{path!r} is not UTF-8 text; save it as UTF-8")) from None
    except RequestSetError as err:
        raise ConfigError(line(str(err))) from None
    if request_set.has_chat and config.load.endpoint != "chat":
        first = next(r for r in request_set.requests if r.is_chat)
        what = {"turns": "\"turns\" (a benchmark's: its first turn is a user message)",
                "conversations": "\"conversations\""}.get(first.source, "\"messages\"")
        noun = "conversation" if first.source == "conversations" else "line"
        raise ConfigError(line(f"{path}: {noun} {first.line} has {what}, which need "
                               "load.endpoint = \"chat\"; set it, or give every request a \"prompt\""))
    return request_set


def load_config(path: Path | None, overrides: dict | None = None, source: str = "",
                set_keys: tuple[str, ...] | None = None, command_keys: tuple[str, ...] = ()) -> SweepConfig:
    """Read TOML (or defaults when path is None) and apply dotted CLI overrides; `source` names them in an error
    where there is no file (e.g. "--serve-cmd/--bench-cmd"). An error in a key of `set_keys` (default: every
    override) is blamed on `--set KEY`, not on the file; one in a key of `command_keys` on `source`, beside a file."""
    data: dict = {}
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{path}: file not found; pass an existing TOML file to --config") from None
        except OSError as err:
            raise ConfigError(f"{path}: cannot read ({err.strerror}); check the path and its permissions") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
            raise ConfigError(f"{path}: not valid TOML ({err}); fix the syntax") from None
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, leaf = dotted.split(".")
        if not leaf or not all(parents):
            raise ConfigError(f"--set {dotted}: empty key part; write e.g. --set load.repeats=3")
        for depth, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {dotted}: {'.'.join(parents[:depth + 1])} is not a table; "
                                  "set a key inside a table, e.g. --set load.repeats=3")
        node[leaf] = value
    given = tuple(overrides or ()) if set_keys is None else set_keys
    return config_from_dict(data, Source(str(path) if path else source or "defaults", given, command_keys, source))
