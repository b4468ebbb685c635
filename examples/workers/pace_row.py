"""The design record's global pace row (#648), with #649's divided fallback.

One row per destination, advanced by one atomic statement on the database's clock; the
caller sleeps to its slot *relative* to that clock (no host clock involved), holding no lock
and no transaction (autocommit). If the row is unreachable, each process paces itself at
rate / (cap + 1), so N processes still stay within the ceiling.
"""

import sys
import time

import psycopg

from pacesim_worker import PG_URL, PROCESSES, RATE, PACER, event, fetch, jobs

INTERVAL = 1.0 / RATE
CAP = PACER.get("cap", PROCESSES - 1)  # the dispatch cap: at most CAP + 1 processes fetch
RESERVE = """
UPDATE pace
   SET next_allowed_at = GREATEST(clock_timestamp(), next_allowed_at)
                       + (%(interval)s * backoff_multiplier) * interval '1 second'
 WHERE destination = 'dest'
RETURNING (extract(epoch FROM next_allowed_at) * 1e6)::int8 - (%(interval)s * backoff_multiplier * 1e6)::int8,
          (extract(epoch FROM clock_timestamp()) * 1e6)::int8,
          backoff_multiplier"""

conn = None
local_next = 0.0  # the fallback pacer's next slot (this process's monotonic clock)
in_fallback = False


def reserve():
    """Reserve the next global slot; how long to sleep until it (seconds)."""
    global conn
    if conn is None:
        conn = psycopg.connect(PG_URL, autocommit=True, connect_timeout=2)
    event("op_sent", op="reserve")
    slot_us, now_us, multiplier = conn.execute(RESERVE, {"interval": INTERVAL}).fetchone()
    wait = max(0.0, (slot_us - now_us) / 1e6)  # relative to the store's clock
    event("grant", slot=slot_us * 1000, now=now_us * 1000,
          interval=round(INTERVAL * multiplier * 1e9), multiplier=multiplier)
    event("reply", op="reserve", wait=round(wait * 1e9))
    return wait


def fallback_wait():
    """The store is down: pace this process alone at rate / (cap + 1)."""
    global local_next
    now = time.monotonic()
    local_next = max(local_next, now) + INTERVAL * (CAP + 1)
    return local_next - now


for _ in jobs():
    try:
        wait = reserve()
        if in_fallback:
            in_fallback = False
            event("fallback", enter=False, mode="divided")
    except psycopg.Error as e:
        conn = None
        event("store_error", error="refused")
        if not in_fallback:
            in_fallback = True
            local_next = time.monotonic()
            event("fallback", enter=True, mode="divided")
            print(f"pace row unreachable, pacing locally: {e}", file=sys.stderr)
        wait = fallback_wait()
    time.sleep(wait)
    fetch()
