"""The arm families of a claim: its preset's arm files and its evidence protocol's arms."""

from analysis.claims import split_arm
from lit_modules.config.files import CONF_DIR


def claim_arm_families(claim: str) -> set[str]:
    """Families (the name before `@`) of conf/arm/<claim>/ (file stem = arm name) and of the arms and cells of
    conf/evidence/<claim>.yaml: both presets judge their arms with the same claim (`ablation.claim`)."""
    from sweeps.evidence.protocol_file import known_papers, load_spec

    names = [p.stem for p in (CONF_DIR / "arm" / claim).glob("*.yaml")]
    if claim in known_papers():
        spec = load_spec(claim)
        names += [*spec.arms, *spec.ablate_names()]
    return {split_arm(name)[0] for name in names}
