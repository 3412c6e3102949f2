"""Token-level probability gap by difficulty bin: known answers, symmetry, file checks, plot."""

import numpy as np
import pandas as pd
import pytest

from analysis.token_gap import load_token_logprobs, main, plot_token_gap, token_gap

PNG = b"\x89PNG\r\n\x1a\n"


def base_probs(n: int = 5000, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.001, 0.9, size=n)


@pytest.mark.parametrize("bins", ["deciles", "probability"])
def test_identical_runs_give_zero_gap_in_every_bin(bins):
    logp = np.log(base_probs())
    df = token_gap(logp, logp.copy(), bins=bins, n_boot=200)
    filled = df[df["count"] > 0]
    assert (filled["mean_delta"] == 0).all()
    assert (filled["ci_low"] == 0).all() and (filled["ci_high"] == 0).all()
    assert (filled["frac_positive"] == 0).all()
    assert df.loc[df["bin"] == "all", "count"].item() == 5000
    assert df[df["bin"] != "all"]["count"].sum() == 5000


def test_known_shift_is_detected_with_the_right_sign():
    p_b = base_probs()
    p_s = p_b + 0.05  # run S gives every true token 0.05 more probability
    df = token_gap(np.log(p_s), np.log(p_b), bins="deciles", n_boot=200)
    assert list(df["bin"]) == [f"D{i}" for i in range(1, 11)] + ["all"]
    assert df["count"].iloc[:10].tolist() == [500] * 10  # equal-count deciles
    np.testing.assert_allclose(df["mean_delta"], 0.05, atol=1e-12)
    np.testing.assert_allclose(df["ci_low"], 0.05, atol=1e-12)
    assert (df["frac_positive"] == 1.0).all()
    assert df["mean_difficulty"].iloc[:10].is_monotonic_increasing  # D1 easiest
    swapped = token_gap(np.log(p_b), np.log(p_s), bins="deciles", n_boot=200)
    np.testing.assert_allclose(swapped["mean_delta"], -0.05, atol=1e-12)
    assert (swapped["frac_positive"] == 0.0).all()
    pd.testing.assert_series_equal(swapped["mean_difficulty"], df["mean_difficulty"])  # symmetric bins


def test_probability_bins_by_geometric_mean_probability():
    # Easy tokens: both runs 0.8 (geo-mean 0.8 -> ">0.5"). Hard tokens: 0.02 vs 0.045, geo-mean 0.03.
    p_b = np.array([0.8] * 6 + [0.02] * 4)
    p_s = np.array([0.8] * 6 + [0.045] * 4)
    df = token_gap(np.log(p_s), np.log(p_b), bins="probability", n_boot=100).set_index("bin")
    assert list(df.index) == [">0.5", "0.1-0.5", "0.01-0.1", "<0.01", "all"]  # easiest first
    assert df.loc[">0.5", "count"] == 6 and df.loc[">0.5", "mean_delta"] == pytest.approx(0.0, abs=1e-15)
    assert df.loc["0.01-0.1", "count"] == 4
    assert df.loc["0.01-0.1", "mean_delta"] == pytest.approx(0.025)
    assert df.loc["0.01-0.1", "mean_difficulty"] == pytest.approx(-np.log(0.03))
    assert df.loc["0.01-0.1", "frac_positive"] == 1.0
    assert df.loc["<0.01", "count"] == 0 and np.isnan(df.loc["<0.01", "mean_delta"])
    assert df.loc["all", "mean_delta"] == pytest.approx(0.01)


