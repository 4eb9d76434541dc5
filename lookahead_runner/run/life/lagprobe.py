"""How late a process on given CPUs wakes up: the pre-flight's idle measurement.

    python -m lookahead_runner.run.life.lagprobe [--seconds 1] [--interval-ms 10]

Sleeps `interval` over and over and prints one JSON line: the p50 / p99 / max oversleep in ms (the
same quantity as Locust's loop lag, workload/lag.py) and the CPU it used. Run with the load's CPU
affinity while the server is idle, a high figure means other processes on the host hold those CPUs.
Stdlib only, so it starts in a few tens of ms.
"""
from __future__ import annotations

import argparse
import json
import time


def measure(seconds: float, interval_s: float) -> dict:
    lags: list[float] = []
    cpu0, end = time.process_time(), time.perf_counter() + seconds
    while (before := time.perf_counter()) < end:
        time.sleep(interval_s)
        lags.append(max(time.perf_counter() - before - interval_s, 0.0) * 1000.0)
    lags.sort()

    def pct(q: float) -> float:
        return round(lags[min(len(lags) - 1, int(q * (len(lags) - 1) + 0.5))], 3) if lags else 0.0

    return {"samples": len(lags), "lag_p50_ms": pct(0.5), "lag_p99_ms": pct(0.99), "lag_max_ms": pct(1.0),
            "cpu_pct": round(100.0 * (time.process_time() - cpu0) / seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--interval-ms", type=float, default=10.0)
    args = parser.parse_args()
    print(json.dumps(measure(args.seconds, args.interval_ms / 1000.0)), flush=True)


if __name__ == "__main__":
    main()
