"""Four concurrent planted ``/search`` requests against a real ``credrank serve`` (issue 37, N1).

Indexes CrAM NQ (5,000 passages, hashing embedder) in a temporary folder, starts the server
with its defaults, and per mode (comma-separated argument, e.g. ``planted,grada``) sends four
requests at once with ``fetch_k`` 10,000 (the N1 request), then four at the largest fetch_k
the refusal names. Prints the statuses, the wall time and the server's resident memory
(``VmRSS``, peak ``VmHWM``, MB; Linux). A measurement on a shared machine, not a test.

    python bench/scripts/bench_planted_serve.py planted,grada,ragdefender,trustrag,outlier
"""

from __future__ import annotations

import concurrent.futures as cf
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from credrank.index.embed import get_embedder
from credrank.index.ingest import index_documents
from credrank.index.opener import open_store
from credrank.provenance import SourceTyper
from credrank_bench.scripting import CRAM_NQ, cram_nq_or_exit


def mem(pid: int) -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` of process ``pid``, in MB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS", "VmHWM")):
            key, value = line.split(":")
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


def main() -> None:
    modes = (sys.argv[1] if len(sys.argv) > 1 else "planted").split(",")
    evalset = cram_nq_or_exit(CRAM_NQ)
    emb = get_embedder("hashing")
    tmp = Path(tempfile.mkdtemp(prefix="credrank-planted-serve-"))
    with open_store(tmp / "idx", "edge", embedder=emb.name, dim=emb.dim, create=True) as store:
        index_documents(iter(evalset.documents), store, emb, SourceTyper([]), batch_size=1000)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "credrank.cli", "serve", "--index",
                             str(tmp / "idx"), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                if httpx.get(url + "/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        queries = [text for _q, text in evalset.queries[:4]]
        print("ready", mem(proc.pid))

        def send(spec: dict[str, Any], text: str) -> int:
            return httpx.post(url + "/search", json={"query": text, "pipeline": spec},
                              timeout=300).status_code

        for mode in modes:
            spec: dict[str, Any] = {"fetch_k": 10_000, "stages": [
                "prior", {"stage": "planted", "mode": mode}]}
            for largest in (False, True):
                if largest:
                    refused = httpx.post(url + "/search", json={"query": queries[0],
                                                                "pipeline": spec}, timeout=300)
                    spec = {**spec, "fetch_k": refused.json()["largest_pool"]}
                start = time.perf_counter()
                with cf.ThreadPoolExecutor(4) as pool:
                    statuses = list(pool.map(lambda t, s=spec: send(s, t), queries))
                wall = time.perf_counter() - start
                print(f"mode {mode:11} fetch_k {spec['fetch_k']:>6}: statuses {statuses} in "
                      f"{wall:.1f} s; server {mem(proc.pid)}", flush=True)
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
