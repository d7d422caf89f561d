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
#
# The fleet cache's tests start real servers on 127.0.0.1: Debian's redis-server, and moto's
# S3-compatible server, installed from PyPI at a pinned version into a virtual environment
# outside the repository (python3-venv provides the interpreter and its venv module). The command
# runs with SPARKLE_TEST_S3_SERVER naming that environment's python; tests that run without this
# script find the same default place.
set -euo pipefail

packages=(libegl1 libegl-mesa0 libgl1-mesa-dri gcc libc6-dev ca-certificates curl
    clang-22 lld-22 llvm-22 libclc-22 libdrm-dev redis-server python3-venv)

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

# moto's S3 server. A stamp file naming the pinned requirement makes a later run a no-op; changing
# the pin reinstalls. An interpreter given in SPARKLE_TEST_S3_SERVER is used as it is.
#
# When a command follows, the installation (half a minute to a minute of downloads and unpacking)
# runs in the background beside it: the tests need the server only once they are built. It holds
# the lock file below until it is done, and the command gets the lock's path in
# SPARKLE_TEST_S3_SERVER_SETUP_LOCK: a test that starts an S3 server waits for that lock first.
moto_requirement="moto[server]==5.2.5"
install_moto() {
    if [ ! -x "$venv/bin/python" ]; then
        # Debian's interpreter first: its venv module is the python3-venv installed above
        # (a python3 earlier on PATH may be another installation).
        system_python=/usr/bin/python3
        [ -x "$system_python" ] || system_python="$(command -v python3)"
        echo "setup: creating a Python environment for the test servers in $venv" >&2
        "$system_python" -m venv --clear "$venv" || return 1
    fi
    if [ "$(cat "$stamp" 2>/dev/null)" != "$moto_requirement" ]; then
        echo "setup: installing $moto_requirement into $venv" >&2
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
            --no-input "$moto_requirement" || return 1
        printf '%s' "$moto_requirement" >"$stamp"
    fi
}
if [ -z "${SPARKLE_TEST_S3_SERVER:-}" ]; then
    servers_dir="${XDG_CACHE_HOME:-$HOME/.cache}/sparkle-test-servers"
    venv="$servers_dir/venv"
    stamp="$venv/sparkle-requirement"
    if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$moto_requirement" ]; then
        mkdir -p "$servers_dir"
        # Two setups at once must not build the same environment together.
        exec 9>"$servers_dir/lock"
        flock 9
        if [ $# -gt 0 ]; then
            # The background job keeps the lock (its copy of descriptor 9) until it is done. At
            # the lowest priority: the build beside it comes first, and leaves it idle cores.
            ( renice -n 19 -p "$BASHPID" >/dev/null 2>&1 || true
              install_moto || echo "setup: installing $moto_requirement failed; the S3 tests will say so" >&2 ) &
            export SPARKLE_TEST_S3_SERVER_SETUP_LOCK="$servers_dir/lock"
        else
            install_moto
        fi
        exec 9>&-
    fi
    export SPARKLE_TEST_S3_SERVER="$venv/bin/python"
fi

if [ $# -gt 0 ]; then
    exec "$@"
fi
