"""How the decision writes numbers in its sentences: one format per kind of figure (and the sweep's stop in words)."""
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


def stop_text(leader: int, share_won: float, look, tie: bool, tie_tolerance: float) -> str:
    """Why a decided sweep stops, naming its look (gates/looks.py `Look`; None: the fixed early-stop bar): "decided
    at look 5 of at most 8: boundary 96.9 %: K=4 wins in 98% of the resamples", or a tie told by equivalence."""
    if tie and look is not None:
        return (f"tie at look {look.number} of at most {look.at_most}: every other K's gain over K={leader} inside "
                f"the ±{pct(tie_tolerance)} tie band at {look.bar * 100:.1f} % (equivalence): keep the smallest K, "
                f"K={leader}")
    at = f" at {look.text()}" if look is not None else ""
    return f"decided{at}: K={leader} wins in {share_won:.0%} of the resamples"
