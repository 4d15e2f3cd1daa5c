import os
import sys

# the naive references of these tests live beside them (pytest runs with --import-mode=importlib)
sys.path.insert(0, os.path.dirname(__file__))
