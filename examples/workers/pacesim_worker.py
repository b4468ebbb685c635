"""The pacesim worker contract in a few lines: who am I, fetch, report.

Copy this file beside your worker. pacesim starts N copies of your program with the
PACESIM_* environment variables below; the only thing it needs from a worker is that it
fetches PACESIM_DESTINATION_URL. event() prints the optional event lines (stdout is reserved
for them: log to stderr).
"""

import http.client
import json
import os
import time
import urllib.parse

PROCESS = int(os.environ["PACESIM_PROCESS"])  # 0 .. PROCESSES-1
PROCESSES = int(os.environ["PACESIM_PROCESSES"])
RATE = float(os.environ["PACESIM_RATE"])  # the global ceiling, per second
PACER = json.loads(os.environ["PACESIM_PACER"])["options"]  # the scenario's [pacer] options
PG_URL = os.environ.get("PACESIM_PG_URL")  # the run's schema is first on its search_path
REDIS_URL = os.environ.get("PACESIM_REDIS_URL")
REDIS_PREFIX = os.environ.get("PACESIM_REDIS_PREFIX", "")  # every key must start with it
_REQUESTS = os.environ.get("PACESIM_REQUESTS")  # left for this process; absent: until stopped
_ORIGIN = int(os.environ["PACESIM_CLOCK_ORIGIN_NS"])  # CLOCK_MONOTONIC at the run's time 0
_URL = urllib.parse.urlsplit(os.environ["PACESIM_DESTINATION_URL"])
_conn = None


def now_ns():
    """The run's clock: ns since its time 0 (the harness stamps arrivals on the same clock)."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) - _ORIGIN


def event(ev, **fields):
    """Print one event line, e.g. event("lock_acquired", lock=0); stamped now unless t= is given."""
    print(json.dumps({"ev": ev, "t": now_ns(), **fields}), flush=True)


def fetch():
    """GET the destination (a keep-alive connection); its status: 200, 429 or 503."""
    global _conn
    for attempt in (1, 2):
        try:
            if _conn is None:
                _conn = http.client.HTTPConnection(_URL.hostname, _URL.port, timeout=30)
            _conn.request("GET", f"{_URL.path}?{_URL.query}")
            response = _conn.getresponse()
            response.read()
            return response.status
        except (OSError, http.client.HTTPException):
            _conn = None
            if attempt == 2:
                raise


def jobs():
    """One iteration per request this process makes: PACESIM_REQUESTS, or until stopped."""
    n = 0
    while _REQUESTS is None or n < int(_REQUESTS):
        yield n
        n += 1


def ready():
    """Optional: say this process has started up (imports done, connected). The scenario's
    clock (its faults, its duration) starts when every worker is ready: at this line, or at
    its first event line or fetch if it prints none."""
    print(json.dumps({"ev": "ready"}), flush=True)
