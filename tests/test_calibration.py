"""The softmax calibration behind RBClassifier(solver='cg').predict_proba."""
import numpy as np
from sklearn.linear_model import LogisticRegression

from rbcd._calibration import fit_softmax_calibration, softmax_probabilities


def test_binary_matches_platt_logistic_regression():
    rng = np.random.default_rng(0)
    f = rng.normal(size=2000)
    y = (rng.random(2000) < 1 / (1 + np.exp(-(2.0 * f - 0.5)))).astype(int)
    a, b = fit_softmax_calibration(f, y, 2)
    # Platt scaling is a 1-D logistic regression on the scores (smoothed targets differ by O(1/n))
    lr = LogisticRegression(C=1e6).fit(f[:, None], y)
    np.testing.assert_allclose(a, lr.coef_[0, 0], rtol=0.05)
    np.testing.assert_allclose(b[1], lr.intercept_[0], atol=0.05)
    P = softmax_probabilities(f, a, b)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    np.testing.assert_allclose(P[:, 1], lr.predict_proba(f[:, None])[:, 1], atol=0.02)


def test_multiclass_keeps_the_argmax_and_is_calibrated():
    rng = np.random.default_rng(1)
    n, k = 3000, 4
    F = rng.normal(size=(n, k))
    true = np.exp(1.5 * F)
    true /= true.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(k, p=p) for p in true])
    a, b = fit_softmax_calibration(F, y, k)
    P = softmax_probabilities(F, a, b)
    assert np.array_equal(P.argmax(axis=1), (a * F + b).argmax(axis=1))
    assert 1.2 < a < 1.8 and np.all(np.abs(b) < 0.2)
    # better log loss than the uncalibrated softmax of the raw scores
    raw = np.exp(F) / np.exp(F).sum(axis=1, keepdims=True)
    ll = lambda Q: -np.mean(np.log(Q[np.arange(n), y]))  # noqa: E731
    assert ll(P) < ll(raw)


def test_separable_scores_stay_finite():
    f = np.r_[-np.ones(50), np.ones(50)]
    y = np.r_[np.zeros(50, int), np.ones(50, int)]
    a, b = fit_softmax_calibration(f, y, 2)
    P = softmax_probabilities(f, a, b)
    assert np.isfinite(a) and np.all(np.isfinite(P))
    # Platt's smoothed targets: 51/52 on each side, not 1
    np.testing.assert_allclose(P[y == 1, 1], 51 / 52, atol=1e-3)
