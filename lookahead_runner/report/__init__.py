"""The HTML report: build_view (pure view-model) and render_html / write_report (the file)."""

from .render import build_view, render_html, write_report

__all__ = ["build_view", "render_html", "write_report"]
