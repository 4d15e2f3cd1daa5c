"""``python -m bnpcore``: the same command line as ``bnpcore``."""
from bnpcore.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
