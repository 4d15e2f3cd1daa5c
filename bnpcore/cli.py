"""Command line: ``bnpcore fit | topics | evaluate`` (also ``python -m bnpcore``)."""

# Estimators the command line can train: name -> ("module:Class", default keyword
# arguments for the bundled KOS corpus). Every algorithm family registers here.
MODELS = {}
# Truncation-free SVI and its truncated stochastic mean-field baseline ([TF] 000 §3: KOS settings;
# the third element holds the overrides for fast fits on tiny corpora).
MODELS["dp-tf-svi"] = ("bnpcore.mixture:TruncationFreeSVI", {"eta": 0.5, "a": 1.0, "batch_size": 100, "n_epochs": 20},
                       {"batch_size": 5, "n_epochs": 2})
MODELS["dp-svb"] = ("bnpcore.mixture:StochasticVB", {"n_components": 300, "eta": 0.5, "a": 1.0, "batch_size": 100,
                                                     "n_epochs": 20}, {"n_components": 5, "batch_size": 5,
                                                                       "n_epochs": 2})
MODELS["hdp-tf-svi"] = ("bnpcore.hdp:TruncationFreeSVI", {"eta": 0.01, "gamma": 1.0, "alpha": 1.0, "batch_size": 100,
                                                          "n_epochs": 20},
                        {"batch_size": 5, "n_epochs": 2, "heldout_samples": 20})
MODELS["hdp-online-vb"] = ("bnpcore.hdp:OnlineVB", {"n_topics": 300, "n_atoms": 15, "eta": 0.01, "gamma": 1.0,
                                                    "alpha": 1.0, "batch_size": 100, "n_epochs": 20},
                           {"n_topics": 5, "n_atoms": 3, "batch_size": 5, "n_epochs": 2, "heldout_samples": 20})

# The model ``bnpcore fit`` trains when none is named.
FLAGSHIP = None


def main(argv=None):
    raise SystemExit("bnpcore: the command line is not built yet")
