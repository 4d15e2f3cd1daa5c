"""Command line: ``bnpcore fit | topics | evaluate | list`` (also ``python -m bnpcore``).

Registering an estimator
------------------------
Every algorithm family adds its estimators to ``MODELS``: name -> entry, where
an entry is either a tuple

    MODELS["hdp-cvb"] = ("bnpcore.hdp:CollapsedVB", {"max_iter": 300})
    MODELS["hdp-cvb"] = ("bnpcore.hdp:CollapsedVB", {"max_iter": 300}, {"max_iter": 5, "n_components": 5})

or the same as a :class:`Model`:

* ``"module:Class"``: the estimator class (imported only when used);
* ``kwargs``: constructor arguments for the bundled KOS corpus (``bnpcore fit``);
* ``test_kwargs``: overrides of ``kwargs`` for fast fits on tiny corpora (a
  second or less on ~40 documents); the contract tests in ``tests/api/`` build
  every registered model with ``kwargs | test_kwargs``. When absent they use
  ``kwargs`` with the iteration parameter set to 5, so give ``test_kwargs``
  whenever other settings depend on it (burn-in, number of samples).

Everything else comes from the estimator protocol (``bnpcore.base``): the
parameter names (``get_params``), the iteration parameter that
``--iterations`` sets and the progress bar counts (the class attribute
``_iterations``: ``max_iter`` for batch estimators, ``n_epochs`` for online
ones), ``random_state`` (``--seed``) and ``n_threads`` (``--threads``).

``FLAGSHIP`` names the model ``bnpcore fit`` trains when ``--model`` is not given.

Progress comes from the estimator's ``_report`` calls (``bnpcore.base``): the
command line installs a progress-bar callback with ``estimator.reporting``.
Errors are printed as one line on stderr with exit status 2 (set the
environment variable ``BNPCORE_DEBUG=1`` to see the traceback instead).
"""
import argparse
import ast
import contextlib
import dataclasses
import importlib
import inspect
import os
import sys
import time

import numpy as np

from bnpcore import __version__
from bnpcore.base import TopicMixin
from bnpcore.inference.batch import BatchEstimator, InitFromMixin
from bnpcore.inference.callbacks import Progress

__all__ = ["MODELS", "FLAGSHIP", "Model", "get_model", "load_data", "heldout_score", "main"]


@dataclasses.dataclass(frozen=True)
class Model:
    """A registry entry (see the module docstring)."""
    path: str
    kwargs: dict = dataclasses.field(default_factory=dict)
    test_kwargs: dict = None

    def load_class(self):
        """The estimator class named by ``path`` (``ValueError`` if it cannot be imported)."""
        module, _, name = self.path.partition(":")
        try:
            cls = importlib.import_module(module)
            for part in name.split("."):
                cls = getattr(cls, part)
        except (ImportError, AttributeError) as exc:
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


# Estimators the command line can train: name -> ("module:Class", default keyword
# arguments for the bundled KOS corpus). Every algorithm family registers here.
MODELS = {}
# An estimator is registered once it passes the contract suite of tests/api
# (history through BaseEstimator._report, test_kwargs for tiny corpora).

# LDA family (paper 004 defaults for KOS: K = 10, alpha = eta = 0.1, 300 iterations);
# third element: overrides for quick fits on tiny corpora.
_LDA_SAMPLER_TEST = {"max_iter": 5, "burn_in": 2}
MODELS.update({
    "lda-cgs": ("bnpcore.lda:CollapsedGibbs", {"n_components": 10, "alpha": 0.1, "eta": 0.1, "max_iter": 300},
                _LDA_SAMPLER_TEST),
    "lda-svb": ("bnpcore.lda:StandardVB", {"n_components": 10, "alpha": 0.1, "eta": 0.1, "max_iter": 300},
                {"max_iter": 5}),
    "lda-cvb": ("bnpcore.lda:CollapsedVB", {"n_components": 10, "alpha": 0.1, "eta": 0.1, "max_iter": 300},
                {"max_iter": 5}),
    "lda-cvb0": ("bnpcore.lda:CollapsedVB", {"n_components": 10, "alpha": 0.1, "eta": 0.1, "order": 0,
                                             "max_iter": 300}, {"max_iter": 5}),
    "lda-svb-cgs": ("bnpcore.lda:Hybrid", {"n_components": 10, "alpha": 0.1, "eta": 0.1, "max_iter": 300},
                    _LDA_SAMPLER_TEST),
    "lda-cvb-cgs": ("bnpcore.lda:Hybrid", {"n_components": 10, "alpha": 0.1, "eta": 0.1,
                                           "variational": "collapsed", "max_iter": 300}, _LDA_SAMPLER_TEST),
})
MODELS["lda-pcgs"] = ("bnpcore.lda:PartiallyCollapsedGibbs", {"n_components": 10, "alpha": 0.1, "eta": 0.1,
                                                             "max_iter": 300}, _LDA_SAMPLER_TEST)
