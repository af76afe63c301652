"""The suite's own guards can fail: a run that restarts the PostgreSQL server it was
given is reported as failed (issue 10: "A test suite must never stop, restart or
reconfigure a server it did not start")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO
from .pg_cluster import ThrowawayCluster

INNER = """
import json, os, subprocess

def test_inner():
    command = json.loads(os.environ["INNER_RESTART"])
    if command:
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=120)
"""


def _inner_run(tmp_path: Path, cluster: ThrowawayCluster, restart: bool) -> tuple[int, str]:
    test = tmp_path / "test_inner.py"
    test.write_text(INNER)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["ADK_SQLSTORE_TEST_POSTGRES_URL"] = cluster.url()
    env["INNER_RESTART"] = json.dumps(cluster.restart_command() if restart else [])
    pytest_args = ["-p", "tests.conftest", "-p", "no:cacheprovider", "-q"]
    pytest_args += ["--rootdir", str(tmp_path), "-c", str(REPO / "pyproject.toml"), str(test)]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *pytest_args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.returncode, " ".join((done.stdout + done.stderr).split())


@pytest.mark.postgres
@pytest.mark.soak
def test_a_run_that_restarts_its_server_fails(
    tmp_path: Path, throwaway_cluster: ThrowawayCluster
) -> None:
    code, output = _inner_run(tmp_path, throwaway_cluster, restart=False)
    assert code == 0, output
    assert "was left alone: pg_postmaster_start_time()" in output
    code, output = _inner_run(tmp_path, throwaway_cluster, restart=True)
    assert code != 0, output
    assert "1 passed" in output  # the test itself passed; the guard failed the run
    assert "was restarted or stopped during the run" in output, output
