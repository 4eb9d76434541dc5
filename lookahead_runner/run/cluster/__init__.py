"""cluster.engine = "ray": how Ray places the lives. Ray started or joined and the slots counted per node
(start.py), the slots and the grid on them (slots.py), which life a free slot takes (queue.py), lives on the slots
(pool.py), a life on a worker node (worker_life.py), its files back (files.py), the nodes compared (nodes.py).
Built on the life/, verdict/ and strategies/ rooms; only the sweep's driver (run/runner.py) imports it."""
