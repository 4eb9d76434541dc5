"""How the decision writes numbers in its sentences: one format per kind of figure."""
from __future__ import annotations

import math


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def pct(value: float | None, signed: bool = False, digits: int = 0) -> str:
    """0.123 -> "12%" (signed: "+12%"); None/NaN -> "?", infinite -> "unbounded"."""
    if _missing(value):
        return "?"
    if math.isinf(value):
        return "unbounded"
    return f"{value:+.{digits}%}" if signed else f"{value:.{digits}%}"


def pp(value: float | None) -> str:
    """A difference of two rates in percentage points: 0.012 -> "+1.2 pp"."""
    return "?" if _missing(value) else f"{value * 100:+.1f} pp"


def ms(value: float | None, signed: bool = False) -> str:
    if _missing(value):
        return "unbounded"
    return f"{value:+.0f}" if signed else f"{value:.0f}"


def rate(value: float | None) -> str:
    return "?" if _missing(value) else f"{value:.2f}"


def share(value: float | None) -> str:
    """A resampling share, rounded down so 99.7 % never reads as 100 %."""
    return "?" if _missing(value) else f"{math.floor(value * 100 + 1e-9):.0f}%"
