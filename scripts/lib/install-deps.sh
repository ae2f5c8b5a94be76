# Installs the Debian packages the MPI backend needs to build and run: Open
# MPI (library, headers, mpirun), libclang (for rsmpi's bindgen) and
# pkg-config; and iproute2 (`ip`), with which a test stages a vanished host
# in network namespaces. Sourced by scripts/test-all and .ci/run; does
# nothing when they are there.

install_deps() {
    local missing=() pkg
    for pkg in openmpi-bin libopenmpi-dev libclang-dev pkg-config iproute2; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "installing: ${missing[*]}"
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || { echo "need root (or sudo) to install ${missing[*]}" >&2; return 1; }
        sudo="sudo"
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}
