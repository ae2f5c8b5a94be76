# Installs the Debian packages the MPI backend needs to build and run: Open
# MPI (library, headers, mpirun), libclang (for rsmpi's bindgen) and
# pkg-config; iproute2 (`ip`), with which a test stages a vanished host
# in network namespaces; the OTF2 library and tools (mttl-trace's feature
# `otf2`, and `otf2-print`, which its tests read archives with); and
# protobuf-compiler (`protoc --decode_raw`, the tests' independent decoder
# of Perfetto exports). Sourced by scripts/test-all and .ci/run; does
# nothing when they are there. `install_slurm` installs a one-node Slurm's
# daemons for the Slurm test (CI only: on a workstation the packages would
# register system services).

install_deps() {
    install_packages openmpi-bin libopenmpi-dev libclang-dev pkg-config iproute2 \
        libotf2-trace-dev otf2-tools protobuf-compiler
}

install_slurm() {
    install_packages slurmd slurmctld slurm-client munge
}

install_packages() {
    local missing=() pkg
    for pkg in "$@"; do
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
