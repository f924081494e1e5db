#!/usr/bin/env bash
# The GPU run (CONTRIBUTING.rst, "The GPU run": the wheels of .whl/, the steps, the variables):
# the layers' tests and the speed tables on Keras's JAX backend (or torch's), each step writing
# under $OUT (the log: run.log). Exit status 0 when every step ran and every test passed.
#
#   OUT=<folder> benchmarks/gpu/run.sh                   # on the GPU machine
#   OUT=<folder> benchmarks/gpu/run.sh --backend torch   # the same on Keras's torch backend
#   OUT=<folder> benchmarks/gpu/run.sh --rehearse        # the same steps on a CPU, tiny sizes
set -uo pipefail
cd "$(dirname "$0")/../.."

mode=full
backend=jax
while [ $# -gt 0 ]; do
  case "$1" in
    --rehearse) mode=rehearsal ;;
    --backend)
      backend="${2:-}"
      shift
      case "$backend" in
        jax | torch) ;;
        *) echo "benchmarks/gpu/run.sh: --backend takes jax or torch, got '$backend'" >&2; exit 2 ;;
      esac ;;
    *) echo "benchmarks/gpu/run.sh: unknown option '$1' (options: --rehearse, --backend jax|torch)" >&2; exit 2 ;;
  esac
  shift
done
# On torch the steps run eagerly, as a torch user's training does by default (Keras's
# ``jit_compile="auto"`` is off there), and Keras sends keras.layers.LSTM and GRU to cuDNN.
jit_args=""
[ "$backend" = torch ] && jit_args="--no-jit"
out="${OUT:?benchmarks/gpu/run.sh: set OUT to the folder the results go to}"
mkdir -p "$out"
exec > >(tee "$out/run.log") 2>&1
python="${PYTHON:-python3}"
# Seconds for the layer tests and the speed tables (the run: about their sum plus half a
# minute; on a GPU 8 minutes). GPU_RUN_LONG_LENGTHS: step 5's lengths ("" skips step 5).
if [ "$mode" = full ]; then
  tests_s="${GPU_RUN_TESTS_S:-200}"; speed_s="${GPU_RUN_SPEED_S:-190}"; workers=16; sizes=gpu
  long_s="${GPU_RUN_LONG_S:-85}"; long_lengths="${GPU_RUN_LONG_LENGTHS-4000 16000}"
  speed_args="${GPU_RUN_SPEED_ARGS---lengths 20 100}"; rounds_args=""
  # The layer tests leave out the flags of XLA's CPU compiler (tests/conftest.py).
  export TF_MEMLAYERS_TESTS_DEVICE=gpu
else
  tests_s="${GPU_RUN_TESTS_S:-120}"; speed_s="${GPU_RUN_SPEED_S:-240}"; workers=2; sizes=tiny
  long_s="${GPU_RUN_LONG_S:-120}"; long_lengths="${GPU_RUN_LONG_LENGTHS-40}"
  speed_args="${GPU_RUN_SPEED_ARGS-}"; rounds_args="--rounds 1"  # no time of it is kept
  # A rehearsal checks that every step runs, not how fast: XLA compiles its many small
  # programs without LLVM's optimisation passes (the CPU speed tables take 40% less time), in
  # one part, and with its older emitters for fused operations, which generate code sooner.
  export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"
  XLA_FLAGS+=" --xla_llvm_disable_expensive_passes=true --xla_cpu_parallel_codegen_split_count=1"
  # torch on one thread a process: the test workers and the tables share the CPU's cores, and
  # torch's threads waiting for each other there take several times as long.
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
fi
say() { echo "[run.sh ${mode} $(date -u +%H:%M:%S) +${SECONDS}s] $*"; }
status=0

say "1. installing"
site="$(mktemp -d)"
trap 'rm -rf "$site"' EXIT
# GPU_RUN_WHEELS: the folder of the wheels (default .whl/; a rehearsal on another Python
# points it at an empty folder and uses the Keras installed there).
wheels="${GPU_RUN_WHEELS:-.whl}"
if compgen -G "$wheels/*.whl" >/dev/null; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" "$wheels"/*.whl || { say "the wheels of $wheels/ did not install"; exit 1; }
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  say "installed $(ls "$wheels"/*.whl | wc -l) wheels from $wheels/"
else
  say "no wheels in $wheels/: using the installed Keras"
fi
# The package, --no-deps and offline (with the carried setuptools where there is one).
"$python" -m pip install -q --no-index --no-deps --no-build-isolation --no-compile \
  --no-cache-dir --target "$site" . || { say "the package did not install"; exit 1; }
export KERAS_BACKEND="$backend" XLA_PYTHON_CLIENT_PREALLOCATE=false
(cd "$site" && "$python" -c "import keras, tf_memlayers, sys; print('installed: keras',
keras.__version__, '| tf_memlayers', tf_memlayers.__version__, 'from', tf_memlayers.__file__,
'| tensorflow imported:', 'tensorflow' in sys.modules)") || { say "the package does not import"; exit 1; }

say "2. the device, 3. the layer tests (${tests_s}s at most, ${workers} workers)"
# The tests check what the layers compute, and compiling is most of their time on a GPU: XLA
# does not autotune and gives matrix products to cuBLAS instead of a Triton kernel each, which
# compiles much sooner (CHANGELOG.rst gives the measurement); on a CPU the flags do nothing.
# GPU_RUN_RERUN_FROM: an earlier run's layer_tests.json, to run only what failed or was left.
XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_gpu_autotune_level=0 --xla_gpu_enable_triton_gemm=false" \
JAX_DEFAULT_MATMUL_PRECISION=highest "$python" -m benchmarks.gpu.layer_tests \
  --out "$out" --seconds "$tests_s" --workers "$workers" --mode "$mode" \
  --require-gpu "$([ "$mode" = full ] && echo yes || echo no)" \
  ${GPU_RUN_RERUN_FROM:+--rerun-from "$GPU_RUN_RERUN_FROM"}
case $? in 0) ;; 3) say "JAX sees no GPU: stopping"; exit 3 ;; *) status=1 ;; esac

# A measuring step ends at its budget plus a margin, what it measured in its file.
say "4. the speed tables (${speed_s}s budget)"
# GPU_RUN_SPEED_ARGS: options of python -m benchmarks.speed (on a GPU: --lengths 20 100).
# shellcheck disable=SC2086
timeout -k 10 "$((speed_s + 90))" "$python" -m benchmarks.speed --device gpu --backend "$backend" \
  --sizes "$sizes" --budget-s "$speed_s" --out "$out/speed.json" $jit_args $rounds_args $speed_args \
  >/dev/null || status=1

if [ -n "$long_lengths" ]; then
  say "5. window attention at T = ${long_lengths} (${long_s}s budget, constant folding off)"
  # shellcheck disable=SC2086
  XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_disable_hlo_passes=constant_folding" \
    timeout -k 10 "$((long_s + 90))" "$python" -m benchmarks.speed --device gpu --backend "$backend" \
    --sizes "$sizes" --budget-s "$long_s" --out "$out/speed_long.json" $jit_args $rounds_args \
    --tables window_attention --lengths $long_lengths --peaks-from "$out/speed.json" \
    >/dev/null || status=1
fi

say "done, status ${status}"
exit "$status"
