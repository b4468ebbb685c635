"""The team's migration: the tables its pacer needs (a stand-in for `python manage.py migrate`).

pacesim runs it once per run, before any worker starts (`[live] setup` in pacesim.toml), with
the run's own PostgreSQL schema first on the search_path (PGOPTIONS, PACESIM_PG_URL): the
tables land in that schema, and go when the run drops it.
"""

import os

import psycopg

with psycopg.connect(os.environ["PACESIM_PG_URL"], autocommit=True) as conn:
    conn.execute(
        """CREATE TABLE pacer_slot (
               destination text PRIMARY KEY,
               next_allowed_at timestamptz NOT NULL DEFAULT clock_timestamp())"""
    )
    conn.execute("INSERT INTO pacer_slot (destination) VALUES ('api')")
    print(f"migrated schema {os.environ['PACESIM_PG_SCHEMA']}")
