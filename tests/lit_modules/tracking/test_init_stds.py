"""init_stds: the initial weight stds as `init_std.<matrix>` params (6 significant digits) and as the exact CSV table."""

import csv

import numpy as np

from lit_modules.tracking.init_stds import INIT_STD_TABLE, PARAM_PREFIX, init_std_params, write_init_std_table


def test_params_are_prefixed_and_rounded_to_six_significant_digits() -> None:
    params = init_std_params({"layers.0.attn.q_proj": 0.0123456789, "embed": 0.02, "head": 1.5e-7, "big": 123456789.0})
    assert params == {
        "init_std.layers.0.attn.q_proj": "0.0123457",
        "init_std.embed": "0.02",
        "init_std.head": "1.5e-07",
        "init_std.big": "1.23457e+08",
    }
    assert PARAM_PREFIX == "init_std." and init_std_params({}) == {}


def test_the_table_keeps_every_float_exactly_in_order(tmp_path) -> None:
    stds = {"embed": 0.1 + 0.2, "layers.0.mlp.up": np.float32(0.1), "head": 0.0}
    path = tmp_path / INIT_STD_TABLE
    write_init_std_table(path, stds)
    assert INIT_STD_TABLE == "init_std.csv"
    assert path.read_text().splitlines() == [
        "matrix,std", "embed,0.30000000000000004", "layers.0.mlp.up,0.10000000149011612", "head,0.0"]
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["matrix"], float(r["std"])) for r in rows] == [(k, float(v)) for k, v in stds.items()]
