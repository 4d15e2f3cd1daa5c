"""Command line: ``bnpcore fit | topics | evaluate`` (also ``python -m bnpcore``)."""

# Estimators the command line can train: name -> ("module:Class", default keyword
# arguments for the bundled KOS corpus). Every algorithm family registers here.
MODELS = {}

# The model ``bnpcore fit`` trains when none is named.
FLAGSHIP = None


def main(argv=None):
    raise SystemExit("bnpcore: the command line is not built yet")
