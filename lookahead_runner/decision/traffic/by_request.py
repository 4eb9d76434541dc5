"""Resampling a request set by request (issue 36). Pure numpy.

A request set's rows are not independent draws: they are repeated answers to the same prompts (every user walks
the same set, rounds of the set, repeats of a K; near-identical at temperature 0). Resampling rows treats each
answer as new evidence, so answering the same requests again narrows the interval without measuring anything new.
Here the unit drawn is the request (`request_index`), with every answer it got: each request's rows are summed
first, and a resample draws n requests with replacement from the n a category answered. A ratio of two drawn
sums is then a ratio estimator over requests; answering every request twice doubles each request's sums and
leaves the draws, and so the interval, as they were.

A category is a stratum: its share of the set is fixed by the file, not drawn, so each category draws from its
own requests and the whole mix is the sum of its categories' draws. The same draws serve every K (`blocks`):
the set sends the same requests under every K, so a K and the baseline compare request for request (paired, as
the decision resamples both sides of a difference together).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

MAX_DRAWN = 1 << 20   # draws x requests held at once (8 MiB an array): 300k requests x 1000 resamples in ~6 s


def ok_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The successful answers."""
    if frame.empty or "ok" not in frame:
        return frame.iloc[0:0]
    return frame[pd.to_numeric(frame["ok"], errors="coerce") == 1]


def column(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name not in frame:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float)


def categories_of(frame: pd.DataFrame) -> pd.Series:
    """Each row's category ("" for none)."""
    return frame["category"].fillna("").astype(str) if "category" in frame else pd.Series("", index=frame.index)


def request_keys(frame: pd.DataFrame) -> np.ndarray:
    """The request each row answers (`request_index`); a row without one is a request of its own."""
    index = column(frame, "request_index")
    return np.where(np.isfinite(index), index, -1.0 - np.arange(len(frame)))


def per_request(keys: np.ndarray, values: np.ndarray, requests: np.ndarray) -> np.ndarray:
    """`values` (rows x columns) summed per request, in the order of `requests` (sorted keys; a request with no row
    here sums to 0)."""
    out = np.zeros((len(requests), values.shape[1]))
    if len(keys):
        np.add.at(out, np.searchsorted(requests, keys), values)
    return out


def resampled_sums(blocks: Sequence[np.ndarray], resamples: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Each block (requests x columns, the same requests in every block) summed over `resamples` draws of its
    requests with replacement, the same draws for every block: one resamples x columns array per block. The draws
    are made a few at a time, MAX_DRAWN requests together, so memory stays flat however large the set."""
    n = blocks[0].shape[0] if blocks else 0
    out = [np.zeros((resamples, block.shape[1])) for block in blocks]
    if not n:
        return out
    chunk = max(1, MAX_DRAWN // n)
    for start in range(0, resamples, chunk):
        count = min(chunk, resamples - start)
        picks = rng.integers(n, size=(count, n))
        picks += n * np.arange(count)[:, None]          # one bincount: how often each draw took each request
        weights = np.bincount(picks.ravel(), minlength=count * n).reshape(count, n)
        for sums, block in zip(out, blocks):
            sums[start:start + count] = weights @ block
    return out


def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """Elementwise, NaN where the denominator is 0 (a draw without such a request)."""
    with np.errstate(all="ignore"):
        return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1.0), np.nan)
