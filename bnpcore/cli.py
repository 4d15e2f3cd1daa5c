"""Command line: ``bnpcore fit | topics | evaluate | infer | corpus | list`` (also ``python -m bnpcore``).

The models are those of the registry (``bnpcore.registry``: the built-in
estimators, outside packages' entry points of the group ``bnpcore.estimators``
and the ones added with ``bnpcore.registry.register``). ``--iterations`` sets
the class attribute ``_iterations``'s parameter (``max_iter`` for batch
estimators, ``n_epochs`` for online ones), which the progress bar counts.

``FLAGSHIP`` names the model ``bnpcore fit`` trains when ``--model`` is not given.

Progress comes from the estimator's ``_report`` calls (``bnpcore.base``): the
command line installs a progress-bar callback with ``estimator.reporting``.
Errors are printed as one line on stderr with exit status 2 (set the
environment variable ``BNPCORE_DEBUG=1`` to see the traceback instead).
"""
import argparse
import ast
import contextlib
import inspect
import os
import signal
import sys
import tempfile
import time
import warnings

import numpy as np

from bnpcore import __version__, registry
from bnpcore.base import TopicMixin
from bnpcore.inference.batch import BatchEstimator, InitFromMixin
from bnpcore.inference.callbacks import Progress

__all__ = ["FLAGSHIP", "load_data", "heldout_score", "main"]


# The model ``bnpcore fit`` trains when none is named.
FLAGSHIP = "hdp-gibbs"


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


# The pruning of --texts when --min-df/--max-df are not given: the Python Quick start's
# Corpus.from_texts(texts, min_df=2, max_df=0.5).
TEXT_MIN_DF, TEXT_MAX_DF = 2, 0.5


def _load_args_data(args, model=None):
    """(corpus, label) from --data/--vocab or --texts/--lines (texts to evaluate
    are counted as ``model`` counts text: :func:`_count_texts`)."""
    min_df, max_df = getattr(args, "min_df", None), getattr(args, "max_df", None)   # fit only
    if args.texts is None:
        if args.lines or min_df is not None or max_df is not None:
            raise _Error("--lines, --min-df and --max-df apply to --texts")
        data = "kos" if args.data is None else args.data
        return load_data(data, args.vocab), data
    from bnpcore.corpus import Corpus
    from bnpcore.text import read_texts
    if args.data is not None or args.vocab is not None:
        raise _Error("give either --texts or --data/--vocab, not both")
    if model is not None:
        return _count_texts(model, read_texts(args.texts, lines=args.lines), args.model), args.texts
    if not args.lines:
        _warn_one_document(args.texts)
    corpus = Corpus.from_texts(read_texts(args.texts, lines=args.lines),
                               min_df=TEXT_MIN_DF if min_df is None else min_df,
                               max_df=TEXT_MAX_DF if max_df is None else max_df)
    return corpus, args.texts


def _count_texts(model, texts, path):
    """``texts`` counted in the words of ``model`` (dropping the others): by the
    text pipeline it was fitted with, or, for a model saved without one, by the
    default tokenizer of ``--texts``."""
    from bnpcore.corpus import Corpus
    from bnpcore.text import TextPipeline
    vocabulary = getattr(model, "vocabulary_", None)
    if vocabulary is None:
        raise _Error(f"{path} has no vocabulary, so texts cannot be counted for it")
    settings = getattr(model, "text_pipeline_", None)
    if settings is None:
        return Corpus.from_texts(texts, vocabulary=vocabulary)
    return TextPipeline(vocabulary, **settings).transform(texts)


def _warn_one_document(path):
    """``--texts FILE`` without ``--lines`` is one document: warn when the file has
    several lines, which is how a file of one document per line looks."""
    if not os.path.isfile(path):
        return
    n_lines, last = 0, b"\n"
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n_lines += block.count(b"\n")
            last = block[-1:]
    n_lines += last != b"\n"
    if n_lines > 1:
        print(f"bnpcore: warning: {path} is read as 1 document, but it has {_plural(n_lines, 'line')}; "
              "add --lines if each line is a document", file=sys.stderr)


