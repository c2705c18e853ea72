#!/usr/bin/env bash
# CI of the Python package: build its wheel once with maturin (abi3: one
# wheel for every CPython >= 3.9), install it in two environments and run
# the pytest suite, the 8- and 16-process torch.distributed (gloo) tests and
# the placed launches (mpirun, torchrun, network namespaces) included,
# against megatron-core 0.16.1 (Python 3.11), then the megatron-core tests
# again against 0.19.2 (Python 3.12). pytest runs two workers (pytest-xdist)
# and prints the 25 slowest tests.
#
#   python/ci.sh             everything: environments, wheel, tests
#   python/ci.sh setup       the two environments only (.ci/run starts this
#                            first, beside the compilations)
#   python/ci.sh test WHEEL  install WHEEL in both environments, run the tests
#
# The virtual environment lives outside the clone, in
# "${XDG_CACHE_HOME:-$HOME/.cache}/rank-layout/venv" (override: RANK_LAYOUT_VENV):
# created when absent, reused when present. What it lacks among maturin,
# pytest, numpy and torch is installed from PyPI (torch and its CUDA wheels
# are several GB: a fresh machine downloads them once), and megatron-core
# 0.16.1 with einops (its hierarchical groups need it) and torchtitan 0.3.0
# (without its training dependencies: ParallelDims needs spmd_types and
# tyro) for the tests of rank_layout.Mesh against the real code and of
# rank_layout.torch.megatron against the real package. Needs Rust, Python
# >= 3.10 with pip (PYTHON, default python3; megatron-core needs 3.10), and
# network access for the first run. The tests run with CI=true (unless CI
# is set), so a megatron-core that cannot be imported fails them instead of
# skipping them. Exits non-zero on any failure; prints the time of each step.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV="${RANK_LAYOUT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/rank-layout/venv}"
PY="$VENV/bin/python"
export PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# maturin and the test tools are the venv's: its bin goes first.
export PATH="$VENV/bin:$PATH"

# step NAME COMMAND...: runs COMMAND under a heading, then prints its time.
step() {
  local name=$1 t=$SECONDS
  shift
  echo "== python: $name"
  "$@"
  echo "-- python: $name: $((SECONDS - t)) s"
}

make_venv() {
  if [ -x "$PY" ]; then
    echo "reusing $VENV"
  else
    echo "creating $VENV"
    mkdir -p "$(dirname "$VENV")"
    if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
      # Debian's python3 keeps venv in a package of its own.
      rm -rf "$VENV"
      if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq python3-venv >/dev/null
        "$PYTHON" -m venv "$VENV"
      else
        "$PYTHON" -m pip install --user --quiet virtualenv
        "$PYTHON" -m virtualenv --quiet "$VENV"
      fi
    fi
  fi
  "$PY" --version
}

install_tools() {
  local module missing=()
  for module in maturin pytest xdist numpy torch mypy; do
    if ! "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$module') is None)"; then
      case $module in
        maturin) missing+=("maturin>=1.9.4,<2") ;;
        # pytest-xdist: the tests run in two workers (worksteal needs 3.2).
        xdist) missing+=("pytest-xdist>=3.2") ;;
        # mypy: its stubtest checks _native.pyi (python/tests/test_stubs.py);
        # 1.18 has the --ignore-disjoint-bases the test passes.
        mypy) missing+=("mypy>=1.18") ;;
        *) missing+=("$module") ;;
      esac
    fi
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing from PyPI: ${missing[*]}"
    "$PY" -m pip install --quiet "${missing[@]}"
  fi
  "$PY" -c "import numpy, pytest, torch, mypy.version; print('numpy', numpy.__version__, '| pytest', pytest.__version__, '| torch', torch.__version__, '| mypy', mypy.version.__version__)"
  maturin --version
}

# The release rank_layout.torch.megatron follows, and what its
# parallel_state needs beyond torch (einops: hierarchical groups).
MEGATRON_CORE=0.16.1
install_megatron_core() {
  if "$PY" - "$MEGATRON_CORE" <<'PYEOF'
import importlib.metadata as m, importlib.util, sys
try:
    ok = m.version("megatron-core") == sys.argv[1] and importlib.util.find_spec("einops") is not None
except m.PackageNotFoundError:
    ok = False
sys.exit(0 if ok else 1)
PYEOF
  then
    echo "reusing megatron-core $MEGATRON_CORE"
  else
    echo "installing from PyPI: megatron-core==$MEGATRON_CORE einops"
    "$PY" -m pip install --quiet "megatron-core==$MEGATRON_CORE" einops
  fi
  "$PY" -W ignore -c "import megatron.core, einops; from megatron.core import parallel_state; print('megatron-core', megatron.core.__version__, '| einops', einops.__version__)"
}

