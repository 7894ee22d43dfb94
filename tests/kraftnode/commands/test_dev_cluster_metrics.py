"""``kraftnode dev-cluster`` sets kraftnode.metrics.listener on every node and prints the
URLs; each URL answers with the node's Prometheus metrics and every node agrees on the
leader."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest


@pytest.mark.timeout(90)
def test_dev_cluster_prints_metrics_urls_that_answer(tmp_path: Path) -> None:
    p = subprocess.Popen([sys.executable, "-m", "kraftnode", "dev-cluster", "--nodes", "3",
                          "--dir", str(tmp_path / "dev"), "--for-seconds", "40"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert p.stdout is not None
        out: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            out.append(line)
            if line.startswith("running;"):
                break
        text = "".join(out)
        urls = re.findall(r"http://127\.0\.0\.1:\d+/metrics", text)
        assert len(urls) == 3, text
        leaders = set()
        for url in urls:
            deadline = time.monotonic() + 20
            while True:
                with urllib.request.urlopen(url, timeout=5) as r:
                    body = r.read().decode()
                m = re.search(r"^kafka_server_raft_metrics_current_leader (\S+)$", body, re.M)
                assert m, body[:2000]
                if float(m.group(1)) >= 0 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            leaders.add(float(m.group(1)))
            with urllib.request.urlopen(url.replace("/metrics", "/healthz"), timeout=5) as r:
                assert r.status == 200
        assert len(leaders) == 1 and leaders.pop() in (1.0, 2.0, 3.0)
    finally:
        if p.poll() is None:
            p.terminate()
        p.wait(30)
