"""The reservation made inside the caller's transaction (the record's "correctness bug").

The same atomic UPDATE as pace_row.py, but run inside the caller's open transaction (as in a
Django atomic() block): the row lock is held until the caller commits, after its sleep and
its fetch, so every other process waits behind it and the fleet fetches one at a time.
"""

import time

import psycopg

from pacesim_worker import PG_URL, RATE, fetch, jobs

INTERVAL = 1.0 / RATE
RESERVE = """
UPDATE pace
   SET next_allowed_at = GREATEST(clock_timestamp(), next_allowed_at)
                       + (%(interval)s * backoff_multiplier) * interval '1 second'
 WHERE destination = 'dest'
RETURNING extract(epoch FROM next_allowed_at - clock_timestamp())
          - %(interval)s * backoff_multiplier"""

conn = psycopg.connect(PG_URL, connect_timeout=2)  # not autocommit: the caller's transaction

for _ in jobs():
    with conn.transaction():  # the caller's atomic() block
        (wait,) = conn.execute(RESERVE, {"interval": INTERVAL}).fetchone()
        time.sleep(max(0.0, float(wait)))
        fetch()  # still inside the transaction: the row stays locked until commit
