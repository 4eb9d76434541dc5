"""mkdocs hook (mkdocs.yml `hooks`): the configuration reference is written from the models before every build,
so the site never shows a stale page (lookahead_runner/config/reference.py)."""
from lookahead_runner.config.reference import write_reference


def on_pre_build(config, **_kwargs) -> None:
    write_reference(config["docs_dir"])
