"""Command line: ``bnpcore fit | topics | evaluate`` (also ``python -m bnpcore``)."""

# Estimators the command line can train: name -> ("module:Class", default keyword
# arguments for the bundled KOS corpus). Every algorithm family registers here.
MODELS = {
    # [NRM] 002 Table 1 settings on KOS (eta = 0.1; IG: sigma = 0.5, a = 10, tau = 100)
    "adf-nrm": ("bnpcore.mixture:ADF", {"a": 10.0, "sigma": 0.5, "tau": 100.0, "eta": 0.1}),
    "ep-nrm": ("bnpcore.mixture:EP", {"a": 10.0, "sigma": 0.5, "tau": 100.0, "eta": 0.1, "max_passes": 50}),
    "gibbs-nrm": ("bnpcore.mixture:CollapsedGibbs", {"a": 10.0, "sigma": 0.5, "tau": 100.0, "eta": 0.1,
                                                     "n_sweeps": 215, "n_samples": 50}),
}

# The model ``bnpcore fit`` trains when none is named.
FLAGSHIP = None


def main(argv=None):
    raise SystemExit("bnpcore: the command line is not built yet")
