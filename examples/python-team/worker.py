"""The team's worker: one global slot row per destination, advanced atomically on the
database's clock; each process sleeps to its slot, then fetches.

pacesim starts N copies with the PACESIM_* environment (docs/live.md, "Your own worker
program"): PACESIM_PG_URL puts the run's schema, where migrate.py made `pacer_slot`, first on
the search_path. The one thing pacesim needs from a worker is that it GETs
PACESIM_DESTINATION_URL; the event lines on stdout are optional and unlock more checks.
"""

import json
import os
import time
import urllib.request

import psycopg

RATE = float(os.environ["PACESIM_RATE"])
URL = os.environ["PACESIM_DESTINATION_URL"]
REQUESTS = os.environ.get("PACESIM_REQUESTS")  # absent: until pacesim stops the run
ORIGIN = int(os.environ["PACESIM_CLOCK_ORIGIN_NS"])
RESERVE = """
UPDATE pacer_slot
   SET next_allowed_at = GREATEST(clock_timestamp(), next_allowed_at) + %s * interval '1 second'
 WHERE destination = 'api'
RETURNING extract(epoch FROM next_allowed_at - clock_timestamp()) - %s"""


def event(ev, **fields):
    t = time.clock_gettime_ns(time.CLOCK_MONOTONIC) - ORIGIN
    print(json.dumps({"ev": ev, "t": t, **fields}), flush=True)


conn = psycopg.connect(os.environ["PACESIM_PG_URL"], autocommit=True)
done = 0
while REQUESTS is None or done < int(REQUESTS):
    event("op_sent", op="reserve")
    (wait,) = conn.execute(RESERVE, (1.0 / RATE, 1.0 / RATE)).fetchone()
    wait = max(0.0, float(wait))
    event("reply", op="reserve", wait=round(wait * 1e9))
    time.sleep(wait)
    with urllib.request.urlopen(URL, timeout=30) as response:
        response.read()
    done += 1
