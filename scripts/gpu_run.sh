#!/usr/bin/env bash
# The GPU runner: on a machine with an NVIDIA GPU, CUDA 13's driver, and PyTorch with NVIDIA's
# CUDA wheels (cuDNN 9, cuBLAS, NVRTC) — but no Rust — runs everything that needs the GPU and
# writes the results into OUT_DIR:
#   gpu.txt              nvidia-smi and library versions
#   libraries.txt        the library setting kept (see conv_works) and every cuDNN file found
#   gpu_check.{md,json}  every GPU kernel vs the CPU kernel of the same node (exit 1 on a mismatch)
#   node_tests.{md,json} the ONNX backend node tests of the GPU ops, GPU vs CPU
#   torch_baseline.{md,json}  PyTorch eager and CUDA-Graph latency of the zoo (the issue's peers)
#   export.log           the zoo models exported here (models/export_zoo.py with this python3)
#   cuda_tests.log       tests/tests/cuda_backend.rs run on this GPU (GPU sessions vs the CPU)
#   cli.log              `spillway run --cuda 4` on the bundled model and on googlenet
#   gpu_zoo.{md,json}    whole models on the GPU: outputs vs the CPU, one stream and Lios /
#                        Opara / Greedy on several, eager and CUDA Graph, ratios to PyTorch
#   gpu_hybrid.{md,json} the detection models on the CPU and the GPU together: GPU first,
#                        CommSd overflow and Auto, vs a CPU session (latency, GPU memory)
# ZOO (default googlenet,inception_v3,resnet50,squeezenet1_1,nasnetalarge) picks the models for gpu_zoo,
# DETECTION (default ssd300_vgg16,fasterrcnn_resnet50_fpn,maskrcnn_resnet50_fpn; empty skips) those for gpu_hybrid,
# HYBRID_SPLITS (default sequential,comm_sd,auto) the splits it compares, HYBRID_RUNS its timed runs;
# ZOO_RUNS its timed launches per configuration (default 100); STEP_TIMEOUT (seconds, default
# 600) bounds each step, NODE_TESTS=0 skips the node tests, STEPS (default
# export,torch,zoo,hybrid,tests,cli,check) picks the steps that run.
# Build the bundle first on a machine with Rust: `scripts/gpu_bundle.sh` (writes gpu-bundle/).
# With the device tool: run(command="scripts/gpu_run.sh $OUT", carry=["gpu-bundle"]).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu_run.sh OUT_DIR}"
mkdir -p "$out"
[ -f gpu-bundle/gpu-bundle.tar.gz ] && tar xzf gpu-bundle/gpu-bundle.tar.gz -C gpu-bundle
python="${PYTHON:-python3}"

# NVIDIA's Python wheels keep their libraries in site-packages/nvidia/*/lib: hand them to
# Spillway (SPILLWAY_CUDA_LIB_PATH preloads them) and to the loader.
libdirs="$("$python" - <<'PY'
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except ImportError:
    roots = []
dirs = sorted({d for r in roots for d in glob.glob(os.path.join(r, "*", "lib")) if os.path.isdir(d)})
print(":".join(dirs))
PY
)"
wheels="$libdirs"
for d in /usr/local/cuda/lib64 /usr/local/nvidia/lib64; do
  [ -d "$d" ] && libdirs="${libdirs:+$libdirs:}$d"
done
system_ld="${LD_LIBRARY_PATH:-}"
use_libs() {
  export SPILLWAY_CUDA_LIB_PATH="$1"
  export LD_LIBRARY_PATH="${2}${system_ld:+:$system_ld}"
}
use_libs "$libdirs" "$libdirs"

# cuDNN 9 refuses to mix sub-libraries of two installs (CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH).
# Check a convolution with the wheels plus the system folders, then with the wheels alone
# (and the driver's folder), then without preloading; keep the first that works.
conv_works() {
  GPU_CHECK_ONLY=Conv timeout 120 gpu-bundle/gpu_check "$out/conv-probe" > "$out/conv-probe.log" 2>&1
}
if [ -x gpu-bundle/gpu_check ] && ! conv_works; then
  {
    echo "convolution fails with SPILLWAY_CUDA_LIB_PATH=$libdirs; the cuDNN files it loaded:"
    LD_DEBUG=libs GPU_CHECK_ONLY=Conv timeout 120 gpu-bundle/gpu_check "$out/conv-probe" 2>&1 \
      | grep -i 'calling init:.*cudnn' | sort -u
    echo "trying the wheels alone"
  } >> "$out/libraries.txt"
  drivers="$wheels:/usr/local/nvidia/lib64"
  use_libs "$drivers" "$drivers"
  if ! conv_works; then
    echo "convolution fails with the wheels alone; trying without preloading" >> "$out/libraries.txt"
    use_libs "" "$drivers"
    conv_works || { echo "convolution fails in every library setting" >> "$out/libraries.txt"; use_libs "$libdirs" "$libdirs"; }
  fi
fi
{
  echo "kept: SPILLWAY_CUDA_LIB_PATH=$SPILLWAY_CUDA_LIB_PATH LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  find / -xdev -name 'libcudnn*.so*' 2>/dev/null | sort
} >> "$out/libraries.txt"
rm -rf "$out/conv-probe"

