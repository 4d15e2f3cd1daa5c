import sys
from pathlib import Path

# the naive references (nrm_reference.py) are imported by name under --import-mode=importlib
sys.path.insert(0, str(Path(__file__).resolve().parent))
