"""The bound of the direct-assignment HDP and the optimisation of its globals
([SM]: M. Bryant and E. B. Sudderth, NIPS 2012, section 2.2): the GEM density
of the point estimate beta*, the beta* M-step, Newton steps for the
hyperparameters, and the bound's terms in the forms the moves update cheaply
(see ``bnpcore.models.hdp_da`` for the bound written out).
"""
import math

import numpy as np
from scipy.optimize import minimize
from scipy.special import digamma, gammaln, polygamma

GEM_DENSITIES = ("beta", "stick")
# logits of beta* stay in this box: beta*_k >= ~1e-180 / (K + 1), so with alpha >= 1e-100 the
# Dirichlet parameters alpha beta*_k stay normal numbers (lgamma and psi of them finite)
_LOGIT_BOUNDS = (-400.0, 10.0)


# ---------------------------------------------------------------------------
# the point estimate beta* and its prior
# ---------------------------------------------------------------------------

def gem_log_density(beta, gamma, kind="beta"):
    """log p(beta | gamma) of a point on the (K+1)-simplex under GEM(gamma).

    ``beta`` holds the K topic weights and the rest mass last. "beta": the
    density of (beta_1..beta_K) by the change of variables from the sticks
    V_k = beta_k / R_{k-1}, R_k = sum_{l>k} beta_l::

        K log gamma + (gamma - 1) log beta_{K+1} - sum_{k=1}^{K-1} log R_k

    "stick": the density of the sticks, ``K log gamma + (gamma - 1) log
    beta_{K+1}`` (order-invariant; the paper does not say which it uses).

    Returns (value, gradient with respect to every coordinate of ``beta``).
    """
    beta = np.asarray(beta, dtype=np.float64)
    K = beta.size - 1
    grad = np.zeros(K + 1)
    value = K * math.log(gamma) + (gamma - 1.0) * math.log(beta[K])
    grad[K] = (gamma - 1.0) / beta[K]
    if kind == "beta" and K > 1:
        tails = np.cumsum(beta[::-1])[::-1][1:K]      # R_1 .. R_{K-1}
        value -= np.log(tails).sum()
        inv = np.cumsum(1.0 / tails)                   # beta_l enters R_k for 1 <= k <= l
        grad[1:] -= inv[np.minimum(np.arange(1, K + 1), K - 1) - 1]
    return value, grad


def beta_objective(beta, sum_elogpi, n_docs, scale, alpha, gamma, kind="beta"):
    """f(beta) of the beta* M-step ([SM] section 2.2) and its gradient::

        f = scale * sum_j sum_k [alpha beta_k E[log pi_jk] - lgamma(alpha beta_k)] + log p(beta | gamma)

    ``sum_elogpi`` = sum_j E[log pi_jk] over the ``n_docs`` documents (K + 1
    cells), ``scale`` = D / |B| (1 in batch mode)."""
    ab = alpha * beta
    lp, glp = gem_log_density(beta, gamma, kind)
    value = scale * (alpha * (beta @ sum_elogpi) - n_docs * gammaln(ab).sum()) + lp
    grad = scale * alpha * (sum_elogpi - n_docs * digamma(ab)) + glp
    return value, grad


def _softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def optimize_beta(beta, sum_elogpi, n_docs, scale, alpha, gamma, kind="beta"):
    """argmax f by L-BFGS-B over logits (beta = softmax(zeta)), from ``beta``;
    returns the previous point when the optimum found is not better (f is not
    concave: the GEM Jacobian)."""
    def negative(z):
        b = _softmax(z)
        value, grad = beta_objective(b, sum_elogpi, n_docs, scale, alpha, gamma, kind)
        return -value, -(b * (grad - b @ grad))

    start = np.clip(np.log(beta), *_LOGIT_BOUNDS)
    before = negative(start)[0]
    result = minimize(negative, start, jac=True, method="L-BFGS-B", bounds=[_LOGIT_BOUNDS] * len(beta))
    if np.isfinite(result.fun) and result.fun < before:
        return _softmax(result.x)
    return beta


def _newton_log(objective, x, max_steps=20):
    """Maximise a smooth 1-D ``objective(x) -> (value, d, d2)`` over x > 0 by
    Newton steps in u = log x with step halving; only improving steps are taken."""
    value, d, d2 = objective(x)
    for _ in range(max_steps):
        gu, hu = x * d, x * x * d2 + x * d
        step = -gu / hu if hu < 0 else math.copysign(1.0, gu)
        step = max(-5.0, min(5.0, step))
        for _ in range(30):
            candidate = x * math.exp(step)
            new_value, new_d, new_d2 = objective(candidate)
            if np.isfinite(new_value) and new_value > value:
                break
            step *= 0.5
        else:
            return x
        gain = new_value - value
        x, value, d, d2 = candidate, new_value, new_d, new_d2
        if abs(step) < 1e-10 or gain <= 1e-12 * abs(value):
            break
    return x


# ---------------------------------------------------------------------------
# bound pieces
# ---------------------------------------------------------------------------

