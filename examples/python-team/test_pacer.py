"""The team's pacer under pacesim, as a pytest test (the pytest-pacesim plugin's `pacesim`
fixture). A failing check fails the test with its witness and the command that reproduces
the run; `pytest --junitxml` gives the JUnit. PACESIM_WORKER runs another worker command
(default: the scenario's `[live] command`)."""

import os

WORKER = os.environ.get("PACESIM_WORKER")


def test_the_pacer_holds_live(pacesim):
    run = pacesim.live("pacesim.toml", WORKER, "--junit", "reports/live.xml", "--trace", "reports/live.jsonl")
    run.assert_ok()
    assert run.verdicts["ceiling"] == "pass"


def test_live_matches_the_model(pacesim):
    pacesim.conform("pacesim.toml", WORKER, "--tolerance", "0.1", "--junit", "reports/conform.xml").assert_ok()
