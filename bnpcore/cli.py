"""Command line: ``bnpcore fit | topics | evaluate`` (also ``python -m bnpcore``)."""

# Estimators the command line can train: name -> ("module:Class", default keyword
# arguments for the bundled KOS corpus). Every algorithm family registers here.
MODELS = {
    "hdp-gibbs": ("bnpcore.hdp:DirectAssignmentGibbs",
                  {"init_topics": 100, "n_iter": 1000, "burn_in": 200, "eta_tot": 100.0}),
    "hdp-cvb": ("bnpcore.hdp:CollapsedVB", {"n_components": 120, "n_iter": 100, "eta_tot": 100.0}),
}

# The model ``bnpcore fit`` trains when none is named.
FLAGSHIP = None


def main(argv=None):
    raise SystemExit("bnpcore: the command line is not built yet")
