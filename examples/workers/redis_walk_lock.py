"""The per-platform Redis walk lock (the platform-lock record).

A walk takes fc:download_lock:<platform> with SET NX PX ttl, makes its fetches, and releases
it with a compare-and-delete. On contention it waits a short countdown and tries again; past
max_wait it runs uncapped (the safety valve). A SIGKILLed holder never releases: its lock
lasts until the TTL expires.
"""

import os
import time

import redis

from pacesim_worker import PACER, RATE, REDIS_PREFIX, REDIS_URL, event, fetch, jobs, now_ns

KEY = f"{REDIS_PREFIX}fc:download_lock:patreon"  # keys must start with the run's prefix
TTL_MS = PACER["ttl_ns"] // 1_000_000
POLL = PACER["poll_ns"] / 1e9
MAX_WAIT = PACER["max_wait_ns"] / 1e9
WALK = PACER["walk"]
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"

r = redis.Redis.from_url(REDIS_URL, socket_timeout=2)
token = os.urandom(8).hex()


def walk():
    for _ in range(WALK):
        fetch()
        time.sleep(1.0 / RATE)  # the walk paces its own requests


def take():
    """Take the lock: True, or False once max_wait has passed (the safety valve)."""
    waited = 0.0
    while not r.set(KEY, token, nx=True, px=TTL_MS):
        if waited >= MAX_WAIT:
            return False
        time.sleep(POLL)  # the short countdown before the job tries again
        waited += POLL
    return True


for _ in jobs():
    try:
        locked = take()
    except redis.RedisError:  # a broker hiccup degrades to uncapped
        event("uncapped", reason="broker_error")
        walk()
        continue
    if not locked:
        event("uncapped", reason="safety_valve")
        walk()
        continue
    event("lock_acquired", lock=0)
    event("point", name="holding_lock")  # lets pacesim kill it here (kill_points)
    walk()
    released = now_ns()  # the section ends before the key goes: stamp it before the DEL
    r.eval(RELEASE, 1, KEY, token)
    event("lock_released", t=released, lock=0, reason="release")
    time.sleep(POLL)  # the next job comes from the queue: waiting workers get their turn
