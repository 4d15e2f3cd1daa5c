"""Deliberately naive NumPy/SciPy references for the NGGP tests (never used by bnpcore)."""
import mpmath
import numpy as np
from scipy import integrate, optimize
from scipy.special import gammaln, logsumexp


def lap_ref(u, a, sigma, tau):
    """Laplace exponent of the GGP, the textbook formulas."""
    if sigma == 0:
        return a * np.log(1 + u / tau)
    return a / sigma * ((u + tau) ** sigma - tau ** sigma)


def lap_mp(u, a, sigma, tau):
    """The same at 50 digits (mpmath), elementwise."""
    with mpmath.workdps(50):
        f = (lambda x: a * mpmath.log(1 + x / tau)) if sigma == 0 else \
            (lambda x: mpmath.mpf(a) / sigma * ((x + tau) ** mpmath.mpf(sigma) - mpmath.mpf(tau) ** sigma))
        return np.array([float(f(mpmath.mpf(float(x)))) for x in np.atleast_1d(u)])


def log_kappa_ref(m, u, a, sigma, tau):
    """log of the m-th tilted moment kappa_m(U) = int s^m e^{-Us} lambda(ds) (supp (20))."""
    return np.log(a) + gammaln(m - sigma) - gammaln(1 - sigma) - (m - sigma) * np.log(u + tau)


def eppf_ref(sizes, a, sigma, tau, printed=False):
    """p(n_1..n_K) = 1/Gamma(n) int u^(n-1) e^{-lap(u)} prod_k kappa_{n_k}(u) du by quadrature.
    printed=True replaces (U+tau)^(sigma K - n) by the printed (U+tau)^(a K - n)."""
    sizes = np.asarray(sizes)
    n, K = sizes.sum(), len(sizes)

    def log_integrand(v):                      # in v = log u, Jacobian u included
        u = np.exp(v)
        lk = sum(log_kappa_ref(m, u, a, sigma, tau) for m in sizes)
        if printed:
            lk += (a * K - sigma * K) * np.log(u + tau)
        return n * v - lap_ref(u, a, sigma, tau) + lk - gammaln(n)

    grid = np.linspace(-60, 60, 24001)
    peak = grid[np.argmax(log_integrand(grid))]
    val, err = integrate.quad(lambda v: np.exp(log_integrand(v) - log_integrand(peak)), peak - 60, peak + 60,
                              points=[peak], limit=500, epsabs=0, epsrel=1e-12)
    return val * np.exp(log_integrand(peak))


def partitions(n):
    """All set partitions of range(n) as label lists in canonical form (first occurrence order)."""
    if n == 0:
        yield []
        return
    for p in partitions(n - 1):
        for k in range(max(p, default=-1) + 2):
            yield p + [k]


def dm_ref(x, lam):
    """log Dirichlet-multinomial of a token sequence with counts x under Dir(lam)."""
    x = np.asarray(x, dtype=float)
    return (gammaln(lam + x) - gammaln(lam)).sum() + gammaln(lam.sum()) - gammaln(lam.sum() + x.sum())


def dm_mp(x, lam):
    """dm_ref at 40 digits (mpmath), for parameters where lgamma differences cancel."""
    with mpmath.workdps(40):
        lam = [mpmath.mpf(float(v)) for v in lam]
        s = sum(mpmath.loggamma(l + int(c)) - mpmath.loggamma(l) for l, c in zip(lam, x) if c)
        L = sum(lam)
        return float(s + mpmath.loggamma(L) - mpmath.loggamma(L + int(np.sum(x))))


def mode_ref(m, ke, a, sigma, tau, printed=False):
    """argmax_U of U^m (U+tau)^-(m - sigma ke) e^{-lap(U)} by Brent's method on the derivative in log U."""
    c = m - (a if printed else sigma) * ke

    def g(v):
        u = np.exp(v)
        return m - c * u / (u + tau) - a * u * (u + tau) ** (sigma - 1)

    return np.exp(optimize.brentq(g, -60, 60, xtol=1e-15, rtol=1e-15, maxiter=500))


