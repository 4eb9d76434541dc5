"""What would cost a server life, found before the first one starts (the dry run and a sweep's start alike).

Refused, one line naming the field (exit 2): a model or draft path that does not exist on this host and is no
Hugging Face name (vLLM would take it for a repo id and the life would die of it); a Hugging Face name missing from
the local cache while HF_HUB_OFFLINE is set (no life could load it). Warned: a Hugging Face name missing from the
local cache (the first life downloads it, inside its server.ready_timeout_s), with what the cache holds of it so
far; rate stages with no decision.slo, naming what the verdict then reads.

Only the models that a server the runner starts here loads are checked: not those of a running server
(server.url), a launcher's (server.argv_template, docker or ssh: the path is the container's or the other host's),
a Ray worker's, or the simulator's names. The Hugging Face rules are huggingface_hub's (validate_repo_id, the
cache's `models--ORG--NAME` folders, HF_HUB_CACHE / HF_HOME / XDG_CACHE_HOME, HF_HUB_OFFLINE; the weights may be in
the folder of vLLM's --download-dir instead, its cache_dir), read from the
huggingface_hub 2.4 that vLLM 0.32 installs; nothing goes over the network.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..config import ConfigError, SweepConfig
from ..vllm.knob import flag_value, loads_draft_model
from .life.launch import environment_reaches_server

# huggingface_hub's REPO_ID_REGEX (a name, or namespace/name, each of ASCII word characters, "-" and ".", starting
# and ending with a word character, at most 96), and validate_repo_id's "--" / ".." / ".git" rules
_REPO_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
_REPO_ID_RE = re.compile(rf"(?:{_REPO_PART}/)?{_REPO_PART}")
_TRUE = {"1", "ON", "YES", "TRUE"}   # huggingface_hub's _is_true
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
DOWNLOAD_DIR_FLAG = "--download-dir"   # vLLM hands it to huggingface_hub as the weights' cache_dir (weight_utils.py)


def is_hub_name(name: str) -> bool:
    """Whether huggingface_hub would take `name` for a repo id (vLLM loads a name that is no local path so)."""
    return bool(_REPO_ID_RE.fullmatch(name)) and "--" not in name and ".." not in name and not name.endswith(".git")


def hub_cache(environ: Mapping[str, str]) -> Path:
    """The folder huggingface_hub caches models in, as the server's environment sets it."""
    def expand(path: str) -> Path:
        return Path(os.path.expandvars(os.path.expanduser(path)))

    if environ.get("HF_HUB_CACHE") or environ.get("HUGGINGFACE_HUB_CACHE"):
        return expand(environ.get("HF_HUB_CACHE") or environ["HUGGINGFACE_HUB_CACHE"])
    home = environ.get("HF_HOME") or os.path.join(environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return expand(home) / "hub"


def is_offline(environ: Mapping[str, str]) -> bool:
    value = environ.get("HF_HUB_OFFLINE") or environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.upper() in _TRUE


@dataclass(frozen=True)
class CacheEntry:
    """What the cache holds of one repo: its weights in a snapshot (`complete`), and the bytes of its blobs."""

    complete: bool
    bytes_so_far: int


def cache_entry(cache: Path, name: str) -> CacheEntry:
    repo = cache / ("models--" + name.replace("/", "--"))
    snapshots = repo / "snapshots"
    complete = snapshots.is_dir() and any(
        path.name.endswith(WEIGHT_SUFFIXES) for snapshot in snapshots.iterdir() if snapshot.is_dir()
        for path in snapshot.rglob("*"))
    blobs = repo / "blobs"
    size = sum(path.stat().st_size for path in blobs.iterdir() if path.is_file()) if blobs.is_dir() else 0
    return CacheEntry(complete, size)


def loaded_models(config: SweepConfig) -> list[tuple[str, str]]:
    """(field, name) of every model a server life the runner starts on this host loads; [] where the load is not
    this host's to check."""
    server, spec = config.server, config.speculation
    if server.url or server.is_simulator or config.cluster.engine == "ray" or not environment_reaches_server(server):
        return []
    models = [("server.model", server.model)]
    if loads_draft_model(spec.method) and any(spec.k) and not spec.raw_lookahead_slots:
        models.append(("speculation.draft_model", spec.draft_model))
    return [(field, name.strip()) for field, name in models if name.strip() and "://" not in name and "${" not in name]


def check_models(config: SweepConfig, environ: Mapping[str, str] = os.environ) -> list[str]:
    """Refuse a model no life could load (ConfigError); the warnings for a Hugging Face name not in the cache."""
    env = {**environ, **{k: v for k, v in config.server.env.items() if "${" not in v}}
    warnings = []
    for field, name in loaded_models(config):
        what = "draft" if field.startswith("speculation") else "model"
        if os.path.exists(name):
            continue
        if not is_hub_name(name):
            raise ConfigError(f"{field}: {name!r} does not exist on this host and is no Hugging Face name; give the "
                              f"{what}'s folder or its Hugging Face name")
        if env.get("VLLM_USE_MODELSCOPE", "").strip().lower() in ("1", "true"):
            continue  # ModelScope's names and cache, not Hugging Face's
        cache = hub_cache(env)
        entry = cache_entry(cache, name)
        download_dir = flag_value(config.server.extra_args, DOWNLOAD_DIR_FLAG)
        if entry.complete or (download_dir and cache_entry(Path(download_dir), name).complete):
            continue
        so_far = f"; {entry.bytes_so_far / 2**20:.1f} MiB of it downloaded so far" if entry.bytes_so_far else ""
        if is_offline(env):
            raise ConfigError(f"{field}: {name!r} is not in the Hugging Face cache ({cache}{so_far}) and "
                              f"HF_HUB_OFFLINE is set, so no server life can load it; download it first "
                              f"(hf download {name}) or give a local folder")
        lives = "the first server life with K > 0" if what == "draft" else "the first server life"
        warnings.append(f"{field}: {name!r} is not in the Hugging Face cache ({cache}{so_far}): {lives} downloads "
                        f"it before it is ready, within server.ready_timeout_s = {config.server.ready_timeout_s:g} s")
    return warnings


SLO_EXAMPLE = "slo = { ttft_p90_ms = 500, tpot_p90_ms = 50 }"


def slo_warning(config: SweepConfig, mode: str = "sweep") -> str:
    """What rate stages without decision.slo are judged by, or "" (users stages, or an SLO given)."""
    if not config.load.rate_stages or config.decision.slo:
        return ""
    if mode == "ramp":
        return ("decision.slo is empty: the knee in rate terms is where the K stops keeping up with the rate, and no "
                f"SLO's attainment is read; set decision.slo, e.g. {SLO_EXAMPLE}")
    return (f"decision.slo is empty: at the rate stages the verdict reads the e2e latency at "
            f"p{config.decision.latency_percentile:g} (decision.latency_percentile) alone: no SLO is checked and no "
            f"K's capacity within an SLO is found; set decision.slo, e.g. {SLO_EXAMPLE}")
