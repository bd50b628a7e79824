"""Prior presets, dispersion and prior files."""

import pytest

from credrank.documents.schema import SOURCE_TYPES
from credrank.signals.prior import CURRENT, PRESET_DISPERSION, disperse, load_priors, preset


def test_current_preset_is_the_seed_health_values():
    p = preset("current")
    assert p["peer_reviewed"] == 0.95 and p["ai_generated"] == 0.30
    assert p["nonexistent"] == p["unknown"]


def test_presets_keep_order_and_differ_in_spread():
    spreads = {}
    for name in PRESET_DISPERSION:
        values = preset(name).values
        order = sorted(SOURCE_TYPES, key=lambda t: CURRENT[t])
        assert [values[t] for t in order] == sorted(values[t] for t in order)
        assert all(0 < v <= 1 for v in values.values())
        spreads[name] = values["peer_reviewed"] - values["ai_generated"]
    assert spreads["compressed"] < spreads["current"] < spreads["aggressive"]


def test_zero_dispersion_flattens_all_priors():
    flat = disperse(CURRENT, 0.0)
    assert len({round(v, 6) for v in flat.values()}) == 1


def test_negative_dispersion_rejected():
    with pytest.raises(ValueError, match="gamma"):
        disperse(CURRENT, -1)


def test_toml_and_yaml_prior_files(tmp_path):
    toml = tmp_path / "p.toml"
    toml.write_text('base = "current"\n[priors]\nblog = 0.2\n')
    assert load_priors(toml)["blog"] == 0.2
    assert load_priors(toml)["government"] == 0.9
    yml = tmp_path / "p.yaml"
    yml.write_text("\n".join(f"{t}: 0.5" for t in SOURCE_TYPES))
    assert load_priors(yml)["peer_reviewed"] == 0.5


@pytest.mark.parametrize("body,match", [
    ('[priors]\nblog = 1.5\n', "blog"),
    ('base = "current"\n[priors]\nwebsite = 0.5\n',
     r"bad\.toml: priors\.website: expected one of .*, got 'website'"),
    ('[priors]\nblog = 0.5\n', r"bad\.toml: priors: .*missing source types"),
    ('blog = 0.5\nwebsite = 0.5\n', r"bad\.toml: website: expected one of the known keys"),
    ('base = "extreme"\n', r"bad\.toml: base: expected one of compressed, current, aggressive"),
])
def test_bad_prior_files_name_the_field(tmp_path, body, match):
    f = tmp_path / "bad.toml"
    f.write_text(body)
    with pytest.raises(ValueError, match=match):
        load_priors(f)


def test_unknown_preset_lists_choices():
    with pytest.raises(ValueError, match="compressed, current, aggressive"):
        load_priors("extreme")
