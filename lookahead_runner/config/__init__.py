"""The sweep's configuration: strict models, loaded from TOML with CLI overrides.

Every model forbids unknown keys, so a misspelled key is an error naming the field rather
than a silently ignored setting. `load_config` turns any problem into one `ConfigError`
line that names the field and says what to do. One module per section of the TOML:
`server.py` ([server], [speculation]), `load.py` ([load]), `decision.py` ([decision]),
`cluster.py` ([cluster]), `sweep.py` ([grid], [sweep] and the checks across sections), `loading.py` (TOML -> SweepConfig);
`resolved_server.py`: the server's secrets and the load's API key, resolved from the environment once.
"""
from .cluster import RAY_INSTALL, ClusterConfig
from .decision import DecisionConfig
from .load import AUTO_FIRST_REPEATS, LoadConfig, StageConfig
from .loading import check_environment, check_files, config_from_dict, error_line, load_config
from .resolved_server import ResolvedServer
from .server import SIM_COMMAND, ServerConfig, SpeculationConfig, runner_field_text
from .strict import ConfigError, Strict
from .sweep import GridConfig, StrategyConfig, SweepConfig

__all__ = ["AUTO_FIRST_REPEATS", "ClusterConfig", "RAY_INSTALL", "ConfigError", "DecisionConfig", "GridConfig", "LoadConfig", "ResolvedServer", "SIM_COMMAND",
           "ServerConfig", "SpeculationConfig", "StageConfig", "StrategyConfig", "Strict", "SweepConfig",
           "check_environment", "check_files", "config_from_dict", "error_line", "load_config",
           "runner_field_text"]