# the doubly sparse Poisson Polya urn (Terenin et al. 2019): approximate, a sweep costs O(entries) not O(W K)
MODELS["lda-pcgs-ppu"] = ("bnpcore.lda:PartiallyCollapsedGibbs", {"n_components": 10, "alpha": 0.1, "eta": 0.1,
                                                                 "max_iter": 300, "phi": "ppu"}, _LDA_SAMPLER_TEST)

# Truncation-free SVI and its truncated stochastic mean-field baselines ([TF] 000 §3 settings).
MODELS["dp-tf-svi"] = ("bnpcore.mixture:TruncationFreeSVI", {"eta": 0.5, "a": 1.0, "batch_size": 100, "n_epochs": 20},
                       {"batch_size": 5, "n_epochs": 2})
MODELS["dp-svb"] = ("bnpcore.mixture:StochasticVB", {"n_components": 300, "eta": 0.5, "a": 1.0, "batch_size": 100,
                                                     "n_epochs": 20}, {"n_components": 5, "batch_size": 5,
                                                                       "n_epochs": 2})
# The HDP estimators at bnpcore's defaults (issue 17): [TF] §3's TF-SVI settings (eta = 0.01, gamma = 1, one
# sample) stay at about 18 topics on KOS; the reference start of the online HDP collapses to one topic.
MODELS["hdp-tf-svi"] = ("bnpcore.hdp:TruncationFreeSVI", {"eta": 0.05, "gamma": 30.0, "alpha": 1.0, "n_samples": 5,
                                                          "batch_size": 100, "n_epochs": 20},
                        {"batch_size": 5, "n_epochs": 2, "heldout_samples": 20})
MODELS["hdp-online-vb"] = ("bnpcore.hdp:OnlineVB", {"n_components": 300, "n_atoms": 15, "eta": 0.01, "gamma": 1.0,
                                                    "alpha": 1.0, "doc_init": "ranked", "batch_size": 100,
                                                    "n_epochs": 20},
                           {"n_components": 5, "n_atoms": 3, "batch_size": 5, "n_epochs": 2, "heldout_samples": 20})

# NGGP mixtures ([NRM] 002 Table 1 on KOS: eta = 0.1; IG prior sigma = 0.5, a = 10, tau = 100).
# ADF reports once per block of merge_every documents: small blocks give tiny corpora several.
_NRM_KOS = {"a": 10.0, "sigma": 0.5, "tau": 100.0, "eta": 0.1}
MODELS["adf-nrm"] = ("bnpcore.mixture:ADF", _NRM_KOS, {"merge_every": 10})
MODELS["ep-nrm"] = ("bnpcore.mixture:EP", {**_NRM_KOS, "max_iter": 50}, {"max_iter": 3, "merge_every": 10})
MODELS["gibbs-nrm"] = ("bnpcore.mixture:CollapsedGibbs", {**_NRM_KOS, "max_iter": 215, "n_samples": 50},
                       {"max_iter": 5, "n_samples": 2})

# HDP by collapsed inference ([CVHDP] 001 settings for KOS: eta_tot = 100, tau = 1/W fixed;
# G-HDP from 100 topics, CV-HDP truncated at 120 topics).
MODELS["hdp-gibbs"] = ("bnpcore.hdp:DirectAssignmentGibbs",
                       {"n_components": 100, "max_iter": 500, "burn_in": 200, "eta_tot": 100.0},
                       {"n_components": 3, "max_iter": 5, "burn_in": 2})