# torchtitan's ParallelDims, for rank_layout.Mesh's reference tests. Its
# declared dependencies (wandb, datasets, tensorboard, ...) are for
# training; ParallelDims imports only spmd_types and tyro, so those are
# installed and the rest is not (pip check would list them).
TORCHTITAN=0.3.0
install_torchtitan() {
  if "$PY" -c "import importlib.metadata as m, sys; sys.exit(m.version('torchtitan') != '$TORCHTITAN')" 2>/dev/null \
    && "$PY" -c "import spmd_types, tyro" 2>/dev/null; then
    echo "reusing torchtitan $TORCHTITAN"
  else
    echo "installing from PyPI: torchtitan==$TORCHTITAN (no dependencies) spmd_types==0.2.3 tyro"
    "$PY" -m pip install --quiet --no-deps "torchtitan==$TORCHTITAN" "spmd_types==0.2.3"
    "$PY" -m pip install --quiet tyro
  fi
  "$PY" -W ignore -c "from torchtitan.distributed.parallel_dims import ParallelDims; import torchtitan; print('torchtitan', '$TORCHTITAN', 'ParallelDims ok')"
}

# nvidia-resiliency-ext's in-process rank assignments (ShiftRanks, FillGaps),
# which rank_layout.relayout's policies of those names are tested against
# (python/tests/test_relayout.py). 0.4.1 is the release for Python 3.11.
NVRX=0.4.1
install_nvrx() {
  if "$PY" -c "import importlib.metadata as m, sys; sys.exit(m.version('nvidia-resiliency-ext') != '$NVRX')" 2>/dev/null; then
    echo "reusing nvidia-resiliency-ext $NVRX"
  else
    echo "installing from PyPI: nvidia-resiliency-ext==$NVRX"
    "$PY" -m pip install --quiet "nvidia-resiliency-ext==$NVRX"
  fi
  "$PY" -W ignore -c "from nvidia_resiliency_ext.inprocess import rank_assignment; print('nvidia-resiliency-ext', '$NVRX', 'rank_assignment ok')"
}

