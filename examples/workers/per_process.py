"""The pre-#648 defect: a pacer local to each process.

Each process sleeps to its own next_allowed, so N processes give N x the rate: exactly the
_DestinationLimiter the design record replaced (a threading.Lock and a process-local slot).
"""

import threading
import time

from pacesim_worker import RATE, fetch, jobs

INTERVAL = 1.0 / RATE


class DestinationLimiter:
    def __init__(self):
        self._lock = threading.Lock()
        self._next_allowed = 0.0

    def acquire(self):
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next_allowed)
            self._next_allowed = slot + INTERVAL
        time.sleep(slot - now)


limiter = DestinationLimiter()
for _ in jobs():
    limiter.acquire()
    fetch()
