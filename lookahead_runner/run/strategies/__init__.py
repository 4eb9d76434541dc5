"""Which lives a sweep runs and when it stops: the adaptive and capacity strategies' loops (adaptive_sweep.py,
capacity_sweep.py) on a pool of slots (life_pool.py), the grid's early stop (early_stop.py), the stop at a first
life that cannot start (start_failure.py), the confirmation life (confirm_life.py) and the ramp command's config
(ramp.py). Built on the life/ and verdict/ rooms, below cluster/."""
