#!/bin/sh
# Point the bench at a Python that already holds torch, nmt's dependencies and OpenNMT-py (the
# image of a GPU machine without network access, say) instead of the environments that
# `make install` and bench/install.py create. Writes small launchers where the bench looks:
#   .venv/bin/python, .venv/bin/nmt                 (nmt from this checkout, on PYTHON)
#   bench/work/venv-onmt/bin/python, onmt_translate  (OpenNMT-py, importable by PYTHON)
# and marks the OpenNMT-py environment installed, so `bench/run.py --skip-install` takes it:
#   sh bench/existing_python.sh /usr/bin/python3
#   python3 bench/run.py --skip-install --device cuda --systems nmt,onmt,nmt-bf16 ...
# (the bench itself needs the checkout on PYTHONPATH for `import nmt_cli`). It refuses to
# write into a real virtual environment.
set -eu
python=${1:?usage: sh bench/existing_python.sh PYTHON}
repo=$(cd "$(dirname "$0")/.." && pwd)
onmt=$repo/bench/work/venv-onmt
"$python" -c "import torch, typer, rich, sentencepiece, sacrebleu, numpy" || {
    echo "error: $python cannot import nmt's dependencies (torch typer rich sentencepiece sacrebleu numpy)" >&2
    exit 1
}
for venv in "$repo/.venv" "$onmt"; do
    if [ -e "$venv/pyvenv.cfg" ]; then
        echo "error: $venv is a real virtual environment; use it (make bench) or remove it first" >&2
        exit 1
    fi
done
# One launcher per file: `export PYTHONPATH=REPO:...; exec COMMAND "$@"`, every word quoted by
# shlex. An existing file or link is replaced, never written through.
"$python" - "$repo" "$python" <<'EOF'
import os
import shlex
import sys
from pathlib import Path

repo, python = sys.argv[1], sys.argv[2]
onmt = Path(repo, "bench", "work", "venv-onmt", "bin")
launchers = {
    Path(repo, ".venv", "bin", "python"): [python],
    Path(repo, ".venv", "bin", "nmt"): [python, "-m", "nmt_cli"],
    onmt / "python": [python],
    onmt / "onmt_translate": [python, "-c", "from onmt.bin.translate import main; main()"],
}
for path, command in launchers.items():
    path.parent.mkdir(parents=True, exist_ok=True)
    text = (
        "#!/bin/sh\n"
        f'export PYTHONPATH={shlex.quote(repo)}"${{PYTHONPATH:+:$PYTHONPATH}}"\n'
        f'exec {shlex.join(command)} "$@"\n'
    )
    temporary = path.with_name(path.name + ".new")
    temporary.write_text(text, encoding="utf-8")
    temporary.chmod(0o755)
    os.replace(temporary, path)
EOF
"$onmt/bin/python" -c "import onmt.bin.train" || {
    echo "error: $python cannot import OpenNMT-py (onmt.bin.train)" >&2
    exit 1
}
rm -f "$onmt/.bench-installed"
echo "existing $python" >"$onmt/.bench-installed"
echo "bench launchers in $repo/.venv/bin and $onmt/bin run $python"
