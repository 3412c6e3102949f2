"""A technique's config group is found on disk: `<name>=<option>` composes with no edit to conf/config.yaml."""

from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from lit_modules.config import files
from lit_modules.config.composition import compose_run_config
from lit_modules.config.technique_groups import listed_groups, register_technique_groups, technique_groups


def _conf(root: Path) -> Path:
    conf = root / "conf"
    for group, option, first in (("qk_scale", "default", "# @package techniques.qk_scale"),
                                 ("listed", "on", "# @package techniques.listed"),
                                 ("model", "tiny", "# a model, not a technique")):
        (conf / group).mkdir(parents=True)
        (conf / group / f"{option}.yaml").write_text(f"{first}\nx: 1\n")
    (conf / "config.yaml").write_text("defaults:\n  - listed: null\n  - technique_groups\n  - _self_\nseed: 0\n")
    return conf


def test_groups_packaged_under_techniques_are_found(tmp_path):
    conf = _conf(tmp_path)
    assert technique_groups(conf) == ["listed", "qk_scale"]
    assert listed_groups(conf / "config.yaml") == {"listed"}


def test_an_unlisted_group_composes_off_by_default_and_on_when_selected(tmp_path):
    conf = _conf(tmp_path)
    assert register_technique_groups(conf) == ["qk_scale"]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        assert "techniques" not in compose("config")
        assert dict(compose("config", overrides=["qk_scale=default"]).techniques) == {"qk_scale": {"x": 1}}
    GlobalHydra.instance().clear()
    register_technique_groups(files.CONF_DIR)  # leave the store as the real conf/ has it


def test_the_shipped_groups_keep_their_place_and_compose_as_before():
    assert set(technique_groups(files.CONF_DIR)) <= listed_groups(files.CONF_DIR / "config.yaml")
    cfg = compose_run_config(["wisca=qk_vo_tensor", "pc_layer=level4"])
    assert list(cfg.techniques) == ["wisca", "pc_layer"]  # the order config.yaml lists them in
