"""Argument checks shared by the estimators (raise early, name the problem)."""
import contextlib
import numbers
import os

import numpy as np


def check_random_state(random_state):
    """A ``numpy.random.Generator`` from None, an int, a SeedSequence or a Generator."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or isinstance(random_state, (numbers.Integral, np.random.SeedSequence)):
        if isinstance(random_state, numbers.Integral) and random_state < 0:
            raise ValueError(f"random_state must be non-negative, got {random_state}")
        return np.random.default_rng(random_state)
    raise TypeError(f"random_state must be None, an int or a numpy Generator, got {type(random_state).__name__}")


def spawn_generators(rng, n):
    """``n`` independent child generators of ``rng``, e.g. one per chunk: the
    children ``SeedSequence.spawn`` makes first, derived without spawning, so
    neither ``rng`` nor its seed sequence changes and the same ``rng`` gives the
    same children every time."""
    ss = rng.bit_generator.seed_seq
    return [np.random.Generator(type(rng.bit_generator)(
        np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (i,), pool_size=ss.pool_size)))
        for i in range(n)]


# Largest n_threads accepted on a machine with fewer cpus (effective_n_threads).
MAX_THREADS = 256


def effective_n_threads(n_threads):
    """The OpenMP pool size of one kernel call from an estimator's ``n_threads``:
    None: OMP_NUM_THREADS if set, else the cpu count; -1: every cpu; k >= 1: k.
    0, below -1 or not an integer: ValueError naming ``n_threads``; so is a
    count above ``max(MAX_THREADS, cpu count)`` (each OpenMP thread takes a
    stack: 10**7 of them crashed the process).

    BLAS and OpenMP do not oversubscribe the cpus: ``fit`` and ``partial_fit``
    run inside :func:`blas_limited` (one BLAS thread while the OpenMP kernels
    own the cores), and the per-document kernels of ``transform`` and
    ``score`` call no BLAS routine."""
    if n_threads is None:
        env = os.environ.get("OMP_NUM_THREADS")
        return max(1, int(env)) if env and env.isdigit() else (os.cpu_count() or 1)
    if not isinstance(n_threads, numbers.Integral) or n_threads == 0 or n_threads < -1:
        raise ValueError(f"n_threads must be None, -1 or a positive integer, got {n_threads!r}")
    if n_threads > max(MAX_THREADS, os.cpu_count() or 1):
        raise ValueError(f"n_threads must be at most {max(MAX_THREADS, os.cpu_count() or 1)} (this machine has "
                         f"{os.cpu_count()} cpus), got {n_threads if n_threads < 10 ** 30 else _digits(n_threads)}")
    return (os.cpu_count() or 1) if n_threads == -1 else int(n_threads)


def blas_limited():
    """Context manager limiting BLAS to one thread (``threadpoolctl``, an optional
    dependency; without it, a no-op): the training loops run it around the
    OpenMP kernels, some of which call BLAS inside their parallel loops, so a
    multi-threaded BLAS would start threads from every OpenMP thread."""
    global _controller
    if _controller is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _controller = False
        else:   # built once: scanning the loaded libraries costs far more than a limit from the scan
            _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas") if _controller else contextlib.nullcontext()


_controller = None   # threadpoolctl's view of the loaded BLAS libraries, False without threadpoolctl


def check_positive(value, name, allow_zero=False, maximum=None, reason=None):
    """A positive (or non-negative) finite float, at most ``maximum`` when
    given, else ValueError naming ``name`` (and the limit and its ``reason``).
    An integer too large for a float (``10**400``) is a ValueError too."""
    value = _as_float(value, name)
    if not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} must be a {kind} finite number, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}={value:g} is above {maximum:g}" + (f": {reason}" if reason else ""))
    return value


def _digits(value):
    """A short description of a huge integer (its str() is refused past 4300 digits)."""
    if not isinstance(value, numbers.Integral):
        return repr(value)
    return f"about {'-' if value < 0 else ''}10**{int(abs(value).bit_length() * 0.30103)}"


def _as_float(value, name):
    """``value`` as a float (possibly not finite); TypeError for a non-real, ValueError
    for an integer too large for a float (``10**400``), naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{name} must be a finite number, got an integer too large for a float "
                         f"({_digits(value)})") from None


