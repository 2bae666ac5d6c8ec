"""The softmax (temperature) calibration behind RBClassifier(solver='cg').predict_proba."""
import numpy as np
from sklearn.linear_model import LogisticRegression

from rbcd._calibration import fit_softmax_calibration, softmax_probabilities


def test_binary_matches_platt_without_offset():
    rng = np.random.default_rng(0)
    f = rng.normal(size=4000)
    y = (rng.random(4000) < 1 / (1 + np.exp(-2.0 * f))).astype(int)
    a = fit_softmax_calibration(f, y, 2)
    # Platt scaling through the origin is a 1-D logistic regression without intercept
    lr = LogisticRegression(C=1e6, fit_intercept=False).fit(f[:, None], y)
    np.testing.assert_allclose(a, lr.coef_[0, 0], rtol=0.02)
    P = softmax_probabilities(f, a)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    np.testing.assert_allclose(P[:, 1], lr.predict_proba(f[:, None])[:, 1], atol=0.01)
    assert np.array_equal(P.argmax(axis=1), (f > 0).astype(int))


def test_multiclass_recovers_the_temperature_and_keeps_the_argmax():
    rng = np.random.default_rng(1)
    n, k = 4000, 4
    F = rng.normal(size=(n, k))
    true = np.exp(1.5 * F)
    true /= true.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(k, p=p) for p in true])
    a = fit_softmax_calibration(F, y, k)
    assert 1.3 < a < 1.7
    P = softmax_probabilities(F, a)
    assert np.array_equal(P.argmax(axis=1), F.argmax(axis=1))


def test_weights_act_as_repeated_rows():
    rng = np.random.default_rng(2)
    f = rng.normal(size=300)
    y = (rng.random(300) < 1 / (1 + np.exp(-f))).astype(int)
    w = rng.integers(1, 4, size=300)
    a_w = fit_softmax_calibration(f, y, 2, sample_weight=w)
    a_r = fit_softmax_calibration(np.repeat(f, w), np.repeat(y, w), 2)
    np.testing.assert_allclose(a_w, a_r, rtol=1e-6)


def test_separable_scores_stay_finite():
    f = np.r_[-np.ones(50), np.ones(50)]
    y = np.r_[np.zeros(50, int), np.ones(50, int)]
    a = fit_softmax_calibration(f, y, 2)
    P = softmax_probabilities(f, a)
    assert np.isfinite(a) and np.all(np.isfinite(P))
    # Platt's smoothed targets: 51/52 on each side, not 1
    np.testing.assert_allclose(P[y == 1, 1], 51 / 52, atol=1e-3)