def expected_log_phi(lam, vocab=None):
    """E[log phi_kw] = psi(lambda_kw) - psi(Lambda_k) for rows of ``lam``,
    Lambda_k the row's total over all W words; ``vocab``: only the columns of
    those words (a minibatch's), still normalised by the whole row."""
    lam = np.atleast_2d(lam)
    return digamma(lam if vocab is None else lam[:, vocab]) - digamma(lam.sum(axis=1))[:, None]


def topic_terms(lam, eta):
    """The ``topics`` term per topic: E[log p(phi_k)] - E[log q(phi_k)]."""
    lam = np.atleast_2d(lam)
    W = lam.shape[1]
    return (gammaln(W * eta) - W * gammaln(eta) - gammaln(lam.sum(axis=1))
            + (gammaln(lam) + (eta - lam) * expected_log_phi(lam)).sum(axis=1))


def topic_terms_change(old, new, eta, cols):
    """sum(topic_terms(new)) - sum(topic_terms(old)) for rows that differ only in
    the columns ``cols``: the special functions of the other columns cancel, so
    they are evaluated only at ``cols`` and at the rows' totals."""
    W = old.shape[1]

    def part(lam):
        total, sub = lam.sum(axis=1), lam[:, cols]
        return (digamma(total) * (total - W * eta) - gammaln(total)).sum() \
            + (gammaln(sub) + (eta - sub) * digamma(sub)).sum()

    return float(part(new) - part(old))


class _Documents:
    """The ``documents`` term of a minibatch in a form a move updates in O(S):
    per document, the cells (n + ab - theta) psi(theta) + lgamma(theta) over the
    K + 1 cells, their coefficients' sum C_j and the total T_j of theta_j::

        documents_j = lgamma(alpha) - sum_k lgamma(ab_k) + sum_k cell_jk - C_j psi(T_j) - lgamma(T_j)
    """

    def __init__(self, theta, ndk, alpha_beta, alpha):
        self.theta, self.ab, self.alpha = theta, alpha_beta, alpha
        self.n = np.concatenate([ndk, np.zeros((len(ndk), 1))], axis=1)
        self.cells, coef = self.cell(theta, self.n, alpha_beta)
        self.cell_sum, self.coef, self.total = self.cells.sum(axis=1), coef.sum(axis=1), theta.sum(axis=1)

    @staticmethod
    def cell(theta, n, ab):
        coef = n + ab - theta
        return coef * digamma(theta) + gammaln(theta), coef

    @staticmethod
    def _per_doc(cell_sum, coef, total):
        return cell_sum - coef * digamma(total) - gammaln(total)

    def value(self):
        S = len(self.total)
        return S * (gammaln(self.alpha) - gammaln(self.ab).sum()) + \
            self._per_doc(self.cell_sum, self.coef, self.total).sum()

    def change(self, drop, add):
        """Change of the term when the cells ``drop`` (column indices) are replaced
        by the cells ``add``, a list of (theta column, n column, alpha beta)."""
        cell_sum = self.cell_sum - self.cells[:, drop].sum(axis=1)
        coef = self.coef - (self.n[:, drop] + self.ab[drop] - self.theta[:, drop]).sum(axis=1)
        total = self.total - self.theta[:, drop].sum(axis=1)
        prior = gammaln(self.ab[drop]).sum()
        for theta, n, ab in add:
            value, c = self.cell(theta, n, ab)
            cell_sum, coef, total = cell_sum + value, coef + c, total + theta
            prior -= gammaln(ab)
        return len(total) * prior + (self._per_doc(cell_sum, coef, total)
                                     - self._per_doc(self.cell_sum, self.coef, self.total)).sum()


def learn_hyperparameters(state, local, scale, rho):
    """Newton steps for alpha and eta, closed-form gamma ([SM] section 4 learns
    them "via Newton-Raphson updates"); online, the minibatch optimum is
    blended in log space with rho."""
    learn = state.settings["learn"]
    if "alpha" in learn:
        theta = local.theta
        e = (digamma(theta) - digamma(theta.sum(axis=1))[:, None]).sum(axis=0)
        S, beta = len(theta), state.beta

        def objective(a):
            ab = a * beta
            value = scale * (S * (gammaln(a) - gammaln(ab).sum()) + a * (beta @ e))
            d = scale * (S * (digamma(a) - beta @ digamma(ab)) + beta @ e)
            d2 = scale * S * (polygamma(1, a) - (beta * beta) @ polygamma(1, ab))
            return value, d, d2

        state.alpha = _blend(state.alpha, _newton_log(objective, state.alpha), rho)
    if "eta" in learn:
        K, W = state.lam.shape
        total = expected_log_phi(state.lam).sum()

        def objective(eta):
            value = K * (gammaln(W * eta) - W * gammaln(eta)) + (eta - 1.0) * total
            d = K * W * (digamma(W * eta) - digamma(eta)) + total
            d2 = K * W * (W * polygamma(1, W * eta) - polygamma(1, eta))
            return value, d, d2

        state.eta = _blend(state.eta, _newton_log(objective, state.eta), rho)
    if "gamma" in learn and state.n_components > 0:
        # log beta*_rest from the topics' weights: beta*_rest may round to 1 (gamma ~ 1e50)
        state.gamma = _blend(state.gamma, -state.n_components / math.log1p(-state.beta[:-1].sum()), rho)


def _blend(old, new, rho):
    return math.exp((1.0 - rho) * math.log(old) + rho * math.log(new))
