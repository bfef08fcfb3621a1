"""The persistent kernel's trace (``TRACE``, tools/persistent_probe.py --trace): thread 0 of
each CTA writes a clock at each mark of every step into a row of 12 (the engine's trace
array); the probe reads the phases between them. Without a GPU: the marks fit the row and
are the ones the probe reads, and the traced kernels compile without spills (their runs:
the probe's, on a GPU)."""
import re

import pytest

from cudnn_rnn.lowbit import persistent as P
from cudnn_rnn.lowbit.ptxas import ptxas_info

from tests.test_persistent import _nvrtc_or_skip, _probe_tool
from tests.test_persistent_inside import _plan
from tests.test_persistent_wg import _shape


def test_every_mark_fits_the_row_and_the_probe_reads_each():
    """Marks 0-10, each within the 12 slots a step (persistent.py's trace array); the
    probe's phases span them all (the step's start to the next one's, through the wait, the
    first slab, the products, the sums, the gate math, the signal, y and the next step's
    projection), so no part of a step goes untimed."""
    cfg = _shape("LSTM 50/1/2048/128")
    text = P.source(P.defines(cfg, _plan(cfg, "b1t256u16wbes2"), gx_int=True, trace=True))
    marks = {int(m) for m in re.findall(r"\bMARK\((\d+)\)", text)}
    assert marks == set(range(11))
    assert "(cta * T + step) * 12 + i" in text and "* 12 + (i)]" in text
    tool = _probe_tool()
    assert {"wait", "first_slab_ready", "mma", "partials", "gates", "signal", "y_stores",
            "fetch_next", "to_next_step", "step_total"} == set(tool.PHASES)


@pytest.mark.parametrize("spec,name,fmt", [("LSTM 50/1/2048/128", "b1t256u16wbes2", "int8"),
                                           ("LSTM 50/1/1024/256", "b2t256u16wbeis2", "int8"),
                                           ("LSTM 20/2/512/64", "b2t256u16", "fp16")])
def test_the_traced_kernels_compile_without_spills(spec, name, fmt):
    _nvrtc_or_skip()
    cfg = _shape(spec)
    part = _plan(cfg, name, fmt)
    info = ptxas_info(P.defines(cfg, part, gx_int=fmt == "int8" and not part.input_inside,
                                trace=True), "sm_90a")
    assert info["spill_stores"] == info["spill_loads"] == 0, info
