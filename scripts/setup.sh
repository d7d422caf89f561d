#!/usr/bin/env bash
# Installs what building and testing Sparkle needs on Debian/Ubuntu, skipping what is already
# there, then runs the given command (if any) with the Rust toolchain on PATH:
#
#   scripts/setup.sh cargo test --workspace
#
# System packages: an EGL loader and Mesa's drivers (llvmpipe gives OpenGL 4.5 on the CPU where
# there is no GPU), a C toolchain for linking, and for the amdgpu backend: LLVM 22 (clang, lld and
# the llvm tools) with libclc to build AMDHSA code objects, and libdrm-dev whose amdgpu_drm.h the
# UAPI layout test compiles against. Rust comes from rustup when cargo is missing.
set -euo pipefail

packages=(libegl1 libegl-mesa0 libgl1-mesa-dri gcc libc6-dev ca-certificates curl
    clang-22 lld-22 llvm-22 libclc-22 libdrm-dev)

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done

if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo="sudo"
        else
            echo "setup: need root (or sudo) to install: ${missing[*]}" >&2
            exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: installing the Rust toolchain with rustup" >&2
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi

if [ $# -gt 0 ]; then
    exec "$@"
fi
