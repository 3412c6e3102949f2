"""The evidence driver: a protocol (`conf/evidence/<name>.yaml`, docs/evidence.md) run to a verdict.

    python -m sweeps.evidence [papers=...] [stages=headline,below,scale] [workers=N] [dry_run=true] ...

    spec.py           the protocol as data: arms, rungs, blocks, grids, checks, budgets; cell names
    protocol_file.py  conf/evidence/<name>.yaml read and checked into a spec (one sentence per mistake)
    plan.py           spec -> typed cells -> the ablation driver's grids; the dry run's checks
    stages.py         tuning then test cells, stage by stage, then the fine-tune stage
    declared.py       what was declared, as the provenance hashes it
    args.py           the command's words
    driver.py         every paper: check, run, export, report, ledger

Nothing is imported here, so `sweeps.ablate` can read a protocol (its `make ablate` grid) without loading
the driver that imports it.
"""