def adf_ref(X, a, sigma, tau, eta, eps, exact_k=True, printed=False):
    """ADF-NRM (Alg. 1) with dense lists; returns (lam, S, logP, responsibilities per document)."""
    X = np.asarray(X, dtype=float)
    W = X.shape[1]
    lam, S, logP, resp = [], [], [], []
    for m, x in enumerate(X):
        if m == 0:
            lw_new = 0.0
        elif sigma == 0:
            lw_new = np.log(a)
        else:
            ke = len(S) - (np.exp(logP).sum() if exact_k else 0.0)
            lw_new = np.log(a) + sigma * np.log(mode_ref(m, ke, a, sigma, tau, printed) + tau)
        lw = [np.log(S[k] - sigma) + dm_ref(x, lam[k]) if (m > 0 and S[k] > sigma) else -np.inf
              for k in range(len(S))]
        lw.append(lw_new + dm_ref(x, np.full(W, eta)))
        q = np.exp(lw - logsumexp(lw))
        if q[-1] > eps:
            lam.append(np.full(W, eta))
            S.append(0.0)
            logP.append(0.0)
        else:
            q = np.exp(lw[:-1] - logsumexp(lw[:-1]))
        for k in range(len(S)):
            lam[k] = lam[k] + q[k] * x
            S[k] += q[k]
            logP[k] += np.log1p(-min(q[k], 1 - 1e-15))
        resp.append(q[:len(S)])
    return np.array(lam), np.array(S), np.array(logP), resp


def make_bars(n_docs=200, n_tokens=50, baseline=0.1, seed=0):
    """[NRM] 8 x 8 bars (ALGORITHMS.md 12.2): 8 horizontal + 8 vertical bar clusters with an
    additive baseline, a uniformly chosen cluster per image, Mult(n_tokens) pixel counts."""
    rng = np.random.default_rng(seed)
    bars = []
    for r in range(8):
        img = np.zeros((8, 8))
        img[r, :] = 1
        bars.append(img.ravel())
        img = np.zeros((8, 8))
        img[:, r] = 1
        bars.append(img.ravel())
    phi = np.array(bars) + baseline
    phi /= phi.sum(axis=1, keepdims=True)
    z = rng.integers(0, 16, size=n_docs)
    X = np.array([rng.multinomial(n_tokens, phi[k]) for k in z])
    return X, z, phi


def make_py_mixture(n_docs, n_words=500, n_tokens=100, discount=0.75, concentration=1.0, eta=0.75, seed=0):
    """Pitman-Yor(0.75, 1) mixture of multinomials with Dir(0.75) centres (ALGORITHMS.md 12.3)."""
    rng = np.random.default_rng(seed)
    sizes, z = [], np.empty(n_docs, dtype=int)
    for i in range(n_docs):
        w = np.array([s - discount for s in sizes] + [concentration + discount * len(sizes)])
        k = rng.choice(len(w), p=w / w.sum())
        if k == len(sizes):
            sizes.append(0)
        sizes[k] += 1
        z[i] = k
    phi = rng.dirichlet(np.full(n_words, eta), size=len(sizes))
    X = np.array([rng.multinomial(n_tokens, phi[k]) for k in z])
    return X, z, phi


def ep_epoch_ref(X, lam, S, logP, Q, a, sigma, tau, eta, eps, exact_k=True):
    """One EP-NRM epoch (supp Alg. 2) with dense sites Q (n_docs x K) and an alive mask;
    clusters are never reused or compacted here. Returns (lam, S, logP, Q, alive)."""
    X = np.asarray(X, dtype=float)
    N, W = X.shape
    lam, S, logP, Q = lam.copy(), S.copy(), logP.copy(), Q.copy()
    alive = np.ones(len(S), dtype=bool)
    for i, x in enumerate(X):
        old = Q[i].copy()
        for k in np.flatnonzero(alive & (old > 0)):
            lam[k] -= old[k] * x
            S[k] -= old[k]
            logP[k] -= np.log1p(-min(old[k], 1 - 1e-15))
        K = len(S)
        if N == 1:
            lw_new = 0.0
        elif sigma == 0:
            lw_new = np.log(a)
        else:
            ke = alive.sum() - (np.exp(logP[alive]).sum() if exact_k else 0.0)
            lw_new = np.log(a) + sigma * np.log(mode_ref(N - 1, ke, a, sigma, tau) + tau)
        lw = [np.log(S[k] - sigma) + dm_ref(x, lam[k]) if (alive[k] and N > 1 and S[k] > sigma) else -np.inf
              for k in range(K)]
        lw.append(lw_new + dm_ref(x, np.full(W, eta)))
        q = np.exp(lw - logsumexp(lw))
        if q[-1] > eps:
            lam = np.vstack([lam, np.full(W, eta)])
            S, logP, alive = np.append(S, 0.0), np.append(logP, 0.0), np.append(alive, True)
            Q = np.hstack([Q, np.zeros((N, 1))])
        else:
            q = np.exp(lw[:-1] - logsumexp(lw[:-1]))
        Q[i] = 0.0
        for k in range(len(S)):
            if q[k] > 0:
                lam[k] += q[k] * x
                S[k] += q[k]
                logP[k] += np.log1p(-min(q[k], 1 - 1e-15))
                Q[i, k] = q[k]
        alive &= ~((old[:len(alive)] > 0) & (S < eps))
    return lam, S, logP, Q, alive
