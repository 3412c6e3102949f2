"""The arm families of a claim: its preset's arm files and its evidence protocol's (file stem = arm name)."""

from analysis.claims import split_arm
from lit_modules.config.files import CONF_DIR


def claim_arm_families(claim: str) -> set[str]:
    """Families (the name before `@`) of conf/arm/<claim>/ and conf/arm/evidence/<claim>/: both presets judge
    their arms with the same claim (`ablation.claim`), and an evidence arm may extend another file, so the
    name is read from the file's stem (tests/sweeps/test_evidence.py checks it is the composed ablation.arm)."""
    folders = [CONF_DIR / "arm" / claim, CONF_DIR / "arm" / "evidence" / claim]
    return {split_arm(p.stem)[0] for folder in folders for p in folder.glob("*.yaml")}