# The placed launches of python/tests/test_launch.py need Open MPI's mpirun
# and iproute2's ip (network namespaces); installed from Debian when
# missing and this is root with apt-get (.ci/run installs Open MPI too).
# Without them those tests fail under CI=true, and say what is missing.
install_launchers() {
  local missing=()
  command -v mpirun >/dev/null 2>&1 || missing+=(openmpi-bin)
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing from Debian: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
  elif [ ${#missing[@]} -gt 0 ]; then
    echo "missing, not installed (needs root and apt-get): ${missing[*]}"
  fi
  mpirun --version 2>/dev/null | head -n 1 || true
  ip -V 2>/dev/null || true
}

# The wheel, built once with the venv's maturin (a release build, in the
# workspace's target directory), into target/ci-wheel; its path on stdout.
build_wheel() {
  rm -rf target/ci-wheel
  maturin build --quiet --release -m python/Cargo.toml --out target/ci-wheel >&2
  ls target/ci-wheel/rank_layout-*.whl
}

# install PYTHON WHEEL: the wheel in place of whatever version is there
# (its one dependency, NumPy, is in the environment).
install() {
  "$1" -m pip install --quiet --no-deps --force-reinstall "$2"
}

# The tests in two workers (-n 2, each test handed to the first idle
# worker); CI=true: the megatron-core tests fail, rather than skip, without
# it.
PYTEST=(-p no:cacheprovider -q -rs --durations=25 -n 2 --dist worksteal)
# mypy's cache (the package's type check reads torch's types) is kept in
# the environment's directory, made anew with it.
run_tests() {
  RANK_LAYOUT_MYPY_CACHE="${RANK_LAYOUT_MYPY_CACHE:-$(dirname "$(dirname "$PY")")/mypy-cache}" \
    RANK_LAYOUT_MEGATRON_CORE=$MEGATRON_CORE CI="${CI:-true}" "$PY" -m pytest "${PYTEST[@]}" python/tests
}

# The second environment: megatron-core 0.19.2 (Python >= 3.12, which the CI
# image has under pyenv) for the drop-in's tests against that release, in
# "${XDG_CACHE_HOME:-$HOME/.cache}/rank-layout/venv-mcore019" (override:
# RANK_LAYOUT_VENV_MCORE019), created when absent and reused.
MEGATRON_CORE_NEW=0.19.2
VENV_NEW="${RANK_LAYOUT_VENV_MCORE019:-${XDG_CACHE_HOME:-$HOME/.cache}/rank-layout/venv-mcore019}"
PY_NEW="$VENV_NEW/bin/python"
# The tests that read megatron-core; the rest of the suite runs once, above.
MEGATRON_CORE_TESTS=(
  python/tests/test_megatron_core_layouts.py
  python/tests/test_megatron_core.py
  python/tests/test_megatron_core_step.py
  python/tests/test_core_rank_generator.py
  python/tests/test_megatron_relayout.py
  python/tests/test_inference_shards_megatron_core.py
  python/tests/test_cli_inference_shards_megatron_core.py
  python/tests/test_reshard_megatron_core.py
  python/tests/test_pg_collection.py
)

python312() {
  local candidate
  # A candidate must run and be 3.12: pyenv's shim python3.12 exists
  # whenever pyenv has a 3.12, but fails unless that version is selected.
  for candidate in "${PYTHON312:-}" "$HOME"/.pyenv/versions/3.12*/bin/python3.12 \
    "$(pyenv prefix 3.12 2>/dev/null || true)/bin/python3.12" "$(command -v python3.12 || true)"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ] &&
      "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' >/dev/null 2>&1; then
      echo "$candidate"
      return
    fi
  done
  echo "no Python 3.12 found (megatron-core $MEGATRON_CORE_NEW needs it): set PYTHON312" >&2
  return 1
}

make_venv_new() {
  if [ -x "$PY_NEW" ]; then
    echo "reusing $VENV_NEW"
  else
    local py
    py=$(python312)
    echo "creating $VENV_NEW with $py"
    mkdir -p "$(dirname "$VENV_NEW")"
    "$py" -m venv "$VENV_NEW"
  fi
  "$PY_NEW" --version
  if ! "$PY_NEW" - "$MEGATRON_CORE_NEW" <<'PYEOF'
import importlib.metadata as m, importlib.util, sys
try:
    ok = m.version("megatron-core") == sys.argv[1] and all(
        importlib.util.find_spec(x) is not None for x in ("einops", "torch", "numpy", "pytest", "xdist"))
except m.PackageNotFoundError:
    ok = False
sys.exit(0 if ok else 1)
PYEOF
  then
    echo "installing from PyPI: pytest pytest-xdist numpy torch megatron-core==$MEGATRON_CORE_NEW einops"
    "$PY_NEW" -m pip install --quiet pytest "pytest-xdist>=3.2" numpy torch "megatron-core==$MEGATRON_CORE_NEW" einops
  fi
  "$PY_NEW" -W ignore -c "import megatron.core, torch; print('megatron-core', megatron.core.__version__, '| torch', torch.__version__)"
}

run_tests_new() {
  RANK_LAYOUT_MEGATRON_CORE=$MEGATRON_CORE_NEW CI="${CI:-true}" "$PY_NEW" -m pytest "${PYTEST[@]}" \
    "${MEGATRON_CORE_TESTS[@]}"
}

# One thread per process: the gloo tests run 16 processes on few cores.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

setup() {
  step "virtual environment" make_venv
  step "maturin, pytest, pytest-xdist, numpy, torch, mypy (installed when missing)" install_tools
  step "megatron-core $MEGATRON_CORE, einops (installed when missing)" install_megatron_core
  step "torchtitan $TORCHTITAN (installed when missing)" install_torchtitan
  step "nvidia-resiliency-ext $NVRX (installed when missing)" install_nvrx
  step "Open MPI and iproute2 for the placed launches (installed when missing)" install_launchers
  step "Python 3.12 environment, megatron-core $MEGATRON_CORE_NEW (installed when missing)" make_venv_new
}

run_all_tests() {
  local wheel=$1
  step "install $(basename "$wheel") (Python 3.11)" install "$PY" "$wheel"
  step "install $(basename "$wheel") (Python 3.12)" install "$PY_NEW" "$wheel"
  step "pytest python/tests (megatron-core $MEGATRON_CORE)" run_tests
  step "pytest: the megatron-core tests against $MEGATRON_CORE_NEW" run_tests_new
}

start=$SECONDS
case "${1:-all}" in
  setup) setup ;;
  test)
    [ $# -eq 2 ] && [ -f "$2" ] || { echo "usage: python/ci.sh test WHEEL" >&2; exit 2; }
    run_all_tests "$2"
    ;;
  all)
    setup
    t=$SECONDS
    echo "== python: maturin build (the abi3 wheel, once)"
    wheel=$(build_wheel)
    echo "-- python: maturin build (the abi3 wheel, once): $((SECONDS - t)) s"
    run_all_tests "$wheel"
    ;;
  *) echo "usage: python/ci.sh [setup | test WHEEL]" >&2; exit 2 ;;
esac
echo "== python: ${1:-all} passed in $((SECONDS - start)) s"
