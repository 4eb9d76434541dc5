"""Which life a free slot runs next, so that K and GPU are not confounded (pure: slots.py runs it).

Lives are handed out in rounds: every setting's first life, then every setting's second, and so on, the
settings of each round in an order shuffled with the decision's seed (recorded in plan.json's "cluster"), then
the longest groups of the round first (a same-server life hosting more repeats, a resumed run's whole settings
before its leftovers), so that the last lives to start are the short ones and the last round is full.
A free slot takes the first life in that order whose setting it has not run yet, so the repeats of a K
land on different GPUs wherever there are enough slots; only when it has run every setting left does it
take the first. A GPU thus varies like a restart, inside each K's repeat spread, and never with K.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

Group = TypeVar("Group")


def handout_order(groups: Sequence[Group], setting_of, seed: int, size_of=lambda group: 1) -> list[Group]:
    """`groups` (server lives, in the plan's order) in rounds, each round's settings shuffled with `seed`, then
    ordered longest first (`size_of`: the lives a group hosts)."""
    rounds: list[list[Group]] = []
    seen: dict[object, int] = {}
    for group in groups:
        n = seen.get(setting_of(group), 0)
        seen[setting_of(group)] = n + 1
        if n == len(rounds):
            rounds.append([])
        rounds[n].append(group)
    shuffle = random.Random(seed)
    order: list[Group] = []
    for each in rounds:
        each = list(each)
        shuffle.shuffle(each)
        order += sorted(each, key=size_of, reverse=True)  # stable: the shuffle orders groups of one size
    return order


def next_for(queue: Sequence[Group], setting_of, ran: set) -> int:
    """Index in `queue` of the life a slot that has run the settings `ran` takes next (the queue is not empty)."""
    return next((i for i, group in enumerate(queue) if setting_of(group) not in ran), 0)
