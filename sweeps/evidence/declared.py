"""What a protocol declared before its cells ran, as the provenance records it (and hashes it: checks_sha256)."""

from __future__ import annotations

from sweeps.evidence import protocol_file
from sweeps.evidence.spec import EvidenceSpec


def declared_checks(spec: EvidenceSpec) -> dict:
    """The protocol's declared families (checked against its claim and arms), its seeds per block and its
    learning-rate grids: the provenance's record of what was declared when the cells ran, all in one hash
    (analysis.families), so a later change to a family, a seed or a grid shows. Arms, rungs and budgets are
    not in it: how a cell is composed is its config hash's business (a changed arm is a new cell). Beside the
    hash: the `checks:` node as parsed (`checks`) and the sha256 of the protocol file's bytes (`protocol_sha256`)."""
    from analysis.claims import claim_for
    from analysis.families import checks_sha256, declared_keys, parse_families, validate_against
    from analysis.protocol_revision import protocol_sha256

    spec = spec.declared()  # a call that runs some stages still declares (and hashes) the whole protocol
    families = parse_families(spec.checks, spec.where)
    claim = claim_for(spec.paper)
    validate_against(families, claim, list(dict.fromkeys(a for b in spec.blocks for a in b.arms)))
    protocol = {"declared_seeds": [{"arms": list(b.arms), "seeds": list(b.seeds), "stage": b.stage} for b in spec.blocks],
                "lr_tuning": [t.record() for t in spec.lr_tuning]}
    if spec.finetune_lr_tuning is not None:  # only where declared: the other protocols' hashes stay as they ran
        protocol["finetune_lr_tuning"] = spec.finetune_lr_tuning.record()
    confirmatory = {"confirmatory_seeds": list(families.confirmatory_seeds)} if families.confirmatory_seeds else {}
    # The `checks:` node itself, so the folder is judged by what it declared after the file is revised, and the
    # file's hash, so a report can say its folder is from an earlier revision (analysis.protocol_revision).
    path = protocol_file.SPEC_DIR / f"{spec.paper}.yaml"
    revision = {"protocol_sha256": protocol_sha256(path)} if path.is_file() else {}
    return {"checks_sha256": checks_sha256(families, claim, protocol), "checks_primary": declared_keys(families),
            "checks": spec.checks, **protocol, **confirmatory, **revision}