def _plural(n, word):
    """``"1 document"``, ``"2 documents"``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# -- commands --------------------------------------------------------------------
class _Error(Exception):
    """A user-facing error: printed as one line, exit status 2."""


_FLOAT_NAMES = {"nan": float("nan"), "inf": float("inf"), "infinity": float("inf")}


def _parse_value(text):
    """A Python literal (``literal_eval``), where the names nan, inf and
    infinity (any case, also inside tuples and lists) are floats, so that the
    estimator's own checks refuse them by name; anything else is the string."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
        for node in ast.walk(tree):
            for field, child in ast.iter_fields(node):
                if isinstance(child, ast.Name) and child.id.lower() in _FLOAT_NAMES:
                    setattr(node, field, ast.Constant(_FLOAT_NAMES[child.id.lower()]))
                elif isinstance(child, list):
                    child[:] = [ast.Constant(_FLOAT_NAMES[c.id.lower()])
                                if isinstance(c, ast.Name) and c.id.lower() in _FLOAT_NAMES else c for c in child]
        return ast.literal_eval(tree.body)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _split(corpus, args):
    return corpus.split_tokens(args.heldout, random_state=args.split_seed)


def _topic_sizes(est):
    """The expected size of each topic of ``est`` (tokens; documents for
    mixtures): ``topic_sizes_`` of the nonparametric models
    (``bnpcore.results``), the topic-word counts of the LDA models
    (``components_`` less the prior ``eta_``), else None."""
    if hasattr(type(est), "topic_sizes_"):
        return np.asarray(est.topic_sizes_, dtype=np.float64)
    components, eta = getattr(est, "components_", None), getattr(est, "eta_", None)
    if components is not None and eta is not None:
        components = np.asarray(components, dtype=np.float64)
        prior = np.sum(eta) if np.ndim(eta) else float(eta) * components.shape[1]
        return np.maximum(components.sum(axis=1) - prior, 0.0)
    return None


def _topic_table(est, n, n_words):
    """``(title, table)``: the ``n`` largest topics of ``est`` (None: all) as a
    :class:`bnpcore.results.Summary` (rank, component, size, share, top words),
    what ``fit --show`` and ``topics`` print."""
    from bnpcore.results import Summary
    n_topics = est.get_topics().shape[0]
    sizes = _topic_sizes(est)
    if sizes is None:          # no sizes: the topics in their order, shares from weights_ when there are some
        weights = getattr(est, "weights_", None)
        shares = np.asarray(weights, dtype=np.float64) if weights is not None and len(weights) == n_topics \
            else np.full(n_topics, 1.0 / n_topics)
        order, used = np.arange(n_topics), n_topics
    else:
        total = sizes.sum()
        shares = sizes / total if total > 0 else np.zeros(n_topics)
        order = np.argsort(-sizes, kind="stable")
        used = int(np.sum(sizes >= 1.0))
        order = order[:used]
    order = order[:n] if n is not None else order
    table = Summary({"rank": i, "component": int(k), "size": float(sizes[k]) if sizes is not None else np.nan,
                     "share": float(shares[k]), "top_words": est.top_words(int(k), n_words)}
                    for i, k in enumerate(order))
    unit = getattr(est, "_size_unit", "tokens").rstrip("s")
    title = f"{_plural(n_topics, 'topic')}" + (f", {used} used (size >= 1 {unit})" if sizes is not None else "")
    if len(table):
        title += f"; the {len(table)} largest:" if len(table) < used else ":"
    return title, table


def _print_topic_table(est, n, n_words, prefix=""):
    title, table = _topic_table(est, n, n_words)
    print(prefix + title)
    if len(table):
        print("\n".join("  " + line for line in str(table).splitlines()))


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
          f"on {_plural(heldout.n_tokens, 'token')}")
    return ll


