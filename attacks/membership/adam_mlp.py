"""Shokri's attack classifier, `classifier=mlp`, fitted without scikit-learn's per-step overhead.

The attack fits 10-11 small MLPs a victim (10 log-probabilities in, 64 hidden units, one output),
each up to 500 epochs of minibatches of 200: about 25,000 Adam steps a victim on MNIST-20. Most
of scikit-learn's time there is not arithmetic but what wraps each step (input checks, the
dataframe-library probes in `_safe_indexing`, list-built optimiser state): on the ordinary MNIST
audit the classifiers were 35 of the 39 s of `membership` (issue #47).

`AdamMLP` is the same model fitted by the same steps: `make_pipeline(StandardScaler(),
MLPClassifier((64,), random_state=seed))` with scikit-learn's defaults (ReLU, Glorot-uniform
initialisation drawn in the same order from the same RandomState, L2 alpha 1e-4, Adam lr 1e-3,
betas 0.9/0.999, eps 1e-8, minibatches of min(200, n) over an index reshuffled every epoch,
stopping once the epoch loss has not improved by tol 1e-4 for more than 10 epochs). Each
arithmetic operation is the one scikit-learn performs, in the same order on the same shapes, so
the fitted weights and the probabilities are bit for bit scikit-learn's; a test holds the two
equal on data of every shape the attack produces (tests/attacks/test_adam_mlp.py).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, xlogy
from sklearn.preprocessing import StandardScaler

HIDDEN = 64
ALPHA, LR, BETA1, BETA2, EPS = 1e-4, 1e-3, 0.9, 0.999, 1e-8
BATCH, TOL, PATIENCE = 200, 1e-4, 10


class AdamMLP:
    """A fitted (or to be fitted) attack classifier with scikit-learn's `predict_proba` shape."""

    def __init__(self, seed: int, max_iter: int = 500):
        self.seed, self.max_iter = seed % (2**32), max_iter
        self.n_iter_ = 0

    def fit(self, x: np.ndarray, member: np.ndarray) -> AdamMLP:
        if len(np.unique(member)) != 2:
            raise ValueError("an attack classifier needs both members and non-members to fit")
        self.scaler = StandardScaler().fit(x)
        xs = self.scaler.transform(x)
        y = (member == np.max(member)).reshape(-1, 1)  # scikit-learn's binarised target: bool
        rng = np.random.RandomState(self.seed)
        flat, self.params = initial_params(rng, xs.shape[1])
        self.n_iter_ = adam_epochs(flat, self.params, xs, y, rng, self.max_iter)
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        w1, w2, b1, b2 = self.params
        h = self.scaler.transform(x) @ w1
        h += b1
        np.maximum(h, 0, out=h)
        out = h @ w2
        out += b2
        expit(out, out=out)
        p = out.ravel()
        return np.vstack([1 - p, p]).T


def initial_params(rng: np.random.RandomState, features: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Glorot-uniform weights and biases drawn layer by layer, returned as [w1, w2, b1, b2] (the
    optimiser's order), each a view into one flat vector so that Adam updates all four at once."""
    drawn = []
    for fan_in, fan_out in ((features, HIDDEN), (HIDDEN, 1)):
        bound = np.sqrt(6.0 / (fan_in + fan_out))
        drawn.append((rng.uniform(-bound, bound, (fan_in, fan_out)), rng.uniform(-bound, bound, fan_out)))
    (w1, b1), (w2, b2) = drawn
    ordered = [w1, w2, b1, b2]
    flat = np.concatenate([p.ravel() for p in ordered])
    views, start = [], 0
    for p in ordered:
        views.append(flat[start:start + p.size].reshape(p.shape))
        start += p.size
    return flat, views


def adam_epochs(flat: np.ndarray, params: list[np.ndarray], x: np.ndarray, y: np.ndarray, rng: np.random.RandomState,
                max_iter: int) -> int:
    """Minibatch Adam on `flat` (which `params` view) until the loss stalls or `max_iter` epochs;
    the epochs run."""
    n = x.shape[0]
    batch = min(BATCH, n)
    slices = [slice(s, s + batch) for s in range(0, n - batch + 1, batch)]
    if n % batch:
        slices.append(slice(n - n % batch, n))
    moments = [np.zeros_like(flat), np.zeros_like(flat)]
    order = np.arange(n, dtype=int)
    best, stalled, steps = np.inf, 0, 0
    for epoch in range(1, max_iter + 1):
        shuffled = np.arange(n)
        rng.shuffle(shuffled)
        order = order[shuffled]
        total = 0.0
        for part in slices:
            rows = order[part]
            loss, grads = loss_and_grads(params, x[rows], y[rows])
            total += loss * (part.stop - part.start)
            steps += 1
            adam_step(flat, np.concatenate([g.ravel() for g in grads]), moments, steps)
        loss = total / n
        stalled = stalled + 1 if loss > best - TOL else 0
        best = min(best, loss)
        if stalled > PATIENCE:
            return epoch
    return max_iter


def loss_and_grads(params: list[np.ndarray], xb: np.ndarray, yb: np.ndarray) -> tuple[float, list[np.ndarray]]:
    """Log loss plus the L2 penalty, and its gradients, for one minibatch."""
    w1, w2, b1, b2 = params
    m = xb.shape[0]
    h = xb @ w1
    h += b1
    np.maximum(h, 0, out=h)
    out = h @ w2
    out += b2
    expit(out, out=out)
    eps = np.finfo(out.dtype).eps
    p = np.clip(out, eps, 1 - eps)
    # np.average's arithmetic without its wrapper: the column's sum, divided by the row count
    loss = -(np.add.reduce(xlogy(yb, p) + xlogy(1 - yb, 1 - p), axis=0) / m).sum()
    penalty = 0
    for w in (w1, w2):
        flat = w.ravel()
        penalty += np.dot(flat, flat)
    loss += (0.5 * ALPHA) * penalty / m
    d_out = out - yb
    g_w2 = h.T @ d_out
    g_w2 += ALPHA * w2
    g_w2 /= m
    g_b2 = np.sum(d_out, axis=0) / m
    # the product with a one-column output (each entry one multiplication), zero where the ReLU
    # was off: the entries `d_h[h == 0] = 0` leaves, chosen rather than written over
    d_h = np.where(h > 0, d_out * w2.T, 0.0)
    g_w1 = xb.T @ d_h
    g_w1 += ALPHA * w1
    g_w1 /= m
    g_b1 = np.sum(d_h, axis=0) / m
    return float(loss), [g_w1, g_w2, g_b1, g_b2]


def adam_step(flat: np.ndarray, grad: np.ndarray, moments: list[np.ndarray], t: int) -> None:
    """scikit-learn's Adam update, on the flat vector: elementwise, so the same bits as per array."""
    first, second = moments
    first[:] = BETA1 * first + (1 - BETA1) * grad
    second[:] = BETA2 * second + (1 - BETA2) * (grad**2)
    rate = LR * np.sqrt(1 - BETA2**t) / (1 - BETA1**t)
    flat += -rate * first / (np.sqrt(second) + EPS)
