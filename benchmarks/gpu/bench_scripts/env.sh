python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TACHYON_GIT_SHA=5c50fd3fb675ffdc81495a8e4cc64cf4b1ea1e3f
mkdir -p /tmp/res
B="python3 benchmarks/gpu/bench_scripts/bench.py"
