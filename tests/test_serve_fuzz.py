"""Schema fuzzing of ``credrank serve`` with schemathesis: no request the OpenAPI schema
describes (valid or not) may get a 5xx answer, and every answer must match the schema the
OpenAPI document declares for its status (``response_schema_conformance``). Larger budgets:
``bench/scripts/fuzz_service.py``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from serving import running_server
from sparse_copy import copy_index

DEMO = Path(__file__).resolve().parents[1] / "src" / "credrank" / "data" / "demo"
SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"


@pytest.mark.slow
@pytest.mark.skipif(not SCHEMATHESIS.exists(), reason="schemathesis is not installed (dev extra)")
def test_schemathesis_finds_no_server_error_nor_schema_mismatch(demo_index_hashing: Path,
                                                                 tmp_path: Path) -> None:
    where = tmp_path / "index"
    copy_index(demo_index_hashing, where)
    with running_server(where, "--table", str(DEMO / "domains.csv"), "--api-key-env",
                        "FUZZ_KEY", "--priors-store", str(tmp_path / "priors"),
                        env={"FUZZ_KEY": "fuzz"}) as server:
        run = subprocess.run(
            [str(SCHEMATHESIS), "run", server.url + "/openapi.json",
             "--checks", "not_a_server_error,response_schema_conformance",
             "--max-examples", "30", "--seed", "1",
             "--header", "X-API-Key: fuzz", "--workers", "1", "--no-color"],
            capture_output=True, text=True, timeout=600, cwd=tmp_path)
        errors = [record for record in server.log_records()
                  if (isinstance(record.get("status"), int) and record["status"] >= 500)
                  or record.get("level") == "error"]
    summary = run.stdout[run.stdout.find("SUMMARY"):]
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-2000:]
    assert "Operations:" in run.stdout and "passed" in summary, summary
    assert not errors, "\n".join(json.dumps(record) for record in errors[:20])