def _model_names():
    """``registry.names()``, its warnings (entry points left out) printed as ``bnpcore: warning:`` lines."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", registry.RegistryWarning)
        names = registry.names()
    for w in caught:
        if issubclass(w.category, registry.RegistryWarning):
            print(f"bnpcore: warning: {w.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return names


def cmd_fit(args):
    names = _model_names()
    name = args.model or FLAGSHIP
    if name is None:
        if not names:
            raise _Error("no models are registered in this bnpcore build")
        raise _Error(f"no flagship model is set; choose one with --model ({', '.join(names)})")
    spec = registry.get(name)
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
    if heldout is not None and heldout.n_tokens == 0:
        print(f"bnpcore: warning: --heldout {args.heldout} holds out no token of these documents (too short); "
              "fitting every token, unscored", file=sys.stderr)
        observed, heldout = corpus, None
    it_name = spec.iteration_param(cls)
    total = getattr(est, it_name, None) if it_name else None
    total = total if isinstance(total, int) else None
    print(f"fitting {name} ({spec.path}) on {label}: {_plural(corpus.n_docs, 'document')}, "
          f"{_plural(corpus.n_words, 'word')}, {observed.n_tokens} training and "
          f"{_plural(heldout.n_tokens if heldout else 0, 'held-out token')}")
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
    history = getattr(est, "history_", None) or []
    rate = f" ({_plural(len(history), 'iteration')}, {_tokens_processed(history, observed) / seconds:,.0f} " \
        "tokens/s)" if history and seconds > 0 else ""
    print(f"fitted in {seconds:.1f} s{rate}")
    if args.output:                  # first: nothing after the fit may lose it
        try:
            est.save(args.output)
        except OSError as exc:
            fallback = os.path.join(tempfile.gettempdir(), f"bnpcore-model-{os.getpid()}.npz")
            try:
                est.save(fallback)
            except OSError:
                raise _Error(f"cannot save the model to {args.output}: {exc.strerror or exc}") from None
            raise _Error(f"cannot save the model to {args.output} ({exc.strerror or exc}); saved it to {fallback} "
                         "instead") from None
        print(f"saved to {args.output}")
    score = None
    if isinstance(est, TopicMixin):
        _print_topic_table(est, args.show, args.n_words)
        score = _print_score(est, observed, heldout, est.transform(observed)) if heldout is not None else None
    if args.report:
        from bnpcore.report import write_report
        facts = {"data": f"{label}: {_plural(corpus.n_docs, 'document')}, {_plural(corpus.n_words, 'word')}",
                 "fit": f"{seconds:.1f} s{rate}"}
        if score is not None:
            facts["held-out per-word log-likelihood"] = f"{score:.4f} on {_plural(heldout.n_tokens, 'token')}"
        write_report(est, args.report, observed, title=f"bnpcore fit --model {name}", facts=facts,
                     n=max(args.show, 1), n_words=args.n_words)
        print(f"report written to {args.report}")
    return 0


def _tokens_processed(history, corpus):
    """Tokens the fit went through: documents processed (the last record's
    ``n_documents``, every estimator's count of documents so far: a batch sweep
    adds the corpus, an online minibatch its own documents) times the mean
    document length."""
    n_documents = history[-1].get("n_documents")
    if n_documents is None:
        n_documents = len(history) * corpus.n_docs
    return n_documents * corpus.n_tokens / max(corpus.n_docs, 1)


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
    # create (and remove) a file there: os.access says yes to root on a read-only file system
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".bnpcore-probe.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise _Error(f"cannot save the model to {path}: cannot create a file in {directory} "
                     f"({exc.strerror or exc})") from None


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
    _print_topic_table(est, None if args.show < 0 else args.show, args.n_words, f"{type(est).__name__}: ")
    return 0


def cmd_evaluate(args):
    est = _load_topic_model(args.model)
    if args.texts is None and args.data is None and getattr(est, "text_pipeline_", None) is not None:
        raise _Error("the model was fitted on text: give the documents to score with --texts (and --lines for "
                     "one document per line)")
    corpus, _ = _load_args_data(args, est if args.texts is not None else None)
    n_words = est.get_topics().shape[1]
    if corpus.n_words != n_words:
        raise _Error(f"the model has {n_words} words, the data {corpus.n_words}")
    _print_score(est, *_split(corpus, args))
    return 0


def cmd_corpus(args):
    from bnpcore.corpus import write
    options = {k: v for k, v in (("min_df", args.min_df), ("max_df", args.max_df)) if v is not None}
    if args.lines or os.path.isdir(args.source):     # text: the pruning of fit --texts
        options = {"min_df": TEXT_MIN_DF, "max_df": TEXT_MAX_DF, **options}
    corpus = write(args.source, args.dest, vocab_path=args.vocab, lines=args.lines, **options)
    size = sum(f.stat().st_size for f in os.scandir(args.dest))
    print(f"wrote {args.dest}: {_plural(corpus.n_docs, 'document')}, {_plural(corpus.n_words, 'word')}, "
          f"{_plural(corpus.n_tokens, 'token')} "
          f"({size / 2**20:.1f} MiB)")
    return 0


def cmd_infer(args):
    """Topic proportions of the documents of --texts (or --data) under a saved model."""
    est = _load_topic_model(args.model)
    if args.documents is not None:
        if args.texts is not None:
            raise _Error("give the documents once: as DIR_OR_FILE or with --texts, not both")
        args.texts = args.documents
    if args.texts is None and args.data is None:
        raise _Error("give the documents with --texts (or --data)")
    if args.output:
        if os.path.splitext(args.output)[1].lower() not in (".csv", ".npy"):
            raise _Error(f"-o must name a .csv or .npy file, got {args.output!r}")
        _check_writable(args.output)
    if args.texts is not None:
        from bnpcore.text import _named_texts
        if args.data is not None or args.vocab is not None:
            raise _Error("give either --texts or --data/--vocab, not both")
        named = list(_named_texts(args.texts, lines=args.lines))
        names = [name for name, _ in named]
        corpus = _count_texts(est, (text for _, text in named), args.model)
    else:
        if args.lines:
            raise _Error("--lines applies to --texts")
        corpus = load_data(args.data, args.vocab)
        names = [str(j) for j in range(corpus.n_docs)]
    n_words = est.get_topics().shape[1]
    if corpus.n_words != n_words:
        raise _Error(f"the model has {n_words} words, the data {corpus.n_words}")
    if hasattr(est, "document_topics"):        # the used topics, largest first (bnpcore.results)
        theta, columns = est.document_topics(corpus), est.used_components()
    else:
        theta = est.transform(corpus)
        columns = np.arange(theta.shape[1])
    empty = int(np.sum(corpus.doc_lengths == 0))
    without = f" ({_plural(empty, 'document')} without any, given the prior mean)" if empty else ""
    print(f"{_plural(corpus.n_docs, 'document')}, {_plural(corpus.n_tokens, 'token')} of the model's words"
          f"{without}, {_plural(len(columns), 'topic')}")
    if args.output:
        if args.output.lower().endswith(".npy"):
            np.save(args.output, theta)
        else:
            import csv
            with open(args.output, "w", newline="", encoding="utf-8") as f:
                out = csv.writer(f)
                out.writerow(["document"] + [f"topic_{int(k)}" for k in columns])
                out.writerows([name] + [f"{p:.6g}" for p in row] for name, row in zip(names, theta))
        print(f"wrote {args.output}: a row per document, a column per topic ({_topic_columns(columns)})")
        return 0
    width = max(len(n) for n in names)
    for name, row in zip(names, theta):
        top = [i for r, i in enumerate(np.argsort(-row, kind="stable")[:args.top]) if r == 0 or row[i] >= 0.01]
        cells = ", ".join(f"topic {int(columns[i])} {row[i]:.0%} ({' '.join(est.top_words(int(columns[i]), 3))})"
                          for i in top)
        print(f"{name:<{width}}  {cells}")
    return 0


def _topic_columns(columns):
    """The topics of the columns of ``infer -o``, in words."""
    if np.array_equal(columns, np.arange(len(columns))):
        return f"topics 0 to {len(columns) - 1}" if len(columns) > 1 else "topic 0"
    return "topics " + ", ".join(str(int(k)) for k in columns)


def cmd_list(args):
    names = _model_names()
    if not names:
        print("no models are registered in this bnpcore build")
        return 0
    for name in names:
        spec = registry.get(name)
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
    sub = p.add_subparsers(dest="command", metavar="{fit,topics,evaluate,infer,corpus,list}", parser_class=_Parser)

    def data_options(q, pruning=True, heldout=True, kos_default=True):
        q.add_argument("--data", help="'kos' (bundled" + (", the default" if kos_default else "") + "), 'bars' "
                                      "(synthetic), an on-disk corpus directory (see 'bnpcore corpus') or a UCI "
                                      "docword file")
        q.add_argument("--vocab", help="UCI vocabulary file for --data PATH")
        q.add_argument("--texts", metavar="DIR_OR_FILE",
                       help="raw UTF-8 text instead of --data: a folder (one document per file, recursively) or a "
                            "file (see --lines); " + ("tokenized by bnpcore.text.tokenize, English stop words "
                                                      "removed" if pruning else "counted in the model's words as "
                                                      "its training text was (its saved tokenizer settings)"))
        q.add_argument("--lines", action="store_true", help="with --texts: one document per line")
        if pruning:
            q.add_argument("--min-df", type=_doc_frequency,
                           help="with --texts: drop words in fewer documents (int: documents, float: fraction; "
                                f"default {TEXT_MIN_DF})")
            q.add_argument("--max-df", type=_doc_frequency,
                           help=f"with --texts: drop words in more documents (int or fraction; default {TEXT_MAX_DF})")
        if heldout:
            q.add_argument("--heldout", type=float, default=0.1,
                           help="fraction of each document's tokens held out for scoring (default 0.1" +
                                ("; 0 fits every token, unscored, and with --scheduler the workers read an on-disk "
                                 "--data)" if pruning else ")"))
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
    f.add_argument("--show", type=_count(0), default=10, help="largest topics to print (default 10)")
    f.add_argument("--n-words", type=_count(1), default=10, help="words per topic (default 10)")
    f.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    f.add_argument("--scheduler", metavar="ADDRESS",
                   help="fit on the Dask cluster of this scheduler (bnpcore.distributed; e.g. tcp://host:8786)")
    f.set_defaults(run=cmd_fit)

    t = sub.add_parser("topics", help="print the topics of a saved model")
    t.add_argument("model", help="model file written by 'bnpcore fit --output'")
    t.add_argument("--show", type=_count(-1), default=20, help="largest topics to print, -1 for all used ones (default 20)")
    t.add_argument("--n-words", type=_count(1), default=10, help="words per topic (default 10)")
    t.set_defaults(run=cmd_topics)

    e = sub.add_parser("evaluate", help="held-out per-word log-likelihood of a saved model on data")
    e.add_argument("model", help="model file written by 'bnpcore fit --output'")
    data_options(e, pruning=False)     # texts are counted in the model's words, as it was fitted
    e.set_defaults(run=cmd_evaluate)

    i = sub.add_parser("infer", help="topic proportions of new documents (text files) under a saved model",
                       description="Topic proportions of new documents under a saved model. Texts are counted as "
                                   "the model's training text was (its saved tokenizer settings and vocabulary; "
                                   "unknown words are dropped). Without -o, prints each document's main topics.")
    i.add_argument("model", help="model file written by 'bnpcore fit --output'")
    i.add_argument("documents", nargs="?", metavar="DIR_OR_FILE", help="the same as --texts DIR_OR_FILE")
    data_options(i, pruning=False, heldout=False, kos_default=False)     # infer has no default data
    i.add_argument("--output", "-o", metavar="OUT.csv|OUT.npy",
                   help="write the proportions: .csv (a row per document, named by file or file:line, a column "
                        "per topic) or .npy (the matrix)")
    i.add_argument("--top", type=_count(1), default=3, help="topics printed per document without -o (default 3)")
    i.set_defaults(run=cmd_infer)

    c = sub.add_parser("corpus", help="build an on-disk corpus (for --data) streaming, in bounded memory")
    c.add_argument("source", help="a UCI docword file (plain or gzip), a text file (--lines) or a folder of text files")
    c.add_argument("dest", help="the corpus directory to create")
    c.add_argument("--vocab", help="UCI vocabulary file")
    c.add_argument("--lines", action="store_true", help="text: one document per line")
    c.add_argument("--min-df", type=_doc_frequency,
                   help=f"text: drop words in fewer documents (int or fraction; default {TEXT_MIN_DF})")
    c.add_argument("--max-df", type=_doc_frequency,
                   help=f"text: drop words in more documents (int or fraction; default {TEXT_MAX_DF})")
    c.set_defaults(run=cmd_corpus)

    ls = sub.add_parser("list", help="list the registered models (* marks the flagship)")
    ls.set_defaults(run=cmd_list)
    return p


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that writers remove their temporary files."""


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM raises :class:`_Terminated` while a command runs (main thread only)."""
    def handler(signum, frame):
        raise _Terminated()
    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:          # not the main thread: leave the signal alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv=None):
    """Run the command line; returns the exit status (0, 2 on errors, 130 on Ctrl-C, 143 on SIGTERM)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        with _terminate_as_interrupt():
            return args.run(args)
    except SystemExit as exc:   # --help
        return exc.code if isinstance(exc.code, int) else 0
    except _Terminated:
        print("bnpcore: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
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