# PC-HDP at the paper's settings (eta = 0.01, from one topic), concentrations resampled.
MODELS["hdp-pcgs"] = ("bnpcore.hdp:PartiallyCollapsedGibbs", {"max_iter": 1000, "burn_in": 200, "eta": 0.01},
                      {"n_components": 3, "max_iter": 5, "burn_in": 2})
MODELS["hdp-cvb"] = ("bnpcore.hdp:CollapsedVB", {"n_components": 120, "max_iter": 100, "eta_tot": 100.0},
                     {"n_components": 5, "max_iter": 5})

# Direct-assignment HDP with split-merge moves ([SM] 003 section 4: rho_t = (1 + t)^-0.5,
# alpha = gamma = 1 learned, eta = 0.01 for text; minibatches of 100 documents).
MODELS["hdp-da-sm"] = ("bnpcore.hdp:DirectAssignmentVB", {"n_components": 10, "max_iter": 10},
                       {"n_components": 3, "batch_size": 5, "max_iter": 2})
MODELS["hdp-da-batch"] = ("bnpcore.hdp:DirectAssignmentVB", {"n_components": 10, "mode": "batch", "max_iter": 50},
                          {"n_components": 3, "max_iter": 3})

# The model ``bnpcore fit`` trains when none is named.
FLAGSHIP = "hdp-gibbs"


def get_model(name):
    """The registry entry ``name`` as a :class:`Model`."""
    if name not in MODELS:
        known = ", ".join(sorted(MODELS)) or "none are registered"
        raise ValueError(f"unknown model {name!r} (available: {known})")
    entry = MODELS[name]
    if isinstance(entry, Model):
        return entry
    if isinstance(entry, tuple) and len(entry) in (2, 3) and isinstance(entry[0], str):
        return Model(*entry)
    raise ValueError(f"bad registry entry for {name!r}: expected ('module:Class', kwargs[, test_kwargs]) "
                     f"or Model(...), got {entry!r}")


# -- data ----------------------------------------------------------------------
def load_data(spec="kos", vocab=None):
    """A Corpus from a name or a path: ``"kos"`` (bundled,
    ``bnpcore.datasets.load_kos``), ``"bars"`` (``bnpcore.datasets.make_bars()``
    with ``random_state=0``, so fit and evaluate see the same documents), an
    on-disk corpus directory (``Corpus.open``, see ``bnpcore corpus``) or a UCI
    ``docword.*.txt[.gz]`` file with an optional ``vocab.*.txt``."""
    from bnpcore import datasets
    from bnpcore.corpus import Corpus
    if spec in ("kos", "bars") or os.path.isdir(spec):
        if vocab is not None:
            raise ValueError(f"--vocab applies to UCI files, not to {spec!r}")
        if os.path.isdir(spec):
            return Corpus.open(spec)
        return datasets.load_kos() if spec == "kos" else datasets.make_bars(random_state=0).corpus
    if not os.path.isfile(spec):
        raise ValueError(f"--data must be 'kos', 'bars', an on-disk corpus directory or an existing UCI docword "
                         f"file, got {spec!r}")
    if vocab is not None and not os.path.isfile(vocab):
        raise ValueError(f"vocabulary file {vocab!r} does not exist")
    return Corpus.from_uci(spec, vocab)


def _load_args_data(args, vocabulary=None):
    """(corpus, label) from --data/--vocab or --texts/--lines (the model's
    ``vocabulary`` fixes the words of texts to evaluate)."""
    if args.texts is None:
        if args.lines or args.min_df is not None or args.max_df is not None:
            raise _Error("--lines, --min-df and --max-df apply to --texts")
        data = "kos" if args.data is None else args.data
        return load_data(data, args.vocab), data
    from bnpcore.corpus import Corpus
    from bnpcore.text import read_texts
    if args.data is not None or args.vocab is not None:
        raise _Error("give either --texts or --data/--vocab, not both")
    if vocabulary is not None and (args.min_df is not None or args.max_df is not None):
        raise _Error("--min-df and --max-df do not apply to evaluate: the model's vocabulary is used")
    if vocabulary is not None:
        return Corpus.from_texts(read_texts(args.texts, lines=args.lines), vocabulary=vocabulary), args.texts
    pruning = {k: v for k, v in (("min_df", args.min_df), ("max_df", args.max_df)) if v is not None}
    return Corpus.from_texts(read_texts(args.texts, lines=args.lines), **pruning), args.texts


