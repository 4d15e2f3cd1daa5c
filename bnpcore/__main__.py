"""``python -m bnpcore``: the same command line as ``bnpcore``."""
from bnpcore.cli import main

raise SystemExit(main())
