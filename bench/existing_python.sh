#!/bin/sh
# Point the bench at a Python that already holds torch, nmt's dependencies and OpenNMT-py (the
# image of a GPU machine without network access, say) instead of the environments that
# `make install` and bench/install.py create. Writes small launchers where the bench looks:
#   .venv/bin/python, .venv/bin/nmt                (nmt from this checkout, on PYTHON)
#   bench/work/venv-onmt/bin/python, onmt_translate (OpenNMT-py, importable by PYTHON)
# and marks the OpenNMT-py environment installed, so `bench/run.py --skip-install` takes it.
#   sh bench/existing_python.sh /usr/bin/python3 && python3 bench/run.py --skip-install ...
# Run it only in a checkout without a real .venv: it refuses to overwrite one.
set -eu
python=${1:?usage: sh bench/existing_python.sh PYTHON}
repo=$(cd "$(dirname "$0")/.." && pwd)
"$python" -c "import torch, typer, rich, sentencepiece, sacrebleu, numpy" || {
    echo "error: $python cannot import nmt's dependencies (torch typer rich sentencepiece sacrebleu numpy)" >&2
    exit 1
}
if [ -e "$repo/.venv/pyvenv.cfg" ]; then
    echo "error: $repo/.venv is a real environment; use it (make bench) or remove it first" >&2
    exit 1
fi
launcher() {  # launcher FILE COMMAND...: a script that runs COMMAND with the arguments given
    mkdir -p "$(dirname "$1")"
    target=$1
    shift
    printf '#!/bin/sh\nexport PYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH}\nexec %s "$@"\n' \
        "$repo" "$*" >"$target"
    chmod +x "$target"
}
launcher "$repo/.venv/bin/python" "$python"
launcher "$repo/.venv/bin/nmt" "$python" -m nmt_cli
onmt=$repo/bench/work/venv-onmt
launcher "$onmt/bin/python" "$python"
launcher "$onmt/bin/onmt_translate" "$python" -c "'from onmt.bin.translate import main; main()'"
"$onmt/bin/python" -c "import onmt.bin.train" || {
    echo "error: $python cannot import OpenNMT-py (onmt.bin.train)" >&2
    exit 1
}
echo "existing $python" >"$onmt/.bench-installed"
echo "bench launchers in $repo/.venv/bin and $onmt/bin run $python"