def check_real(value, name):
    """A finite float of either sign, else ValueError/TypeError naming ``name``."""
    value = _as_float(value, name)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    return value


# Range of every prior and concentration hyperparameter (docs/numerics.md): below
# 1e-300 reciprocals (psi(x) ~ -1/x) and logs of gamma draws (log U / a) overflow,
# and subnormal priors vanish beside any count; above 1e300 sums over the vocabulary
# and products of two priors overflow. Algorithms that square or multiply priors
# accept a narrower range (PRODUCT_RANGE), each giving its reason.
PRIOR_RANGE = (1e-300, 1e300)
PRODUCT_RANGE = (1e-100, 1e100)


def check_prior(value, name, allow_zero=False, bounds=PRIOR_RANGE, reason=None):
    """A positive finite prior inside ``bounds`` (0 too if ``allow_zero``), else
    ValueError naming ``name``, the range and why (``reason``)."""
    value = check_positive(value, name, allow_zero)
    low, high = bounds
    if value != 0 and not low <= value <= high:
        why = reason or "beyond it the kernels' reciprocals, logs and sums leave double precision"
        raise ValueError(f"{name}={value:g} is outside [{low:g}, {high:g}]: {why} (see docs/numerics.md)")
    return value


def check_dirichlet(value, shape, name, bounds=None, reason=None):
    """A Dirichlet prior as a C-contiguous float64 array of ``shape``, from a
    number (symmetric), an array of the last axis's size (the same for every
    row) or an array of ``shape``: positive and finite, and inside ``bounds``
    when given (a number by :func:`check_prior`, an array by its extreme
    entries), else ValueError/TypeError naming ``name``."""
    shape = tuple(int(n) for n in shape)
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a number or an array, got a bool")
    if bounds is not None and np.ndim(value) == 0:
        return np.full(shape, check_prior(value, name, bounds=bounds, reason=reason))
    arr = np.asarray(value)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be a number or an array of numbers, got dtype {arr.dtype}")
    if arr.shape not in ((), shape[-1:], shape):
        allowed = f"an array of shape {shape}" if len(shape) == 1 else f"shape {shape[-1:]} or shape {shape}"
        raise ValueError(f"{name} must be a number or {allowed}, got shape {arr.shape}")
    arr = np.array(np.broadcast_to(arr.astype(np.float64, copy=False), shape), order="C")    # a writable copy
    if not np.all(np.isfinite(arr) & (arr > 0)):
        raise ValueError(f"{name} must be positive and finite")
    if bounds is not None and arr.size:
        for v in (arr.min(), arr.max()):
            check_prior(v, f"{name} (an entry)", bounds=bounds, reason=reason)
    return arr


# Largest integer setting (sizes, sweeps, samples, rounds): the kernels count in
# 32-bit integers, so a larger value would overflow them.
INT_MAX = 2 ** 31 - 1


