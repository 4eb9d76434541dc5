"""Writes the report: the only part of the report package that touches the disk."""

from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from ..decision.schema import Decision
from ..runfolder.frontier import FrontierPoint
from ..runfolder.plan import RunRecord
from .view import build_view

__all__ = ["build_view", "render_html", "write_report"]

REPORT_FILE = "report.html"


@functools.lru_cache(maxsize=1)
def _environment() -> Environment:
    return Environment(loader=PackageLoader("lookahead_runner.report", "templates"),
                       autoescape=select_autoescape(default=True, default_for_string=True),
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


@functools.lru_cache(maxsize=1)
def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    # The bundle is inlined in a <script> element, where a literal "</script" would end it early.
    return get_plotlyjs().replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


def render_html(view: dict, path: Path) -> None:
    html = _environment().get_template("report.html.j2").render(view=view, plotly_js=_plotly_js())
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(html, encoding="utf-8")
    partial.replace(path)


def write_report(run_dir: Path, summary: pd.DataFrame, decision: Decision, run: RunRecord,
                 timelines: dict[str, dict[str, pd.DataFrame]], frontier: list[FrontierPoint] | None = None) -> Path:
    run_dir = Path(run_dir)
    view = build_view(summary, decision, run, timelines, frontier)
    # Link only what is there: a life that never started has no folder, an early failure few files.
    for life in view["lives"]:
        folder = run_dir / life["dir"] if life["dir"] else None
        if folder is None or not folder.is_dir():
            life["files"], life["dir_href"] = [], ""
        else:
            life["files"] = [f for f in life["files"] if (folder / f["name"]).exists()]
    view["run_files"] = [f for f in view["run_files"] if (run_dir / f["name"]).exists()]
    path = run_dir / REPORT_FILE
    render_html(view, path)
    return path
