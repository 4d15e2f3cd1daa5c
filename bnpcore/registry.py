"""The model registry: the estimators that ``bnpcore fit --model NAME`` trains,
``bnpcore list`` prints and the estimator contract suite (``tests/api``) checks.

An entry is a :class:`Model`: the estimator class (or its ``"module:Class"``
path, imported only when used), the constructor arguments ``bnpcore fit`` gives
it on the bundled KOS corpus, and optional overrides for fast fits on tiny
corpora (the contract tests). Everything else comes from the estimator protocol
(``bnpcore.base``): the parameter names, the iteration parameter that
``--iterations`` sets (the class attribute ``_iterations``), ``random_state``
(``--seed``) and ``n_threads`` (``--threads``).

Registering an estimator
------------------------
In the running program (a script, a notebook, a test)::

    from bnpcore import registry
    registry.register("unigram-mixture", UnigramMixture, {"n_components": 20},
                      test_kwargs={"n_components": 4, "max_iter": 8})

From an installed package, with no import of it needed: an entry point of the
group ``bnpcore.estimators`` (:data:`ENTRY_POINT_GROUP`) in its
``pyproject.toml``; the entry point's name is the model's name::

    [project.entry-points."bnpcore.estimators"]
    unigram-mixture = "mypackage.models:UnigramMixture"       # the class: its defaults
    unigram-mixture-20 = "mypackage.models:UNIGRAM_20"        # a Model: with arguments

where ``UNIGRAM_20 = bnpcore.registry.Model("mypackage.models:UnigramMixture",
{"n_components": 20}, test_kwargs={"n_components": 4})``. Entry points are read
the first time the registry is asked for a name (:func:`names`, :func:`get`,
:func:`register`), and again by :func:`refresh`. An entry point that cannot be
loaded, does not name an estimator class or a :class:`Model`, or takes a name
already registered is left out with a :class:`RegistryWarning` naming it, so
that one broken package does not break ``bnpcore list``. The built-in names are
never replaced by an entry point.
"""
import dataclasses
import importlib
import importlib.metadata
import warnings

__all__ = ["Model", "RegistryWarning", "ENTRY_POINT_GROUP", "register", "unregister", "get", "names", "refresh"]

#: The entry-point group read for outside estimators.
ENTRY_POINT_GROUP = "bnpcore.estimators"


class RegistryWarning(UserWarning):
    """An entry point of :data:`ENTRY_POINT_GROUP` was left out of the registry (the message says why)."""


@dataclasses.dataclass(frozen=True)
class Model:
    """A registry entry.

    Parameters
    ----------
    path : str
        ``"module:Class"`` of the estimator (``Class`` may be dotted), imported on first use.
    kwargs : dict
        Constructor arguments of ``bnpcore fit`` (settings for the bundled KOS corpus).
    test_kwargs : dict or None
        Overrides of ``kwargs`` for fast fits (a second or less on ~40 documents):
        the contract tests build every entry with ``kwargs | test_kwargs``. When
        None they use ``kwargs`` with the iteration parameter set to 5, so give
        ``test_kwargs`` whenever other settings depend on it (burn-in, number of samples).
    cls : type or None
        The class itself, when it is at hand (:func:`register` with a class);
        ``path`` is then only what ``bnpcore list`` prints.
    """
    path: str
    kwargs: dict = dataclasses.field(default_factory=dict)
    test_kwargs: dict = None
    cls: type = dataclasses.field(default=None, repr=False, compare=False)

    def load_class(self):
        """The estimator class named by ``path`` (``ValueError`` if it cannot be imported)."""
        if self.cls is not None:
            return self.cls
        module, _, name = self.path.partition(":")
        try:
            cls = importlib.import_module(module)
            for part in name.split("."):
                cls = getattr(cls, part)
        except Exception as exc:        # any error of the import: an outside module may raise anything
            raise ValueError(f"cannot import {self.path}: {exc}") from None
        return cls

    def iteration_param(self, cls=None):
        """The name of the iteration-count parameter (the class's ``_iterations``), or None."""
        return (cls or self.load_class())._iterations

    def make(self, test=False, **overrides):
        """An estimator built with the registered keyword arguments (plus
        ``test_kwargs`` when ``test``) and ``overrides``."""
        cls = self.load_class()
        kwargs = dict(self.kwargs)
        if test:
            if self.test_kwargs is not None:
                kwargs.update(self.test_kwargs)
            elif self.iteration_param(cls) is not None:
                kwargs[self.iteration_param(cls)] = 5
        kwargs.update(overrides)
        unknown = sorted(set(kwargs) - set(cls._param_names()))
        if unknown:
            raise ValueError(f"{cls.__name__} has no parameter {', '.join(unknown)}")
        return cls(**kwargs)


