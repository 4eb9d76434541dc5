"""What a server life is started with, and how plan.json lists it: the argv rendered from the config and the
probe (secrets as ${NAME}), the environment overlay, and the life's plan entry."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ...config import ResolvedServer, ServerConfig, SweepConfig
from ...config.masking import Secrets, api_key_to_env, hf_token_to_env
from ...runfolder import results
from ...runfolder.plan import PlannedLife, append_lives
from ...vllm.knob import Setting, server_argv
from ...vllm.probe import Capabilities
from ...vllm.secrets import HF_IMPLICIT_TOKEN_OFF, HF_TOKEN_ENV


@dataclass(frozen=True)
class Life:
    setting: Setting
    repeat: int

    @property
    def key(self) -> str:
        return results.life_key(self.setting.name, self.repeat)


def render_argv(config: SweepConfig, caps: Capabilities, setting: Setting, port: int | str,
                server: ResolvedServer) -> list[str]:
    """The server argv as recorded and shown: each secret value as ${NAME} (config/masking.py); `port` may be the
    dry run's placeholder for a port picked when the life starts."""
    s, spec = server.masked, config.speculation
    return server_argv(caps, s.command, s.model, s.host, port, s.extra_args, setting, spec.method, spec.draft_model,
                       s.argv_template or None, spec.flag_style, spec.config)


def plan_entry(config: SweepConfig, caps: Capabilities, life: Life, server: ResolvedServer, **extra) -> PlannedLife:
    """The life as plan.json lists it, its argv with each secret as ${NAME} (planned_lives masks any other field
    holding a secret value); `extra`: more PlannedLife fields (role, variant, stages, chosen)."""
    return PlannedLife.written(dict(
        setting=life.setting.name, k=life.setting.k, repeat=life.repeat, axis_flag=life.setting.axis_flag,
        axis_value=life.setting.axis_value, spec_key=life.setting.spec_key,
        argv=render_argv(config, caps, life.setting, config.server.port or 8000, server), dir=life.key, **extra))


def planned_lives(config: SweepConfig, caps: Capabilities, lives: list[Life], server: ResolvedServer,
                  **extra) -> list[PlannedLife]:
    """The lives as plan.json records them: secrets as ${NAME}; `extra` as in plan_entry."""
    return [PlannedLife.model_validate(results.redact(server.secrets.mask_value(
        plan_entry(config, caps, life, server, **extra).model_dump()))) for life in lives]


def append_to_plan(config: SweepConfig, caps: Capabilities, run_dir: Path, lives: list[Life],
                   server: ResolvedServer, **extra) -> None:
    """plan.json gains these lives (secrets as ${NAME}), so --resume finds them; `extra` goes in each entry."""
    append_lives(run_dir, planned_lives(config, caps, lives, server, **extra))


# Launchers that start the server elsewhere without handing it this process's environment.
REMOTE_LAUNCHERS = ("docker", "podman", "ssh", "kubectl")


def environment_reaches_server(server: ServerConfig) -> bool:
    return not server.argv_template and os.path.basename(server.command[0]) not in REMOTE_LAUNCHERS


def server_launch(config: SweepConfig, caps: Capabilities, setting: Setting, port: int,
                  server: ResolvedServer) -> tuple[list[str], dict[str, str], Secrets]:
    """(argv, environment overlay, secrets) of the server process, as recorded: placeholders instead of
    secrets. Where the environment reaches the server, a lone --api-key travels in VLLM_API_KEY and --hf-token's
    value in HF_TOKEN instead of the argv, out of every local user's process table (a `docker run` or `ssh` launcher
    would start it without the variable: the flags stay; so does --hf-token where HF_TOKEN is set to something
    else or HF_HUB_DISABLE_IMPLICIT_TOKEN would keep vLLM from reading it)."""
    argv, key_env = render_argv(config, caps, setting, port, server), {}
    if environment_reaches_server(config.server):
        argv, key_env = api_key_to_env(argv)
        env = os.environ | server.masked.env
        if not env.get(HF_IMPLICIT_TOKEN_OFF) and HF_TOKEN_ENV not in server.masked.env:
            argv, token_env = hf_token_to_env(argv)
            key_env |= token_env
    return argv, server.masked.env | key_env, server.secrets