# -- commands --------------------------------------------------------------------
class _Error(Exception):
    """A user-facing error: printed as one line, exit status 2."""


def _parse_value(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _split(corpus, args):
    return corpus.split_tokens(args.heldout, random_state=args.split_seed)


def _topic_mass(doc_topic, corpus):
    """Expected tokens of each topic in ``corpus``: sum_j N_j theta_jk."""
    return corpus.doc_lengths @ doc_topic


def _print_topics(est, order, n_words, mass=None):
    total = mass.sum() if mass is not None else None
    for k in order:
        share = f" ({100 * mass[k] / total:4.1f}%)" if mass is not None and total > 0 else ""
        print(f"  topic {k:3d}{share}: {' '.join(est.top_words(int(k), n_words))}")


def heldout_score(est, observed, heldout, doc_topic=None):
    """``est.heldout_log_likelihood(observed, heldout)``, reusing an already
    computed ``doc_topic = est.transform(observed)`` when the estimator keeps
    TopicMixin's default (transform + token_log_likelihood)."""
    if doc_topic is not None and type(est).heldout_log_likelihood is TopicMixin.heldout_log_likelihood:
        from bnpcore.evaluation import token_log_likelihood
        return token_log_likelihood(doc_topic, est.get_topics(), heldout)
    return est.heldout_log_likelihood(observed, heldout)


def _print_score(est, observed, heldout, doc_topic=None):
    ll = heldout_score(est, observed, heldout, doc_topic)
    print(f"held-out per-word log-likelihood: {ll:.4f} (perplexity {np.exp(-ll):.1f}) "
          f"on {heldout.n_tokens} tokens")
    return ll


def cmd_fit(args):
    name = args.model or FLAGSHIP
    if name is None:
        if not MODELS:
            raise _Error("no models are registered in this bnpcore build")
        raise _Error(f"no flagship model is set; choose one with --model ({', '.join(sorted(MODELS))})")
    spec = get_model(name)
    cls = spec.load_class()
    params = cls._param_names()
    overrides = dict(args.param)
    if args.iterations is not None:
        it_name = spec.iteration_param(cls)
        if it_name is None:
            raise _Error(f"model {name} has no iteration parameter; set one with --param")
        overrides[it_name] = args.iterations
    if "random_state" in params:
        overrides.setdefault("random_state", 0 if args.seed is None else args.seed)
    elif args.seed is not None:
        raise _Error(f"model {name} does not take --seed (no random_state parameter)")
    if args.threads is not None:
        if "n_threads" not in params:
            raise _Error(f"model {name} does not take --threads (no n_threads parameter)")
        overrides["n_threads"] = args.threads
    if args.n_topics is not None:
        if "n_components" not in params:
            raise _Error(f"model {name} has no fixed number of topics (it finds them); --n-topics does not apply")
        overrides["n_components"] = args.n_topics
    est = spec.make(**overrides)
    if args.scheduler:
        _check_distributed(est, name)
    fit_kwargs = {}
    if args.init_from:
        if not isinstance(est, InitFromMixin):
            raise _Error(f"model {name} does not take --init-from (its fit has no init_from)")
        if args.scheduler:
            raise _Error("--init-from does not run with --scheduler")
        fit_kwargs["init_from"] = _load_topic_model(args.init_from)
    for path in (args.output, args.report):
        if path:
            _check_writable(path)
    if args.report:
        _check_report(args.report)
    corpus, label = _load_args_data(args)
    # --heldout 0: the corpus itself (an on-disk one stays on disk: with --scheduler the workers read it)
    observed, heldout = (corpus, None) if args.heldout == 0 else _split(corpus, args)
    it_name = spec.iteration_param(cls)
    total = getattr(est, it_name, None) if it_name else None
    total = total if isinstance(total, int) else None
    print(f"fitting {name} ({spec.path}) on {label}: {corpus.n_docs} documents, {corpus.n_words} words, "
          f"{observed.n_tokens} training and {heldout.n_tokens if heldout else 0} held-out tokens")
    _print_differences(est, cls)
    if args.report and heldout is not None and isinstance(est, BatchEstimator):
        # a held-out trace for the report: about 20 evaluations (batch fits score the held-out tokens)
        fit_kwargs.update(heldout=heldout, eval_every=max(1, (total or 1) // 20))
    if it_name == "n_epochs":       # online: minibatches are the iterations, documents the progress
        progress = Progress(total and total * observed.n_docs, desc=name, key="n_documents", enabled=not args.quiet)
    else:
        progress = Progress(total, desc=name, enabled=not args.quiet)
    start = time.perf_counter()
    try:
        with est.reporting(progress):
            if args.scheduler:
                _fit_distributed(est, observed, args.scheduler)
            else:
                est.fit(observed, **fit_kwargs)
    finally:
        progress.close()
    seconds = time.perf_counter() - start
    n_iter = len(getattr(est, "history_", None) or [])
    rate = f" ({n_iter} iterations, {observed.n_tokens * n_iter / seconds:,.0f} tokens/s)" if n_iter else ""
    print(f"fitted in {seconds:.1f} s{rate}")
    if args.output:                  # first: nothing after the fit may lose it
        try:
            est.save(args.output)
        except OSError as exc:
            raise _Error(f"cannot save the model to {args.output}: {exc.strerror or exc}") from None
        print(f"saved to {args.output}")
    score = None
    if isinstance(est, TopicMixin):
        doc_topic = est.transform(observed)
        mass = _topic_mass(doc_topic, observed)
        order = np.argsort(-mass, kind="stable")[:args.show]
        print(f"{est.get_topics().shape[0]} topics; the {len(order)} largest (share of training tokens):")
        _print_topics(est, order, args.n_words, mass)
        score = _print_score(est, observed, heldout, doc_topic) if heldout is not None else None
    if args.report:
        from bnpcore.report import write_report
        facts = {"data": f"{label}: {corpus.n_docs} documents, {corpus.n_words} words",
                 "fit": f"{seconds:.1f} s{rate}"}
        if score is not None:
            facts["held-out per-word log-likelihood"] = f"{score:.4f} on {heldout.n_tokens} tokens"
        write_report(est, args.report, observed, title=f"bnpcore fit --model {name}", facts=facts,
                     n=max(args.show, 1), n_words=args.n_words)
        print(f"report written to {args.report}")
    return 0


def _check_distributed(est, name):
    from bnpcore import distributed
    try:
        distributed.check_supported(est)
    except (TypeError, ValueError) as exc:
        raise _Error(f"--scheduler cannot run model {name}: {exc}") from None


def _fit_distributed(est, corpus, address):
    """``bnpcore.distributed.fit`` on the cluster of the scheduler at ``address``."""
    from bnpcore import distributed
    Client, _ = distributed.import_dask()
    with Client(address) as client:
        distributed.fit(est, corpus, client)


def _print_differences(est, cls):
    """Print the settings in which the command line differs from ``cls()``
    (the registry's defaults for KOS, --seed's 0, the options given)."""
    python = cls().get_params()
    changed = [f"{k}={v!r} (Python: {python[k]!r})" for k, v in est.get_params().items()
               if not _same(v, python.get(k))]
    if changed:
        print(f"settings differing from {cls.__name__}()'s defaults: {', '.join(changed)}")


def _same(a, b):
    try:
        return bool(np.all(a == b)) and type(a) is type(b)
    except (TypeError, ValueError):
        return False


def _check_report(path):
    """Fail before a long fit when --report cannot be written."""
    if os.path.splitext(path)[1].lower() not in (".html", ".htm", ".png"):
        raise _Error(f"--report must name a .html or .png file, got {path!r}")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise _Error("--report needs matplotlib: pip install bnpcore[plot]") from None


def _check_writable(path):
    """Fail before a long fit when ``-o PATH`` cannot be written."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise _Error(f"cannot save the model to {path}: it is a directory")
    if not os.path.isdir(directory):
        raise _Error(f"cannot save the model to {path}: no directory {directory}")
    if not os.access(directory, os.W_OK):
        raise _Error(f"cannot save the model to {path}: the directory is not writable")


def _load_topic_model(path):
    from bnpcore.base import load
    try:
        est = load(path)
    except FileNotFoundError:
        raise _Error(f"model file {path!r} does not exist") from None
    if not isinstance(est, TopicMixin):
        raise _Error(f"{path} holds a {type(est).__name__}, which has no topics")
    return est


def cmd_topics(args):
    est = _load_topic_model(args.model)
    n = est.get_topics().shape[0]
    count = n if args.show < 0 else min(args.show, n)
    print(f"{type(est).__name__}: {n} topics")
    _print_topics(est, range(count), args.n_words)
    return 0


def cmd_evaluate(args):
    est = _load_topic_model(args.model)
    if args.texts is not None and getattr(est, "vocabulary_", None) is None:
        raise _Error(f"{args.model} has no vocabulary, so texts cannot be counted for it")
    corpus, _ = _load_args_data(args, getattr(est, "vocabulary_", None) if args.texts is not None else None)
    n_words = est.get_topics().shape[1]
    if corpus.n_words != n_words:
        raise _Error(f"the model has {n_words} words, the data {corpus.n_words}")
    _print_score(est, *_split(corpus, args))
    return 0


def cmd_corpus(args):
    from bnpcore.corpus import write
    options = {k: v for k, v in (("min_df", args.min_df), ("max_df", args.max_df)) if v is not None}
    corpus = write(args.source, args.dest, vocab_path=args.vocab, lines=args.lines, **options)
    size = sum(f.stat().st_size for f in os.scandir(args.dest))
    print(f"wrote {args.dest}: {corpus.n_docs} documents, {corpus.n_words} words, {corpus.n_tokens} tokens "
          f"({size / 2**20:.1f} MiB)")
    return 0


def cmd_list(args):
    if not MODELS:
        print("no models are registered in this bnpcore build")
        return 0
    for name in sorted(MODELS):
        spec = get_model(name)
        try:
            doc = " ".join((inspect.getdoc(spec.load_class()) or "").split("\n\n")[0].split())
        except ValueError as exc:
            doc = f"(unavailable: {exc})"
        mark = "*" if name == FLAGSHIP else " "
        print(f"{mark} {name:20} {spec.path:36} {doc}")
    return 0


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _Error(f"{message} (see {self.prog} --help)")


def _count(minimum):
    """argparse type: an integer >= minimum."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value
    return parse


def _doc_frequency(text):
    """argparse type of --min-df/--max-df: an int (documents) or a float (fraction)."""
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number of documents or a fraction, got {text!r}") from None


def _key_value(text):
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return key, _parse_value(value)


def build_parser():
    p = _Parser(prog="bnpcore", description="Bayesian nonparametric topic models on bag-of-words data.")
    p.add_argument("--version", action="version", version=f"bnpcore {__version__}")
    sub = p.add_subparsers(dest="command", metavar="{fit,topics,evaluate,corpus,list}", parser_class=_Parser)

    def data_options(q):
        q.add_argument("--data", help="'kos' (bundled, the default), 'bars' (synthetic), an on-disk corpus "
                                      "directory (see 'bnpcore corpus') or a UCI docword file")
        q.add_argument("--vocab", help="UCI vocabulary file for --data PATH")
        q.add_argument("--texts", metavar="DIR_OR_FILE",
                       help="raw UTF-8 text instead of --data: a folder (one document per file, recursively) or a "
                            "file (see --lines); tokenized by bnpcore.text.tokenize, English stop words removed")
        q.add_argument("--lines", action="store_true", help="with --texts: one document per line")
        q.add_argument("--min-df", type=_doc_frequency,
                       help="with --texts: drop words in fewer documents (int: documents, float: fraction; default 1)")
        q.add_argument("--max-df", type=_doc_frequency,
                       help="with --texts: drop words in more documents (int or fraction; default 1.0)")
        q.add_argument("--heldout", type=float, default=0.1,
                       help="fraction of each document's tokens held out for scoring (default 0.1; fit: 0 fits "
                            "every token, unscored, and with --scheduler the workers read an on-disk --data)")
        q.add_argument("--split-seed", type=int, default=0, help="seed of the token split (default 0)")

    f = sub.add_parser("fit", help="train a model (the flagship on KOS by default) and score it")
    f.add_argument("--model", help="registered model name (see 'bnpcore list')")
    data_options(f)
    f.add_argument("--iterations", type=int, help="number of iterations (sweeps, passes)")
    f.add_argument("--seed", type=int, help="random_state of the model (default 0)")
    f.add_argument("--threads", type=int, help="n_threads of the model (every registered model: -1 all cpus, "
                   "k >= 1; default OMP_NUM_THREADS or all cpus)")
    f.add_argument("--param", "-p", type=_key_value, action="append", default=[], metavar="NAME=VALUE",
                   help="any other constructor parameter (repeatable)")
    f.add_argument("--n-topics", type=_count(1),
                   help="number of topics to fit: the model's n_components (LDA: the topics; truncated "
                        "nonparametric models: the truncation; G-HDP and DirectAssignmentVB: the initial number)")
    f.add_argument("--init-from", metavar="MODEL.npz",
                   help="start from this fitted model (an 'hdp-gibbs' fit saved with --output, for the models "
                        "whose fit takes init_from: hdp-cvb with the same data and split, hdp-da-*)")
    f.add_argument("--output", "-o", help="save the fitted model to this .npz file")
    f.add_argument("--report", metavar="PATH.html|PATH.png",
                   help="write a report: topic table, held-out and topic-count traces, component sizes "
                        "(needs matplotlib; batch fits then score the held-out tokens about 20 times)")
    f.add_argument("--show", type=_count(0), default=10, help="topics to print (default 10)")
    f.add_argument("--n-words", type=_count(0), default=10, help="words per topic (default 10)")
    f.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    f.add_argument("--scheduler", metavar="ADDRESS",
                   help="fit on the Dask cluster of this scheduler (bnpcore.distributed; e.g. tcp://host:8786)")
    f.set_defaults(run=cmd_fit)

    t = sub.add_parser("topics", help="print the topics of a saved model")
    t.add_argument("model", help="model file written by 'bnpcore fit --output'")
    t.add_argument("--show", type=_count(-1), default=20, help="topics to print, -1 for all (default 20)")
    t.add_argument("--n-words", type=_count(0), default=10, help="words per topic (default 10)")
    t.set_defaults(run=cmd_topics)

    e = sub.add_parser("evaluate", help="held-out per-word log-likelihood of a saved model on data")
    e.add_argument("model", help="model file written by 'bnpcore fit --output'")
    data_options(e)
    e.set_defaults(run=cmd_evaluate)

    c = sub.add_parser("corpus", help="build an on-disk corpus (for --data) streaming, in bounded memory")
    c.add_argument("source", help="a UCI docword file (plain or gzip), a text file (--lines) or a folder of text files")
    c.add_argument("dest", help="the corpus directory to create")
    c.add_argument("--vocab", help="UCI vocabulary file")
    c.add_argument("--lines", action="store_true", help="text: one document per line")
    c.add_argument("--min-df", type=_doc_frequency, help="text: drop words in fewer documents (int or fraction)")
    c.add_argument("--max-df", type=_doc_frequency, help="text: drop words in more documents (int or fraction)")
    c.set_defaults(run=cmd_corpus)

    ls = sub.add_parser("list", help="list the registered models (* marks the flagship)")
    ls.set_defaults(run=cmd_list)
    return p


def main(argv=None):
    """Run the command line; returns the exit status (0, 2 on errors, 130 on Ctrl-C)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        return args.run(args)
    except SystemExit as exc:   # --help
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        print("bnpcore: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:          # `bnpcore list | head -1`: the reader left; exit quietly
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if os.environ.get("BNPCORE_DEBUG"):
            raise
        text = str(exc).strip().splitlines()
        message = text[0] if text else type(exc).__name__
        if not isinstance(exc, (_Error, ValueError)):
            message = f"{type(exc).__name__}: {message}"
        print(f"bnpcore: error: {message}", file=sys.stderr)
        return 2
