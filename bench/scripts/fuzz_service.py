"""Schema fuzzing of ``credrank serve`` with schemathesis, counted for a table row.

:func:`run` builds the demo index (hashing embedder: no model), starts a real server on it
(writes enabled with a key, a feedback store, the demo domain table), runs schemathesis
against its ``/openapi.json`` with the checks ``not_a_server_error`` (no 5xx answer, whatever
the input) and ``response_schema_conformance`` (every answer matches the schema the OpenAPI
document declares for its status), ``--max-examples BUDGET`` per operation and a fixed seed,
and returns the counts: operations tested, inputs tried, failures by check, errors, and the
server's log lines that report a 5xx or an error. :func:`main` prints them as one Markdown
table row (with ``--header``, the header first) for another script to collect.

    .venv/bin/python bench/scripts/fuzz_service.py [--budget 100] [--seed 1] [--header] [--json]

This is a measurement, not a test (tests/test_serve_fuzz.py is the test, with a small
budget): the numbers are counts of inputs, not timings.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from credrank.demo_corpus import build_demo_index, demo_dir

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
CHECKS = ("not_a_server_error", "response_schema_conformance")
KEY = "fuzz-service-key"
COLUMNS = ("seed", "budget", "operations", "inputs", "failures", "by check", "errors",
           "server 5xx lines", "seconds")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(index: Path, priors: Path, log: Any, deadline_s: float = 300
           ) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "credrank.cli", "serve", "--index", str(index), "--port",
         str(port), "--table", str(demo_dir() / "domains.csv"), "--api-key-env",
         "FUZZ_SERVICE_KEY", "--priors-store", str(priors)],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env={**os.environ, "FUZZ_SERVICE_KEY": KEY})
    end = time.monotonic() + deadline_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"credrank serve exited with {proc.returncode} before it was "
                               "ready")
        try:
            if httpx.get(url + "/readyz", timeout=5).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if time.monotonic() > end:
            proc.kill()
            raise RuntimeError(f"credrank serve not ready after {deadline_s} s")
        try:
            proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass


def _stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(timeout=60)


def server_errors(lines: list[str]) -> list[str]:
    """The log lines of answers with a 5xx status or at level ``error``."""
    out = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        status = record.get("status")
        if (isinstance(status, int) and status >= 500) or record.get("level") == "error":
            out.append(line)
    return out


def run(budget: int, seed: int) -> dict[str, Any]:
    """Fuzz a fresh demo server with ``budget`` examples per operation and ``seed``; the
    counts (see the module docstring). ``passed`` is true when schemathesis found nothing
    and the server logged no 5xx."""
    if not SCHEMATHESIS.exists():
        raise RuntimeError(f"{SCHEMATHESIS}: schemathesis is not installed (the dev extra)")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="credrank-fuzz-") as tmp:
        where = Path(tmp)
        build_demo_index(where / "index", "hashing")
        log_path = where / "server.log"
        with log_path.open("wb") as log:
            proc, url = _start(where / "index", where / "priors", log)
            try:
                fuzz = subprocess.run(
                    [str(SCHEMATHESIS), "run", url + "/openapi.json", "--checks",
                     ",".join(CHECKS), "--max-examples", str(budget), "--seed", str(seed),
                     "--header", f"X-API-Key: {KEY}", "--workers", "1", "--no-color",
                     "--report", "json", "--report-json-path", str(where / "report.json")],
                    capture_output=True, text=True, cwd=where, timeout=3600)
            finally:
                code = _stop(proc)
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        report_path = where / "report.json"
        if not report_path.exists():
            raise RuntimeError("schemathesis wrote no report:\n" + fuzz.stdout[-3000:]
                               + fuzz.stderr[-2000:])
        report = json.loads(report_path.read_text())
    by_check: dict[str, int] = {}
    for group in report.get("failures", []):
        name = str(group.get("type") or group.get("title"))
        by_check[name] = by_check.get(name, 0) + int(group.get("count", 1))
    errors = server_errors(lines)
    result = {
        "seed": seed, "budget": budget, "checks": list(CHECKS),
        "operations": int(report["operations"]["tested"]),
        "inputs": int(report["test_cases"]["generated"]),
        "failures": sum(by_check.values()), "failures_by_check": by_check,
        "errors": sum(int(e.get("count", 1)) for e in report.get("errors", [])),
        "server_5xx_lines": len(errors), "server_5xx_examples": errors[:5],
        "schemathesis_exit": fuzz.returncode, "server_exit": code,
        "seconds": round(time.perf_counter() - start, 1),
    }
    result["passed"] = (fuzz.returncode == 0 and not by_check and not result["errors"]
                        and not errors)
    return result


def row(result: dict[str, Any]) -> str:
    """``result`` as one Markdown table row (columns :data:`COLUMNS`)."""
    checks = ", ".join(f"{k}: {v}" for k, v in sorted(result["failures_by_check"].items()))
    cells = [result["seed"], result["budget"], result["operations"], result["inputs"],
             result["failures"], checks or "–", result["errors"], result["server_5xx_lines"],
             result["seconds"]]
    return "| " + " | ".join(str(c) for c in cells) + " |"


def header() -> str:
    return ("| " + " | ".join(COLUMNS) + " |\n|" + "|".join("---" for _ in COLUMNS) + "|")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=100, help="examples per operation")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--header", action="store_true", help="print the table header first")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args(argv)
    result = run(args.budget, args.seed)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        if args.header:
            print(header())
        print(row(result))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