class _Registry:
    """The entries (name -> Model), where each came from, and whether the entry points were read."""

    def __init__(self, entries=None, entry_points_read=False):
        self.entries = dict(entries or {})
        self.origins = dict.fromkeys(self.entries, "bnpcore")
        self.entry_points_read = entry_points_read


_REGISTRY = _Registry()


def _check_name(name):
    if not isinstance(name, str) or not name or name.startswith("-") or any(c.isspace() for c in name):
        raise ValueError(f"a model name is a non-empty string without spaces that does not start with '-', "
                         f"got {name!r}")


def _as_model(estimator, kwargs=None, test_kwargs=None):
    """A Model from a class, a ``"module:Class"`` string or a Model (then without kwargs)."""
    from bnpcore.base import BaseEstimator
    if isinstance(estimator, Model):
        if kwargs is not None or test_kwargs is not None:
            raise ValueError("give kwargs and test_kwargs in the Model, not beside it")
        kwargs, test_kwargs = estimator.kwargs, estimator.test_kwargs
    for label, value in (("kwargs", kwargs), ("test_kwargs", test_kwargs)):
        if value is not None and not (isinstance(value, dict) and all(isinstance(k, str) for k in value)):
            raise ValueError(f"{label} must be a dict of constructor arguments, got {value!r}")
    kwargs, test_kwargs = dict(kwargs or {}), None if test_kwargs is None else dict(test_kwargs)
    if isinstance(estimator, Model):
        model = dataclasses.replace(estimator, kwargs=kwargs, test_kwargs=test_kwargs)
    elif isinstance(estimator, type) and issubclass(estimator, BaseEstimator):
        model = Model(f"{estimator.__module__}:{estimator.__qualname__}", kwargs, test_kwargs, cls=estimator)
    elif isinstance(estimator, str) and ":" in estimator:
        model = Model(estimator, kwargs, test_kwargs)
    else:
        raise ValueError(f"expected an estimator class (a subclass of bnpcore.base.BaseEstimator), a "
                         f"'module:Class' string or a bnpcore.registry.Model, got {estimator!r}")
    if model.cls is not None:
        unknown = sorted((set(model.kwargs) | set(model.test_kwargs or {})) - set(model.cls._param_names()))
        if unknown:
            raise ValueError(f"{model.cls.__name__} has no parameter {', '.join(unknown)}")
    return model


def _add(name, estimator, kwargs=None, test_kwargs=None):
    """Register a built-in estimator (no entry points read)."""
    _REGISTRY.entries[name] = _as_model(estimator, kwargs, test_kwargs)
    _REGISTRY.origins[name] = "bnpcore"


def _read_entry_points():
    """Add the entry points of ENTRY_POINT_GROUP that load, warning about the others."""
    registry = _REGISTRY
    registry.entry_points_read = True
    for ep in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name):
        dist = getattr(ep.dist, "name", None)
        where = f"entry point '{ep.name} = {ep.value}'" + (f" of {dist}" if dist else "")
        try:
            _check_name(ep.name)
            if ep.name in registry.entries:
                raise ValueError(f"the name {ep.name!r} is taken (by {registry.origins[ep.name]})")
            obj = ep.load()
            model = _as_model(obj)
            if model.cls is not None and ":" in ep.value:
                model = dataclasses.replace(model, path=ep.value)
        except Exception as exc:        # a broken outside package must not break the registry
            warnings.warn(f"bnpcore.registry: {where} is left out: {type(exc).__name__}: {exc}",
                          RegistryWarning, stacklevel=3)
            continue
        registry.entries[ep.name] = model
        registry.origins[ep.name] = where


