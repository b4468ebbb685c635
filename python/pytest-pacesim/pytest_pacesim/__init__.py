"""pytest-pacesim: the `pacesim` fixture (see README.md).

`pacesim.live(scenario, worker_cmd=None, *args)` runs `pacesim live SCENARIO --json` (with
`--worker-cmd` when given) and returns a `Run`; `pacesim.conform(...)` the same for `pacesim
conform`. A `Run` holds the verdicts, the witnesses and the reproduce command; `assert_ok()`
fails the test with every failed check's witness. A run that could not be made (exit 2: a
worker that never got ready, a missing server) fails the test with pacesim's message.
"""

import json
import os
import shlex
import subprocess

import pytest

__all__ = ["Pacesim", "Run"]


class Run:
    """One pacesim run: its exit status, JSON summary, verdicts and witnesses."""

    def __init__(self, command, args, proc):
        self.command = command
        self.args = args
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.reproduce = " ".join(shlex.quote(a) for a in args if a != "--json")
        self.summary = None
        self.verdicts = {}
        self.witnesses = {}
        if proc.returncode == 2 or not proc.stdout.strip():
            return
        self.summary = json.loads(proc.stdout.strip().splitlines()[-1])
        checks = self.summary.get("checks")
        if checks is None and "live" in self.summary:  # conform: the live side's checks
            checks = self.summary["live"].get("checks", {})
        for name, c in (checks or {}).items():
            self.verdicts[name] = c.get("verdict")
            self.witnesses[name] = c.get("detail", "")

    @property
    def failed(self):
        """The checks that failed, by name."""
        return [n for n, v in self.verdicts.items() if v == "fail"]

    @property
    def ok(self):
        """pacesim exited 0: every judged check held (and, for conform, live and model agree)."""
        return self.returncode == 0

    def report(self):
        """What went wrong, for a test failure: each failed check and its witness."""
        lines = ["pacesim %s: exit %d" % (self.command, self.returncode)]
        if self.returncode == 2 or self.summary is None:
            lines.append(self.stderr.strip())
        for name in self.failed:
            lines.append("  %s FAILED: %s" % (name, self.witnesses[name]))
        if self.command == "conform":
            lines += ["  " + l for l in self.stderr.splitlines() if l.startswith("conform:")]
        lines.append("reproduce: " + self.reproduce)
        return "\n".join(lines)

    def assert_ok(self):
        """Fail the test (pytest.fail) unless pacesim exited 0, with the witnesses."""
        if not self.ok:
            pytest.fail(self.report(), pytrace=False)
        return self


class Pacesim:
    """The fixture's value: runs pacesim in the test's working directory."""

    def __init__(self, exe=None, timeout=None):
        self.exe = exe or os.environ.get("PACESIM", "pacesim")
        self.timeout = timeout

    def _run(self, command, scenario, worker_cmd, extra):
        args = [self.exe, command, str(scenario)]
        if worker_cmd is not None:
            args += ["--worker-cmd", worker_cmd]
        args += [str(a) for a in extra] + ["--json"]
        try:
            proc = subprocess.run(args, capture_output=True, text=True, timeout=self.timeout)
        except FileNotFoundError:
            pytest.fail("pacesim is not on PATH (pip install pacesim; or set PACESIM)", pytrace=False)
        return Run(command, args, proc)

    def live(self, scenario, worker_cmd=None, *extra):
        """`pacesim live SCENARIO [--worker-cmd CMD] EXTRA... --json`."""
        return self._run("live", scenario, worker_cmd, extra)

    def conform(self, scenario, worker_cmd=None, *extra):
        """`pacesim conform SCENARIO [--worker-cmd CMD] EXTRA... --json`."""
        return self._run("conform", scenario, worker_cmd, extra)


@pytest.fixture
def pacesim():
    """Run pacesim live or conform on a scenario; see `Pacesim` and `Run`."""
    return Pacesim()
