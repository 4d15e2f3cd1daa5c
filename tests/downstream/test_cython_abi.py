"""The C-level ABI of the public modules: the exported cdef functions (capsules in
each module's __pyx_capi__, whose names are their C signatures), the names the
public header bnpcore/bnpcore.h defines (functions, types, macros) and its
BNPCORE_ABI_VERSION, against the committed cython_abi.json.

A new exported or header name passes (add it to the JSON when it becomes public);
a changed or removed one fails: cimporters and C code built against the old one
would break. Changing one deliberately means bumping BNPCORE_ABI_VERSION and the
JSON. The kernels' own helpers live in bnpcore/internal/*.h, outside this
interface: the public header must not define them.
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


def header_names(text):
    """Public names a header defines: static inline bnp_* functions (not bnp__*),
    typedef'd bnp_* structs and BNP_*/BNPCORE_* macros (not include guards)."""
    names = set(re.findall(r"static inline [^;{}()]*?\b(bnp_[A-Za-z0-9]\w*)\s*\(", text))
    names |= set(re.findall(r"typedef struct \w*\s*\{.*?\}\s*(bnp_\w+)\s*;", text, re.DOTALL))
    names |= {m for m in re.findall(r"#define ((?:BNP_|BNPCORE_)[A-Z0-9_]+)", text) if not m.endswith("_H_")}
    return names


def public_header():
    return Path(bnpcore.get_include(), "bnpcore", "bnpcore.h").read_text()


def test_header_names_unchanged():
    current = header_names(public_header())
    removed = sorted(set(REFERENCE["header"]) - current)
    assert not removed, f"removed from bnpcore/bnpcore.h: {removed}"


def test_header_exports_no_kernel_internals():
    internal = Path(__file__).resolve().parents[2] / "include" / "bnpcore" / "internal"
    if not internal.is_dir():
        pytest.skip("needs the source tree's include/bnpcore/internal")
    kernel_only = set()
    for path in internal.glob("*.h"):
        kernel_only |= header_names(path.read_text())
    assert {"bnp_once_claim", "bnp_atomic_add_i32", "BNP_SIMD_CLONES", "BNP_PREFETCH"} <= kernel_only
    assert not kernel_only & header_names(public_header())
    assert not re.search(r"#\s*include.*internal", public_header())    # the public header stands alone


def test_abi_version():
    header = Path(bnpcore.get_include(), "bnpcore", "bnpcore.h").read_text()
    version = int(re.search(r"#define BNPCORE_ABI_VERSION (\d+)", header).group(1))
    assert version == special.ABI_VERSION == REFERENCE["abi_version"]
