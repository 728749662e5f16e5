#!/usr/bin/env bash
# Build llama-cpp-python once, for a portable CPU baseline, and print the folder of its wheel.
#
# Usage: scripts/llama-wheel.sh PYTHON
#
# llama-cpp-python is a source distribution; built as pip would by default it compiles
# llama.cpp with -march=native, so the library depends on the machine that built it: on a CPU
# with AMX its AMX kernels are enabled (and segfault on the first decode), and seeded outputs
# may differ from machine to machine. Here the CPU features are chosen explicitly: x86-64-v3
# (AVX2, FMA, F16C, BMI2: every x86-64 CPU since 2013-2015) and never AVX-512 or AMX; on ARM64
# the compiler's default baseline. The multimodal library (LLAVA_BUILD) is not used by otelcar
# and is not built.
#
# The wheel is kept in $OTELCAR_WHEELHOUSE (default ~/.cache/otelcar/wheels) under a folder
# named by version, architecture and a hash of the flags, so a second clone or a fresh venv
# installs it in seconds and a change of flags builds anew. pip's own cache is bypassed
# (--no-cache-dir): it keys built wheels by the source archive only, and could hand back a
# native build made earlier on the same machine.
set -euo pipefail

python=${1:?usage: scripts/llama-wheel.sh PYTHON}
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/.*"llama-cpp-python\[server\]==\([0-9.]*\)".*/\1/p' "$root/pyproject.toml")
[ -n "$version" ] || { echo "error: no llama-cpp-python[server]==X pin in pyproject.toml" >&2; exit 2; }

common="-DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_BACKEND_DL=OFF -DLLAVA_BUILD=OFF"
case "$(uname -m)" in
    x86_64 | amd64)
        tag=x86-64-v3
        flags="$common -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
        flags="$flags -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF"
        flags="$flags -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF"
        flags="$flags -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
        ;;
    aarch64 | arm64)
        tag=armv8
        flags="$common"
        ;;
    *)
        tag="$(uname -m)-generic"
        flags="$common"
        ;;
esac
digest=$(printf '%s' "$flags" | sha256sum | cut -c1-12)
wheelhouse="${OTELCAR_WHEELHOUSE:-$HOME/.cache/otelcar/wheels}/llama-cpp-python-$version-$tag-$digest"

if ! compgen -G "$wheelhouse/llama_cpp_python-$version-*.whl" >/dev/null; then
    echo "building llama-cpp-python $version for $tag (once; 10-20 min on 2 cores)" >&2
    partial="$wheelhouse.partial.$$"
    rm -rf "$partial"
    mkdir -p "$partial"
    CMAKE_ARGS="$flags" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
        "$python" -m pip wheel --quiet --no-deps --no-cache-dir --no-binary llama-cpp-python \
        --wheel-dir "$partial" "llama-cpp-python==$version" >&2
    printf '%s\n' "$flags" >"$partial/CMAKE_ARGS"
    rm -rf "$wheelhouse"
    mv "$partial" "$wheelhouse"
fi
echo "$wheelhouse"