def test_bootstrap_ci_is_seeded_and_has_the_textbook_width():
    rng = np.random.default_rng(3)
    p_b = rng.uniform(0.2, 0.6, size=10_000)
    p_s = np.clip(p_b + rng.normal(0.02, 0.1, size=p_b.size), 1e-6, 1.0)
    logp_s, logp_b = np.log(p_s), np.log(p_b)
    a = token_gap(logp_s, logp_b, bins="deciles", n_boot=2000, seed=7)
    b = token_gap(logp_s, logp_b, bins="deciles", n_boot=2000, seed=7)
    pd.testing.assert_frame_equal(a, b)
    assert not token_gap(logp_s, logp_b, bins="deciles", n_boot=2000, seed=8)["ci_low"].equals(a["ci_low"])
    total = a[a["bin"] == "all"].iloc[0]
    delta = p_s - p_b
    half_width = 1.96 * delta.std() / np.sqrt(delta.size)  # normal-theory 95% interval of the mean
    assert (total["ci_high"] - total["ci_low"]) / 2 == pytest.approx(half_width, rel=0.15)
    assert total["ci_low"] < total["mean_delta"] < total["ci_high"]


def test_bad_bins_and_lengths_are_refused():
    with pytest.raises(ValueError, match="bins must be"):
        token_gap(np.zeros(3), np.zeros(3), bins="quartiles")
    with pytest.raises(ValueError, match="different numbers"):
        token_gap(np.zeros(3), np.zeros(4))


def save(path, tokens, logprobs):
    np.savez(path, tokens=np.asarray(tokens, dtype=np.int32), logprobs=np.asarray(logprobs, dtype=np.float32))
    return path


def test_load_pairs_matching_files_and_refuses_mismatched_tokens(tmp_path):
    tokens = np.arange(12).reshape(3, 4) % 5
    s = save(tmp_path / "s.npz", tokens, -np.full(tokens.shape, 0.5))
    b = save(tmp_path / "b.npz", tokens, -np.full(tokens.shape, 1.5))
    pair = load_token_logprobs(s, b)
    assert pair.tokens.shape == (12,) and pair.logp_s.shape == pair.logp_b.shape == (12,)
    np.testing.assert_allclose(pair.logp_s - pair.logp_b, 1.0)
    other = tokens.copy()
    other[1, 2] += 1
    bad = save(tmp_path / "other.npz", other, -np.ones(tokens.shape))
    sentence = (
        r"^The token sequences in .* differ, so their per-token log-probabilities cannot be compared\.$"
    )
    with pytest.raises(ValueError, match=sentence):
        load_token_logprobs(s, bad)
    shorter = save(tmp_path / "short.npz", tokens.ravel()[:10], -np.ones(10))
    with pytest.raises(ValueError, match="differ"):
        load_token_logprobs(s, shorter)


def test_malformed_files_are_refused(tmp_path):
    np.savez(tmp_path / "no_logprobs.npz", tokens=np.zeros(3, dtype=np.int32))
    with pytest.raises(ValueError, match="lacks the array"):
        load_token_logprobs(tmp_path / "no_logprobs.npz", tmp_path / "no_logprobs.npz")
    positive = save(tmp_path / "positive.npz", [1, 2, 3], [0.1, -1.0, -2.0])
    with pytest.raises(ValueError, match="log-probabilities"):
        load_token_logprobs(positive, positive)
    shape = save(tmp_path / "shape.npz", [1, 2, 3], [-0.1, -1.0])
    with pytest.raises(ValueError, match="differ in shape"):
        load_token_logprobs(shape, shape)


def test_plot_and_command_line(tmp_path):
    p_b = base_probs(2000)
    df = token_gap(np.log(p_b + 0.03), np.log(p_b), n_boot=100)
    assert plot_token_gap(df, tmp_path / "gap.png").read_bytes()[:8] == PNG
    tokens = np.arange(2000) % 7
    s = save(tmp_path / "s.npz", tokens, np.log(p_b + 0.03))
    b = save(tmp_path / "b.npz", tokens, np.log(p_b))
    main([str(s), str(b), "--bins", "probability", "--n-boot", "50", "--out", str(tmp_path / "out" / "gap")])
    table = pd.read_csv(tmp_path / "out" / "gap.csv")
    assert table["bin"].tolist()[-1] == "all"
    assert table["mean_delta"].iloc[-1] == pytest.approx(0.03, rel=1e-3)
    assert (tmp_path / "out" / "gap.png").read_bytes()[:8] == PNG
