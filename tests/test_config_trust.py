"""Issue 37 (N4, N10, N11): a ``credrank.toml`` is trusted only where the user put it, a
malformed one is a one-line error, and ``provenance hosts --template`` writes only a regular
file outside any index. Every case runs the ``credrank`` command (in process,
:mod:`cli_inprocess`: its own environment, working directory and streams)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from cli_inprocess import assert_clean_error, run_cli
from cli_process import CREDRANK

pytestmark = pytest.mark.skipif(not CREDRANK.is_file(), reason="credrank script not installed")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No user config dir of the tester's own: ``XDG_CONFIG_HOME`` in ``tmp_path``."""
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "CREDRANK_CONFIG": "",
            "CREDRANK_NO_CONFIG": "", **extra}


def _one_line(proc) -> None:  # type: ignore[no-untyped-def]
    assert_clean_error(proc, starts=True)
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def _config(folder: Path, text: str, mode: int = 0o644) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "credrank.toml"
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


# -- where the file is found ----------------------------------------------------------------

def test_a_parent_folder_is_never_read(tmp_path: Path) -> None:
    # a key that would be an error if the file were read
    _config(tmp_path, "[search]\ntopk = 3\n", 0o644)
    (tmp_path / "work").mkdir()
    proc = run_cli("search", "x", "--index", tmp_path / "nowhere", cwd=tmp_path / "work",
                   env=_env(tmp_path))
    assert_clean_error(proc, "no credrank index here")
    assert "credrank.toml" not in proc.stderr


def test_the_user_config_dir_and_switching_discovery_off(tmp_path: Path) -> None:
    user = _config(tmp_path / "xdg" / "credrank", 'index = "nowhere"\n')
    (tmp_path / "work").mkdir()
    proc = run_cli("search", "x", cwd=tmp_path / "work", env=_env(tmp_path))
    assert_clean_error(proc, f"defaults from {user}", str(user.parent / "nowhere"))
    # the working directory's file wins over the user's
    here = _config(tmp_path / "work", 'index = "here"\n')
    proc = run_cli("search", "x", cwd=tmp_path / "work", env=_env(tmp_path))
    assert_clean_error(proc, f"defaults from {here}", str(here.parent / "here"))
    # CREDRANK_NO_CONFIG: no file at all (search then lacks its --index)
    proc = run_cli("search", "x", cwd=tmp_path / "work",
                   env=_env(tmp_path, CREDRANK_NO_CONFIG="1"))
    assert proc.returncode == 2 and "defaults from" not in proc.stderr
    assert "--index" in proc.stderr


# -- whose file it is -------------------------------------------------------------------------

@pytest.mark.parametrize(("mode", "who"), [(0o666, "writable by others"),
                                           (0o664, "writable by its group")])
def test_a_file_others_may_write_is_refused(tmp_path: Path, mode: int, who: str) -> None:
    path = _config(tmp_path, 'index = "idx"\n', mode)
    proc = run_cli("search", "x", cwd=tmp_path, env=_env(tmp_path))
    _one_line(proc)
    assert_clean_error(proc, str(path), who, "chmod go-w", "--config")
    # named with --config it is the user's choice
    proc = run_cli("--config", path, "search", "x", cwd=tmp_path, env=_env(tmp_path))
    assert_clean_error(proc, f"defaults from {path}", "no credrank index here")
    # the same in the user's config dir
    user = _config(tmp_path / "xdg" / "credrank", 'index = "idx"\n', mode)
    (tmp_path / "work").mkdir()
    proc = run_cli("search", "x", cwd=tmp_path / "work", env=_env(tmp_path))
    assert_clean_error(proc, str(user), who)


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                    reason="making a file another user's needs root")
def test_a_file_of_another_user_is_refused(tmp_path: Path) -> None:
    path = _config(tmp_path, 'index = "idx"\n')
    os.chown(path, 65534, 65534)
    proc = run_cli("search", "x", cwd=tmp_path, env=_env(tmp_path))
    assert_clean_error(proc, str(path), "owned by another user")


def test_a_fifo_named_credrank_toml_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "credrank.toml")
    proc = run_cli("search", "x", cwd=tmp_path, env=_env(tmp_path), timeout=60)
    assert_clean_error(proc, "credrank.toml", "not a regular file")


