"""A defective pacer, for trying the template: each process paces itself at the whole rate
(the per-process pacer the design records reject), so N processes fetch at N times the
ceiling. `PACESIM_WORKER='python defective_worker.py' pytest test_pacer.py` must fail, the
ceiling's witness in pytest's output."""

import json
import os
import time
import urllib.request

RATE = float(os.environ["PACESIM_RATE"])
URL = os.environ["PACESIM_DESTINATION_URL"]
REQUESTS = os.environ.get("PACESIM_REQUESTS")
ORIGIN = int(os.environ["PACESIM_CLOCK_ORIGIN_NS"])


def event(ev, **fields):
    t = time.clock_gettime_ns(time.CLOCK_MONOTONIC) - ORIGIN
    print(json.dumps({"ev": ev, "t": t, **fields}), flush=True)


done = 0
next_at = time.monotonic()
while REQUESTS is None or done < int(REQUESTS):
    event("op_sent", op="reserve")
    wait = max(0.0, next_at - time.monotonic())
    next_at = max(next_at, time.monotonic()) + 1.0 / RATE
    event("reply", op="reserve", wait=round(wait * 1e9))
    time.sleep(wait)
    with urllib.request.urlopen(URL, timeout=30) as response:
        response.read()
    done += 1