{
  nvidia-smi || true
  echo "SPILLWAY_CUDA_LIB_PATH=$SPILLWAY_CUDA_LIB_PATH"
  "$python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())" || true
  ls ${libdirs//:/ } 2>/dev/null | grep -E 'libcudnn.so|libcublas.so|libnvrtc.so' || true
} > "$out/gpu.txt" 2>&1

status=0
steps=",${STEPS:-export,torch,zoo,hybrid,tests,cli,check},"
want() { [[ "$steps" == *",$1,"* ]]; }
limit=(timeout "${STEP_TIMEOUT:-600}")
zoo="${ZOO:-googlenet,inception_v3,resnet50,squeezenet1_1,nasnetalarge}"
detection="${DETECTION-ssd300_vgg16,fasterrcnn_resnet50_fpn,maskrcnn_resnet50_fpn}"

# The zoo is exported here (it has torch, torchvision, timm and onnx; nothing is fetched).
if want export; then
  "${limit[@]}" "$python" models/export_zoo.py --only "$zoo${detection:+,$detection}" > "$out/export.log" 2>&1 || status=5
  tail -3 "$out/export.log"
fi

if want torch; then
  "${limit[@]}" "$python" scripts/torch_gpu_bench.py "$out" > "$out/torch_baseline.log" 2>&1 || status=4
  tail -6 "$out/torch_baseline.log"
fi

if [ -x gpu-bundle/gpu_zoo ] && want zoo; then
  models=()
  for m in ${zoo//,/ }; do [ -f "models/zoo/$m.onnx" ] && models+=("models/zoo/$m.onnx"); done
  "${limit[@]}" gpu-bundle/gpu_zoo "$out" "${models[@]}" --runs "${ZOO_RUNS:-100}" \
    --torch "$out/torch_baseline.json" > "$out/gpu_zoo.log" 2>&1 || status=6
  tail -40 "$out/gpu_zoo.log"
fi

# The detection models on the CPU and the GPU together.
if [ -x gpu-bundle/gpu_hybrid ] && [ -n "$detection" ] && want hybrid; then
  models=()
  for m in ${detection//,/ }; do [ -f "models/zoo/$m.onnx" ] && models+=("models/zoo/$m.onnx"); done
  "${limit[@]}" gpu-bundle/gpu_hybrid "$out" "${models[@]}" --runs "${HYBRID_RUNS:-10}" \
    --splits "${HYBRID_SPLITS:-sequential,comm_sd,auto}" \
    > "$out/gpu_hybrid.log" 2>&1 || status=9
  tail -20 "$out/gpu_hybrid.log"
  # A baseline in the same run: gpu-bundle/gpu_hybrid_before, when there (a build of an
  # earlier commit, put there by hand after scripts/gpu_bundle.sh), on the same models with
  # the splits HYBRID_BEFORE_SPLITS (default sequential), into OUT_DIR/before.
  if [ -x gpu-bundle/gpu_hybrid_before ]; then
    mkdir -p "$out/before"
    "${limit[@]}" gpu-bundle/gpu_hybrid_before "$out/before" "${models[@]}" --runs "${HYBRID_RUNS:-10}" \
      --splits "${HYBRID_BEFORE_SPLITS:-sequential}" > "$out/before/gpu_hybrid.log" 2>&1 || status=9
    tail -8 "$out/before/gpu_hybrid.log"
  fi
fi

# The CUDA backend's tests, on this GPU (they find the checkout through SPILLWAY_ROOT), one at
# a time, each timed and bounded by TEST_TIMEOUT (seconds, default 120): on fresh machines two
# of them once ran past 60 s together, on a warm one all passed in 1.8 s.
if [ -x gpu-bundle/cuda_backend ] && want tests; then
  : > "$out/cuda_tests.log"
  for t in $(gpu-bundle/cuda_backend --list 2>/dev/null | sed -n 's/: test$//p'); do
    start=$(date +%s.%N)
    SPILLWAY_ROOT="$PWD" timeout "${TEST_TIMEOUT:-120}" gpu-bundle/cuda_backend --exact "$t" \
      --test-threads=1 >> "$out/cuda_tests.log" 2>&1
    rc=$?
    [ "$rc" = 0 ] || status=8
    echo "== $t: exit $rc after $(awk "BEGIN {print $(date +%s.%N) - $start}") s" | tee -a "$out/cuda_tests.log"
  done
fi

# The CLI on the GPU: the bundled model and googlenet, every node on GPU 0 with 4 streams.
if [ -x gpu-bundle/spillway ] && want cli; then
  {
    "${limit[@]}" gpu-bundle/spillway run --cuda 4 --repeat 20
    [ -f models/zoo/googlenet.onnx ] && "${limit[@]}" gpu-bundle/spillway run models/zoo/googlenet.onnx --cuda 4 --repeat 50
  } > "$out/cli.log" 2>&1 || status=7
  tail -12 "$out/cli.log"
fi

if ! want check; then
  :
elif [ -x gpu-bundle/gpu_check ]; then
  node_tests=gpu-bundle/node
  [ -d "$node_tests" ] || node_tests="$("$python" -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/node"))' 2>/dev/null)"
  [ "${NODE_TESTS:-1}" = 0 ] && node_tests=
  "${limit[@]}" gpu-bundle/gpu_check "$out" $node_tests > "$out/gpu_check.log" 2>&1 || status=$?
  tail -5 "$out/gpu_check.log"
else
  echo "gpu-bundle/gpu_check is missing: run scripts/gpu_bundle.sh on the build machine" | tee "$out/gpu_check.log"
  status=3
fi

exit "$status"