def _loaded():
    if not _REGISTRY.entry_points_read:
        _read_entry_points()
    return _REGISTRY


def register(name, estimator, kwargs=None, test_kwargs=None, *, replace=False):
    """Add an estimator to the registry under ``name`` and return its :class:`Model`.

    Parameters
    ----------
    name : str
        The model's name (``bnpcore fit --model NAME``): no spaces, not starting with '-'.
    estimator : class, str or Model
        A subclass of ``bnpcore.base.BaseEstimator``, its ``"module:Class"``
        path (imported on first use), or a complete :class:`Model` (then give no
        ``kwargs``/``test_kwargs``).
    kwargs : dict, optional
        Constructor arguments of ``bnpcore fit``.
    test_kwargs : dict, optional
        Overrides of ``kwargs`` for fast fits on tiny corpora (see :class:`Model`).
    replace : bool
        Replace an entry of the same name instead of raising ``ValueError``.

    Returns
    -------
    Model
        The new entry.
    """
    _check_name(name)
    model = _as_model(estimator, kwargs, test_kwargs)
    registry = _loaded()
    if name in registry.entries and not replace:
        raise ValueError(f"model {name!r} is already registered (by {registry.origins[name]}); "
                         f"pass replace=True to replace it")
    registry.entries[name] = model
    registry.origins[name] = "register()"
    return model


def unregister(name):
    """Remove ``name`` from the registry (``ValueError`` if it is not registered)."""
    get(name)
    del _REGISTRY.entries[name]
    del _REGISTRY.origins[name]


def get(name):
    """The :class:`Model` registered as ``name`` (``ValueError`` naming the available ones if none)."""
    registry = _loaded()
    if name not in registry.entries:
        known = ", ".join(sorted(registry.entries)) or "none are registered"
        raise ValueError(f"unknown model {name!r} (available: {known})")
    return registry.entries[name]


def names():
    """The registered names, sorted: the built-in ones, the entry points' and those added by :func:`register`."""
    return sorted(_loaded().entries)


def refresh():
    """Read the entry points again (after installing a package in a running
    program): entries of entry points that are gone are removed, new ones added.
    The built-in entries and those added by :func:`register` stay."""
    registry = _REGISTRY
    for name in [n for n, origin in registry.origins.items() if origin.startswith("entry point")]:
        del registry.entries[name]
        del registry.origins[name]
    _read_entry_points()


# -- the built-in estimators ------------------------------------------------------
# An estimator is registered once it passes the contract suite of tests/api
# (history through BaseEstimator._report, test_kwargs for tiny corpora).

# LDA family ([HYB] Welling, Teh & Kappen 2008, its KOS defaults: K = 10, alpha = eta = 0.1, 300 iterations).
_LDA_KOS = {"n_components": 10, "alpha": 0.1, "eta": 0.1, "max_iter": 300}
_LDA_SAMPLER_TEST = {"max_iter": 5, "burn_in": 2}
_add("lda-cgs", "bnpcore.lda:CollapsedGibbs", _LDA_KOS, _LDA_SAMPLER_TEST)
_add("lda-svb", "bnpcore.lda:StandardVB", _LDA_KOS, {"max_iter": 5})
_add("lda-cvb", "bnpcore.lda:CollapsedVB", _LDA_KOS, {"max_iter": 5})
_add("lda-cvb0", "bnpcore.lda:CollapsedVB", {**_LDA_KOS, "order": 0}, {"max_iter": 5})
_add("lda-svb-cgs", "bnpcore.lda:Hybrid", _LDA_KOS, _LDA_SAMPLER_TEST)
_add("lda-cvb-cgs", "bnpcore.lda:Hybrid", {**_LDA_KOS, "variational": "collapsed"}, _LDA_SAMPLER_TEST)
_add("lda-pcgs", "bnpcore.lda:PartiallyCollapsedGibbs", _LDA_KOS, _LDA_SAMPLER_TEST)
# the doubly sparse Poisson Polya urn (Terenin et al. 2019): approximate, a sweep costs O(entries) not O(W K)
_add("lda-pcgs-ppu", "bnpcore.lda:PartiallyCollapsedGibbs", {**_LDA_KOS, "phi": "ppu"}, _LDA_SAMPLER_TEST)

