"""The C-level ABI of the public modules: the exported cdef functions (capsules in
each module's __pyx_capi__, whose names are their C signatures) and the header's
BNPCORE_ABI_VERSION, against the committed cython_abi.json.

A new exported name passes (add it to the JSON when it becomes public); a changed
or removed one fails: cimporters built against the old signature would break.
Changing one deliberately means bumping BNPCORE_ABI_VERSION and the JSON.
"""
import ctypes
import importlib
import json
import re
from pathlib import Path

import pytest

import bnpcore
from bnpcore.kernels import special

REFERENCE = json.loads(Path(__file__).with_name("cython_abi.json").read_text())
PUBLIC = ["bnpcore.kernels.special", "bnpcore.kernels.rng", "bnpcore.kernels.stirling",
          "bnpcore.kernels.sparse"]


def capsule_names(module_name):
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    capi = getattr(importlib.import_module(module_name), "__pyx_capi__", {})
    return {name: get_name(capsule).decode() for name, capsule in capi.items()}


def test_every_public_module_is_recorded():
    assert sorted(REFERENCE["capsules"]) == sorted(PUBLIC)


@pytest.mark.parametrize("module_name", PUBLIC)
def test_exported_signatures_unchanged(module_name):
    current = capsule_names(module_name)
    for name, signature in REFERENCE["capsules"][module_name].items():
        assert name in current, f"{module_name}.{name} was removed from the C API"
        assert current[name] == signature, (
            f"{module_name}.{name} changed signature: {signature!r} -> {current[name]!r}")


def test_exported_signatures_take_no_memoryviews():
    # a memoryview argument shows up as __Pyx_memviewslice, which no C caller can supply
    for module_name in PUBLIC:
        for name, signature in capsule_names(module_name).items():
            assert "memviewslice" not in signature, f"{module_name}.{name}: {signature}"


def test_abi_version():
    header = Path(bnpcore.get_include(), "bnpcore", "bnpcore.h").read_text()
    version = int(re.search(r"#define BNPCORE_ABI_VERSION (\d+)", header).group(1))
    assert version == special.ABI_VERSION == REFERENCE["abi_version"]
