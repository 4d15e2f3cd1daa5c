"""Command line: ``bnpcore fit | topics | evaluate`` (also ``python -m bnpcore``)."""

# Estimators the command line can train: name -> ("module:Class", default keyword
# arguments for the bundled KOS corpus). Every algorithm family registers here.
MODELS = {}

# LDA family (paper 004 defaults for KOS: K = 10, alpha = eta = 0.1, 300 iterations);
# third element: overrides for quick fits on tiny corpora.
_LDA_SAMPLER_TEST = {"n_iter": 5, "burn_in": 2}
MODELS.update({
    "lda-cgs": ("bnpcore.lda:CollapsedGibbs", {"n_components": 10, "alpha": 0.1, "eta": 0.1, "n_iter": 300},
                _LDA_SAMPLER_TEST),
    "lda-svb": ("bnpcore.lda:StandardVB", {"n_components": 10, "alpha": 0.1, "eta": 0.1, "max_iter": 300},
                {"max_iter": 5}),
    "lda-cvb": ("bnpcore.lda:CollapsedVB", {"n_components": 10, "alpha": 0.1, "eta": 0.1, "max_iter": 300},
                {"max_iter": 5}),
    "lda-cvb0": ("bnpcore.lda:CollapsedVB", {"n_components": 10, "alpha": 0.1, "eta": 0.1, "order": 0,
                                             "max_iter": 300}, {"max_iter": 5}),
    "lda-svb-cgs": ("bnpcore.lda:Hybrid", {"n_components": 10, "alpha": 0.1, "eta": 0.1, "n_iter": 300},
                    _LDA_SAMPLER_TEST),
    "lda-cvb-cgs": ("bnpcore.lda:Hybrid", {"n_components": 10, "alpha": 0.1, "eta": 0.1,
                                           "variational": "collapsed", "n_iter": 300}, _LDA_SAMPLER_TEST),
})

# The model ``bnpcore fit`` trains when none is named.
FLAGSHIP = None


def main(argv=None):
    raise SystemExit("bnpcore: the command line is not built yet")
