"""Keep llama.cpp on its portable CPU kernels, and say which ones a build has.

Two guards, for two ways the embedded model became machine-dependent:

- **The build.** ``make`` installs llama-cpp-python from a wheel built by
  ``scripts/llama-wheel.sh`` for a fixed baseline (x86-64: AVX2, FMA, F16C, BMI2; never
  AVX-512 or AMX; ARM64: the compiler's default). :func:`build_features` reads what the
  loaded library was compiled with, and :func:`portable_build_problem` says when it is not
  that baseline (built with ``-march=native`` by a plain ``pip install``, say): its seeded
  outputs then depend on the CPU that built it.
- **The run.** :func:`use_portable_kernels` makes every model loaded in this process skip
  llama.cpp's *extra buffer types* (``use_extra_bufts = False``): the AMX matrix kernels
  (which segfault on the first decode on CPUs with AMX when a native build enables them) and
  the run-time weight repacking, whose choice depends on the CPU at run time. The weights
  then stay in the plain CPU buffer, whose kernels are the compiled ones.
"""

from __future__ import annotations

import functools
import importlib
import platform
import re
from typing import Any

#: CPU features a portable x86-64 build may have (llama.cpp's system-info names).
X86_64_BASELINE = frozenset({"SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2"})
#: Features that must never be compiled in: their kernels depend on (or crash on) the CPU.
MACHINE_SPECIFIC = re.compile(r"^(AVX512.*|AVX_VNNI|AMX.*|AVX_VNNI_INT8|AVX10.*)$")


def use_portable_kernels() -> None:
    """Make every ``llama_cpp.Llama`` created from now on in this process load its weights
    without extra buffer types (idempotent; needs llama-cpp-python)."""
    bindings = importlib.import_module("llama_cpp.llama_cpp")
    original = bindings.llama_model_default_params
    if getattr(original, "_otelcar_portable", False):
        return

    @functools.wraps(original)
    def default_params() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    default_params._otelcar_portable = True  # type: ignore[attr-defined]
    bindings.llama_model_default_params = default_params


def build_features() -> dict[str, bool]:
    """The CPU features the loaded llama.cpp was compiled with (``{"AVX2": True, …}``), read
    from ``llama_print_system_info``; features it does not list are absent."""
    bindings = importlib.import_module("llama_cpp.llama_cpp")
    text = bindings.llama_print_system_info().decode("utf-8", errors="replace")
    return parse_system_info(text)


def parse_system_info(text: str) -> dict[str, bool]:
    """``"CPU : SSE3 = 1 | AVX2 = 1 | AMX_INT8 = 0 | …"`` as ``{"SSE3": True, …}`` (the CPU
    backend's entries; ``REPACK``, ``OPENMP`` and ``LLAMAFILE`` are build options, kept)."""
    features: dict[str, bool] = {}
    for name, value in re.findall(r"([A-Z][A-Z0-9_]*)\s*=\s*(\d+)", text):
        features[name] = value != "0"
    return features


def portable_build_problem(features: dict[str, bool], machine: str | None = None) -> str | None:
    """``None`` when ``features`` are those of the portable build for ``machine`` (default:
    this one), else what is wrong, in one sentence that says how to fix it."""
    machine = (machine or platform.machine()).lower()
    enabled = {name for name, on in features.items() if on}
    specific = sorted(name for name in enabled if MACHINE_SPECIFIC.match(name))
    if specific:
        return (
            f"llama.cpp was compiled with machine-specific CPU features ({', '.join(specific)}): "
            "seeded outputs depend on the CPU that built it. Reinstall it from the portable "
            "wheel: `make` does (scripts/llama-wheel.sh)"
        )
    if machine in ("x86_64", "amd64"):
        missing = sorted(X86_64_BASELINE - enabled)
        if missing:
            return (
                f"llama.cpp was compiled without {', '.join(missing)}: not the portable x86-64 "
                "build (AVX2, FMA, F16C, BMI2), so outputs differ from it. Reinstall it from "
                "the portable wheel: `make` does (scripts/llama-wheel.sh)"
            )
    return None


def check_portable_build() -> None:
    """Exit with one line saying what is wrong when the installed llama.cpp is not the
    portable build (``make`` runs this after installing it)."""
    problem = portable_build_problem(build_features())
    if problem is not None:
        raise SystemExit(f"error: {problem}")