# -- what a discovered file may set -----------------------------------------------------------

def test_a_listen_address_comes_from_a_flag_or_an_explicit_file(tmp_path: Path) -> None:
    path = _config(tmp_path, '[serve]\nhost = "0.0.0.0"\nport = 80\n')
    index = tmp_path / "nowhere"
    proc = run_cli("serve", "--index", index, cwd=tmp_path, env=_env(tmp_path))
    assert_clean_error(proc, str(path), "[serve] host", "--host", "--config")
    proc = run_cli("serve", "--index", index, "--host", "127.0.0.1", cwd=tmp_path,
                   env=_env(tmp_path))
    assert_clean_error(proc, "[serve] port", "--port")
    # the flags given, the file's values are not used: the command goes on (to the index)
    proc = run_cli("serve", "--index", index, "--host", "127.0.0.1", "--port", "8765",
                   cwd=tmp_path, env=_env(tmp_path))
    assert_clean_error(proc, "no credrank index here")
    # the same file named with --config is taken whole
    proc = run_cli("--config", path, "serve", "--index", index, cwd=tmp_path,
                   env=_env(tmp_path))
    assert_clean_error(proc, "no credrank index here")
    assert "[serve] host" not in proc.stderr
    # --help shows the command without refusing
    assert run_cli("serve", "--help", cwd=tmp_path, env=_env(tmp_path)).returncode == 0


@pytest.mark.parametrize(("text", "named"), [
    ('qdrant-url = "http://attacker.example:6333"\n', "qdrant-url"),
    ('[index]\napi_key_env = "AWS_SECRET_ACCESS_KEY"\n', "[index] api_key_env"),
    ('[index]\nrejects = "/tmp/elsewhere.jsonl"\n', "[index] rejects"),
    ('[index]\nrejects = "../up.jsonl"\n', "[index] rejects"),
    ('index = "/tmp/someone-elses-index"\n', "index"),
])
def test_engine_urls_key_sources_and_outside_outputs_are_refused(
        tmp_path: Path, text: str, named: str) -> None:
    path = _config(tmp_path / "work", text)
    index = [] if text.startswith("index") else ["--index", "idx"]
    proc = run_cli("index", tmp_path / "corpus.jsonl", *index, cwd=tmp_path / "work",
                   env=_env(tmp_path))
    assert_clean_error(proc, str(path), named, "discovered", "--config")


def test_outputs_inside_the_files_folder_are_taken(tmp_path: Path) -> None:
    """The common use: the index and the rejects file next to the credrank.toml."""
    path = _config(tmp_path, '[index]\nindex = "idx"\nrejects = "rejects.jsonl"\n')
    proc = run_cli("index", tmp_path / "missing.jsonl", cwd=tmp_path, env=_env(tmp_path))
    assert proc.returncode == 2
    assert f"defaults from {path}" in proc.stderr and "discovered" not in proc.stderr
    assert "missing.jsonl" in proc.stderr


# -- malformed files (N10) --------------------------------------------------------------------

@pytest.mark.parametrize(("content", "said"), [
    ('index = "x"\n'.encode("utf-16"), "UTF-16"),
    (b"index = \"\xff\"\n", "expected UTF-8"),
    (b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n", "nesting"),
    (b"a = " + b"{b = " * 2000 + b"1" + b"}" * 2000 + b"\n", "nesting"),
    (b"[search\n", "expected TOML"),
    (b"index = \"x\"\x00\n", "NUL"),
])
def test_a_malformed_file_is_one_line(tmp_path: Path, content: bytes, said: str) -> None:
    path = tmp_path / "credrank.toml"
    path.write_bytes(content)
    for args in (["search", "x"], ["--config", str(path), "index", "c.jsonl"]):
        proc = run_cli(*args, cwd=tmp_path, env=_env(tmp_path))
        _one_line(proc)
        assert_clean_error(proc, str(path), said)


def test_a_folder_named_credrank_toml_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "credrank.toml").mkdir()
    proc = run_cli("search", "x", cwd=tmp_path, env=_env(tmp_path))
    _one_line(proc)
    assert_clean_error(proc, "credrank.toml", "directory")


# -- provenance hosts --template (N11) --------------------------------------------------------

def _fake_index(folder: Path) -> Path:
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"embedder": "hashing", "dim": 8}),
                                          encoding="utf-8")
    return folder