# Truncation-free SVI and its truncated stochastic mean-field baselines ([TF] Wang & Blei 2012, §3 settings).
_add("dp-tf-svi", "bnpcore.mixture:TruncationFreeSVI", {"eta": 0.5, "a": 1.0, "batch_size": 100, "n_epochs": 20},
     {"batch_size": 5, "n_epochs": 2})
_add("dp-svb", "bnpcore.mixture:StochasticVB",
     {"n_components": 300, "eta": 0.5, "a": 1.0, "batch_size": 100, "n_epochs": 20},
     {"n_components": 5, "batch_size": 5, "n_epochs": 2})
# The HDP estimators at bnpcore's defaults (docs/choosing.md lists them and what they reach on KOS): [TF] §3's
# TF-SVI settings (eta = 0.01, gamma = 1, one sample) stay at about 18 topics on KOS; the reference start of the
# online HDP collapses to one topic.
_add("hdp-tf-svi", "bnpcore.hdp:TruncationFreeSVI", {}, {"batch_size": 5, "n_epochs": 2, "heldout_samples": 20})
_add("hdp-online-vb", "bnpcore.hdp:OnlineVB", {},
     {"n_components": 5, "n_atoms": 3, "batch_size": 5, "n_epochs": 2, "heldout_samples": 20})

# NGGP mixtures ([NRM] Tank, Foti & Fox 2015, Table 1 on KOS: eta = 0.1; IG prior sigma = 0.5, a = 10, tau = 100).
# ADF reports once per block of merge_every documents: small blocks give tiny corpora several.
_NRM_KOS = {"a": 10.0, "sigma": 0.5, "tau": 100.0, "eta": 0.1}
_add("adf-nrm", "bnpcore.mixture:ADF", _NRM_KOS, {"merge_every": 10})
_add("ep-nrm", "bnpcore.mixture:EP", {**_NRM_KOS, "max_iter": 50}, {"max_iter": 3, "merge_every": 10})
_add("gibbs-nrm", "bnpcore.mixture:CollapsedGibbs", {**_NRM_KOS, "max_iter": 215}, {"max_iter": 5, "n_samples": 2})

# HDP by collapsed inference ([CVHDP] Teh, Kurihara & Welling 2007, settings for KOS: eta_tot = 100, tau = 1/W fixed;
# G-HDP from 100 topics, CV-HDP truncated at 120 topics).
_add("hdp-gibbs", "bnpcore.hdp:DirectAssignmentGibbs", {"n_components": 100, "max_iter": 500, "eta_tot": 100.0},
     {"n_components": 3, "max_iter": 5, "burn_in": 2})
# PC-HDP at its defaults (the paper's eta = 0.01, from 100 topics), concentrations resampled.
_add("hdp-pcgs", "bnpcore.hdp:PartiallyCollapsedGibbs", {}, {"n_components": 3, "max_iter": 5, "burn_in": 2})
# CV-HDP at its defaults: started from a G-HDP sample, which also sets the truncation (a fixed K = 120 filled
# every slot on a corpus of 50,000 documents).
_add("hdp-cvb", "bnpcore.hdp:CollapsedVB", {}, {"max_iter": 3, "init_gibbs_iter": 5})

# Direct-assignment HDP with split-merge moves ([SM] Bryant & Sudderth 2012, section 4: rho_t = (1 + t)^-0.5,
# alpha = gamma = 1 learned, eta = 0.01 for text; minibatches of 100 documents).
_add("hdp-da-sm", "bnpcore.hdp:DirectAssignmentVB", {"n_components": 10, "max_iter": 10},
     {"n_components": 3, "batch_size": 5, "max_iter": 2})
_add("hdp-da-batch", "bnpcore.hdp:DirectAssignmentVB", {"n_components": 10, "mode": "batch", "max_iter": 50},
     {"n_components": 3, "max_iter": 3})
