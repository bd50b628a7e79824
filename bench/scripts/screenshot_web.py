"""Screenshot of the ``credrank serve`` web page (``docs/web.png``, shown in the README).

Builds the packaged demo corpus index with MiniLM in a temporary folder (or uses ``--index``),
starts the real server (``python -m credrank.cli serve``) on a free loopback port, waits for
``/readyz``, then drives Debian's chromium with Playwright for Python (``executable_path``; no
browser download), as ``tests/test_browser.py`` does: types the query, presses Enter, waits for
both columns and saves a full-page screenshot. The same inputs give the same picture.

    python bench/scripts/screenshot_web.py [--out docs/web.png] [--query-id q09] \\
        [--priors current] [--select topk|mmr|exposure] [--top-k 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from credrank.demo_corpus import build_demo_index, demo_dir

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def demo_query(query_id: str) -> str:
    for line in (demo_dir() / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip() and json.loads(line)["id"] == query_id:
            return str(json.loads(line)["text"])
    raise SystemExit(f"--query-id: no demo query {query_id!r}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], deadline_s: float = 180) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"credrank serve exited with {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    raise SystemExit(f"credrank serve not ready after {deadline_s} s")


def shoot(url: str, out: Path, query: str, args: argparse.Namespace) -> str:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": args.width, "height": args.height},
                                    device_scale_factor=1)
            page.goto(url + "/")
            page.locator("#preset").select_option(args.priors)
            page.locator("#selection").select_option(args.select)
            page.locator("#top-k").fill(str(args.top_k))
            page.locator("#query").fill(query)
            page.locator("#query").press("Enter")
            status = page.locator("#status")
            expect(status).to_have_attribute("data-state", "ok", timeout=120_000)
            page.locator("#query").blur()  # no focus ring in the picture
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), full_page=not args.viewport_only)
            return status.inner_text()
        finally:
            browser.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("docs/web.png"))
    ap.add_argument("--index", type=Path, help="an existing index (default: build the demo "
                                               "corpus with --embedder in a temporary folder)")
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--query-id", default="q09", help="demo query id (credrank/data/demo)")
    ap.add_argument("--priors", default="current", choices=["compressed", "current",
                                                            "aggressive"])
    ap.add_argument("--select", default="topk", choices=["topk", "mmr", "exposure"])
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=900)
    ap.add_argument("--viewport-only", action="store_true",
                    help="the first width × height pixels instead of the full page")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = ap.parse_args()
    if not Path(args.chromium).is_file():
        raise SystemExit(f"--chromium: no browser at {args.chromium} (apt-get install chromium)")
    query = demo_query(args.query_id)
    with tempfile.TemporaryDirectory(prefix="credrank-web-") as tmp:
        index = args.index
        if index is None:
            index = Path(tmp) / "index"
            build_demo_index(index, args.embedder)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen([sys.executable, "-m", "credrank.cli", "serve", "--index",
                                 str(index), "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL)
        try:
            wait_ready(url, proc)
            said = shoot(url, args.out, query, args)
        finally:
            proc.terminate()
            proc.wait(timeout=120)
    print(f"{args.out}: {query!r} ({args.priors}, {args.select}, top {args.top_k}) — {said}")


if __name__ == "__main__":
    main()
