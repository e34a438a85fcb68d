# Sourced by the GPU scripts: the Python packages the lent machine lacks
# (flash-linear-attention, fla-core) travel as wheels in .whl/ (carry
# `.whl`); installed into /tmp/site and put on PYTHONPATH, where present.
# PY: the Python to install with.
if ls .whl/*.whl >/dev/null 2>&1; then
  ${PY:-python3} -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