def test_template_refuses_what_is_no_regular_file(tmp_path: Path) -> None:
    index = _fake_index(tmp_path / "idx")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    devnull = tmp_path / "null"
    devnull.symlink_to(os.devnull)
    for target, said in ((fifo, "FIFO"), (link, "symbolic link"), (devnull, "symbolic link"),
                         (Path(os.devnull), "character device"), (tmp_path, "directory")):
        proc = run_cli("provenance", "hosts", "--index", index, "--template", target,
                       "--force", cwd=tmp_path, env=_env(tmp_path), timeout=60)
        assert_clean_error(proc, "--template", said)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink()
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_template_never_writes_into_an_index(tmp_path: Path) -> None:
    index = _fake_index(tmp_path / "idx")
    manifest = index / "manifest.json"
    before = manifest.read_bytes()
    (index / "shard").mkdir()
    for target in (manifest, index / "domains.csv", index / "shard" / "x.csv"):
        proc = run_cli("provenance", "hosts", "--index", index, "--template", target,
                       "--force", cwd=tmp_path, env=_env(tmp_path))
        assert_clean_error(proc, "--template", f"inside the credrank index {index}")
    assert manifest.read_bytes() == before
    assert sorted(p.name for p in index.iterdir()) == ["manifest.json", "shard"]
    # a manifest.json that does not parse (a damaged index?) is never overwritten either
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{", encoding="utf-8")
    proc = run_cli("provenance", "hosts", "--index", index, "--template",
                   broken / "manifest.json", "--force", cwd=tmp_path, env=_env(tmp_path))
    assert_clean_error(proc, "--template", "manifest.json")
    assert (broken / "manifest.json").read_text(encoding="utf-8") == "{"
    # another program's manifest.json is not an index
    other = tmp_path / "web"
    other.mkdir()
    (other / "manifest.json").write_text('{"name": "app"}', encoding="utf-8")
    proc = run_cli("provenance", "hosts", "--index", index, "--template",
                   other / "domains.csv", cwd=tmp_path, env=_env(tmp_path))
    assert "inside the credrank index" not in proc.stderr


# -- written values win over the file's ----------------------------------------------------

def test_written_arguments_win_over_what_the_file_says(tmp_path: Path,
                                                       demo_index_hashing: Path) -> None:
    """A file's ``set`` item clashed with a flag and was blamed on the command line; a file's
    ``index`` made ``advise PROFILE`` fail, and a file's ``queries`` ``search QUERY``: the
    written value wins, as the file's other values yield to flags."""
    from sparse_copy import copy_index

    copy_index(demo_index_hashing, tmp_path / "idx")
    _config(tmp_path, 'index = "idx"\n[search]\nset = ["prior.priors=aggressive"]\n'
                      'queries = "q.txt"\n')
    (tmp_path / "q.txt").write_text("vitamin d\n", encoding="utf-8")
    proc = run_cli("search", "vitamin d covid", "--priors", "compressed", "--json",
                   cwd=tmp_path, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    prior = json.loads(proc.stdout)["pipeline"]["stages"][0]
    assert prior["stage"] == "prior" and prior["priors"] == "compressed"
    proc = run_cli("search", "vitamin d covid", "--json", cwd=tmp_path, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr  # no flag: the file's set applies
    assert json.loads(proc.stdout)["pipeline"]["stages"][0]["priors"] == "aggressive"
    proc = run_cli("advise", "marketplace", "--json", cwd=tmp_path, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr


def test_paths_inside_text_values_are_the_file_s_folder_s(tmp_path: Path,
                                                          demo_index_hashing: Path) -> None:
    """``freshness = "half_life=1y,config=fr.toml"`` and ``set = ["prior.priors=mine.toml"]``
    looked for the files in the current folder ("the freshness config does not exist" when
    run with --config from elsewhere); a path option's value was already the file's."""
    from sparse_copy import copy_index

    copy_index(demo_index_hashing, tmp_path / "idx")
    folder = tmp_path / "f1"
    folder.mkdir()
    (folder / "fr.toml").write_text('half_life = "1y"\n', encoding="utf-8")
    (folder / "mine.toml").write_text('name = "mine"\nbase = "current"\nblog = 0.7\n',
                                      encoding="utf-8")
    path = _config(folder, f'index = {json.dumps(str(tmp_path / "idx"))}\n[search]\n'
                           'freshness = "half_life=1y,config=fr.toml"\n'
                           'set = ["prior.priors=mine.toml"]\n')
    elsewhere = tmp_path / "f2"
    elsewhere.mkdir()
    proc = run_cli("--config", path, "search", "vitamin d", "--json", cwd=elsewhere,
                   env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    stages = {s["stage"]: s for s in json.loads(proc.stdout)["pipeline"]["stages"]}
    assert stages["prior"]["priors"] == str(folder / "mine.toml")
    assert stages["freshness"]["config"] == str(folder / "fr.toml")


def test_an_error_in_a_set_item_of_the_file_names_the_file(tmp_path: Path,
                                                           demo_index_hashing: Path) -> None:
    from sparse_copy import copy_index

    copy_index(demo_index_hashing, tmp_path / "idx")
    path = _config(tmp_path, 'index = "idx"\n[search]\nset = ["consensus.threshold=2"]\n')
    proc = run_cli("search", "vitamin d", cwd=tmp_path, env=_env(tmp_path))
    assert proc.returncode == 2
    assert f"got 2 (from {path}: [search] set)" in proc.stderr


def test_context_lets_a_set_item_of_the_file_yield_too(tmp_path: Path,
                                                       demo_index_hashing: Path) -> None:
    """``context`` without --top-k adds its own default and lost that the -S items came from
    the file: the file's item was blamed on the command line."""
    from sparse_copy import copy_index

    copy_index(demo_index_hashing, tmp_path / "idx")
    _config(tmp_path, 'index = "idx"\nset = ["prior.priors=aggressive"]\n')
    proc = run_cli("context", "vitamin d", "--priors", "compressed", "--json", cwd=tmp_path,
                   env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["pipeline"]["stages"][0]["priors"] == "compressed"


def test_a_pipeline_on_the_command_line_runs_as_written(tmp_path: Path,
                                                         demo_index_hashing: Path) -> None:
    """A defaults file's top-k, fetch-k and set were applied onto a --pipeline given on the
    command line: a replayed --json output ranked 3 hits where it had 4, with a consensus
    stage it never had. The spec runs as written; the file's values still apply without it."""
    from sparse_copy import copy_index

    copy_index(demo_index_hashing, tmp_path / "idx")
    first = run_cli("search", "vitamin d", "--index", tmp_path / "idx", "--top-k", "4",
                    "--json", cwd=tmp_path, env={**_env(tmp_path), "CREDRANK_NO_CONFIG": "1"})
    assert first.returncode == 0, first.stderr
    (tmp_path / "run.json").write_text(first.stdout, encoding="utf-8")
    _config(tmp_path, 'index = "idx"\ntop-k = 3\nfetch-k = 9\n[search]\n'
                      'set = ["consensus.threshold=0.9"]\n')
    replay = run_cli("search", "vitamin d", "--pipeline", "run.json", "--json", cwd=tmp_path,
                     env=_env(tmp_path))
    assert replay.returncode == 0, replay.stderr
    doc = json.loads(replay.stdout)
    assert doc["pipeline"] == json.loads(first.stdout)["pipeline"]
    assert [h["doc_id"] for h in doc["hits"]] == [h["doc_id"] for h in
                                                   json.loads(first.stdout)["hits"]]
    plain = run_cli("search", "vitamin d", "--json", cwd=tmp_path, env=_env(tmp_path))
    stages = [s["stage"] for s in json.loads(plain.stdout)["pipeline"]["stages"]]
    assert json.loads(plain.stdout)["pipeline"]["top_k"] == 3 and "consensus" in stages


@pytest.mark.parametrize(("value", "off"), [("1", True), ("yes", True), ("true", True),
                                            ("", False), ("0", False), ("false", False),
                                            ("No", False), (" off ", False)])
def test_no_config_is_a_flag_read_one_way(monkeypatch: pytest.MonkeyPatch, value: str,
                                          off: bool) -> None:
    """CREDRANK_NO_CONFIG=false turned discovery off (any value but "" and "0" did)."""
    from credrank.cli.config import discovery_off

    monkeypatch.setenv("CREDRANK_NO_CONFIG", value)
    assert discovery_off() is off
