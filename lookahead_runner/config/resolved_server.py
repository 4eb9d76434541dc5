"""The server as one run uses it, resolved once at the run's start (cli.py) and handed down: the config with
each secret as ${NAME} (what plan.json, server.json, the logs and the report show), the secrets' values
(filled in at launch, masked in everything that comes back) and the API key the load, the health checks and
the scrapes send. No later step reads the server's secrets from the config or the environment again.
Loading a config resolves it once too (config/loading.py), so a secret that is not set stops the run before
anything starts, not hours into the sweep.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..contracts.auth import LOAD_KEY_ENV, bearer_header
from .masking import MissingSecret, Secrets, mask_server
from ..vllm.secrets import SERVER_KEY_ENV
from .server import ServerConfig
from .strict import ConfigError


@dataclass(frozen=True)
class ResolvedServer:
    masked: ServerConfig                      # secrets as ${NAME}
    secrets: Secrets
    load_key: str = field(default="", repr=False)

    @classmethod
    def resolve(cls, server: ServerConfig, environ: Mapping[str, str] = os.environ,
                source: str = "config") -> "ResolvedServer":
        """Raises ConfigError (one line: the field, the variable to export) for a secret read from the
        environment (a `${NAME}`, as a resumed run's plan.json holds them, or server.api_key_env) that is not set."""
        masked, secrets = mask_server(server, environ)
        for field_name, name in secrets.missing:
            raise ConfigError(f"{source}: {field_name}: ${{{name}}} is read from the environment, but {name} is not "
                              f"set (secrets are kept only by name); export {name}=... and run again")
        if server.api_key_env and not environ.get(server.api_key_env):
            raise ConfigError(f"{source}: server.api_key_env: the environment variable {server.api_key_env} is not "
                              f"set; export {server.api_key_env}=<the API key>, or remove api_key_env")
        return cls(masked, secrets, _load_key(server, masked, secrets, environ))

    @property
    def headers(self) -> dict[str, str]:
        """The bearer header every request of the runner and the load carries."""
        return bearer_header(self.load_key)

    @property
    def load_env(self) -> dict[str, str]:
        """The key reaches Locust through its environment only, never its argv or files."""
        return {LOAD_KEY_ENV: self.load_key} if self.load_key else {}


def _load_key(server: ServerConfig, masked: ServerConfig, secrets: Secrets, environ: Mapping[str, str]) -> str:
    """One key: the one in the variable server.api_key_env names, else the one the runner gives the server
    it starts (--api-key, else VLLM_API_KEY in its environment)."""
    if server.api_key_env or server.url:
        return environ.get(server.api_key_env, "") if server.api_key_env else ""
    if secrets.server_key:
        return secrets.server_key
    try:
        return secrets.resolve(masked.env.get(SERVER_KEY_ENV, "")) or environ.get(SERVER_KEY_ENV, "")
    except MissingSecret:
        return ""