def check_int(value, name, minimum=1, maximum=INT_MAX, reason=None):
    """An integer in [minimum, maximum] (no upper limit when ``maximum`` is
    None), else ValueError/TypeError naming ``name`` (and why: ``reason``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value if abs(value) < 10 ** 30 else _digits(value)}")
    if maximum is not None and value > maximum:
        why = reason or ("the kernels count in 32-bit integers" if maximum == INT_MAX else None)
        raise ValueError(f"{name} must be <= {maximum}{f' ({why})' if why else ''}, "
                         f"got {value if value < 10 ** 30 else _digits(value)}")
    return int(value)


# Largest corpus size an online estimator's total_samples may declare: n / S scales
# the statistics as a float, exact for integers up to 2**53.
MAX_DOCUMENTS = 2 ** 53


# Largest amount of work inside one iteration (sweeps of a local sampler, samples
# or concentration rounds per sweep, E-step iterations, split and merge
# candidates; docs/numerics.md): max_seconds is checked between iterations, so
# these settings bound how far past it a fit can run. At the limit one
# iteration does at most INNER_MAX / default times the default work (the
# defaults are 1-200).
INNER_MAX = 1000
# The truncation-free local sampler's sweeps and samples per minibatch: a KOS
# minibatch of 100 documents took 0.19 s at local_sweeps=5, 1.0 s at 100 and 7.8 s
# at 1000 (benchmarks/results/bench_inner_caps_kos.txt), so at most 100.
LOCAL_SWEEPS_MAX = 100


def check_inner(value, name, minimum=1, maximum=INNER_MAX):
    """An integer in [minimum, maximum] counting work inside one iteration,
    else ValueError/TypeError naming ``name``."""
    return check_int(value, name, minimum, maximum=maximum,
                     reason="work inside one iteration, where max_seconds is not checked: see docs/numerics.md")


def memory_limit():
    """Bytes a fit may allocate: the machine's physical memory (``os.sysconf``),
    or less when the process's address space is limited (``RLIMIT_AS``, less
    what the process has mapped already). None when neither is known."""
    limits = []
    try:
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        pass
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):
        soft = None
    if soft is not None and soft != resource.RLIM_INFINITY:
        try:
            with open("/proc/self/statm") as f:
                mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, AttributeError):
            mapped = 0
        limits.append(max(soft - mapped, 0))
    return min(limits) if limits else None


def check_memory(n_bytes, setting, X=None):
    """Refuse a fit whose arrays exceed :func:`memory_limit`: ``n_bytes`` is the
    estimator's estimate of what its fit allocates (a one-line formula over the
    arrays that grow with the settings and the corpus ``X``), ``setting`` names
    the settings that make it large. A ValueError names them, the corpus sizes
    and the bytes, before anything is allocated."""
    n_bytes = int(n_bytes)
    limit = memory_limit()
    if limit is not None and n_bytes > limit:
        sizes = "" if X is None else (f" on {X.n_docs} documents, {X.n_words} words, {X.nnz} (document, word) "
                                      f"pairs and {X.n_tokens} tokens")
        raise ValueError(f"{setting}{sizes}: needs about {n_bytes / 2 ** 30:.3g} GiB ({n_bytes} bytes), more than "
                         f"the {limit / 2 ** 30:.3g} GiB ({limit} bytes) this process can have (physical memory, or "
                         "its address-space limit)")
    return n_bytes


# Largest init_scale of the truncated online estimators (docs/numerics.md): lambda
# starts at about init_scale * n / (T W) per entry, so its row sums are about
# init_scale * n / T; at 1.7e308 they overflowed (NaN topics), at 1e100 they stay
# below 1e112 for any corpus of up to 1e12 documents.
INIT_SCALE_MAX = 1e100


def check_init_scale(value):
    """``init_scale`` in [0, INIT_SCALE_MAX], else ValueError naming it."""
    return check_positive(value, "init_scale", allow_zero=True, maximum=INIT_SCALE_MAX,
                          reason="the initial topics' sums over the vocabulary (about init_scale * n_docs / "
                                 "n_components) would overflow (see docs/numerics.md)")


def check_iterable(items, what):
    """``iter(items)``; a single str or bytes, or a non-iterable, is a TypeError naming ``what``."""
    if isinstance(items, (str, bytes)):
        raise TypeError(f"{what} is a single {type(items).__name__}; give a list (or other iterable) of them")
    try:
        return iter(items)
    except TypeError:
        raise TypeError(f"{what} must be an iterable, got {type(items).__name__}") from None


# Word ids are int32 in every kernel: a wider vocabulary would wrap around.
MAX_WORDS = np.iinfo(np.int32).max


def check_n_words(n_words):
    """``n_words``, a vocabulary size whose word ids fit the kernels' int32, else ValueError."""
    if n_words > MAX_WORDS:
        raise ValueError(f"a vocabulary of {n_words} words exceeds the largest supported, {MAX_WORDS} "
                         "(word ids are 32-bit)")
    return n_words
