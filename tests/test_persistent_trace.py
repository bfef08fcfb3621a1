"""The persistent kernel's trace (``TRACE``, tools/persistent_probe.py --trace): thread 0 of
each CTA writes a clock at each mark of every step into a row of 12 (the engine's trace
array); the probe reads the phases between them. Without a GPU: the marks fit the row and
are the ones the probe reads, and the traced kernels compile without spills (their runs:
the probe's, on a GPU)."""
import re

import numpy as np
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


def test_the_probe_reads_each_phase_at_the_clock_the_multiprocessors_ran_at():
    """tools/persistent_probe.py's reading of a trace (read_trace), on a trace array written
    as a launch would at 1.5 GHz (the nominal 1.98): every step 1000 ns, its marks at known
    offsets, each CTA a few ns apart. The clock is read from the clock64 and globaltimer
    marks, each phase comes out in ns at it, and the phases add up to the step."""
    cfg = _shape("LSTM 6/1/1024/256")
    part = _plan(cfg, "b2t256u16wbeis2")
    at = {0: 0, 1: 100, 8: 150, 2: 600, 3: 650, 4: 800, 5: 850, 9: 870, 10: 900}  # ns
    tr = np.zeros((part.grid, cfg.seq_length, 12))
    for cta in range(part.grid):
        for s in range(cfg.seq_length):
            start = 1000 * s + cta
            for mark, ns in at.items():
                tr[cta, s, mark] = 1.5 * (start + ns)  # cycles
            tr[cta, s, 6], tr[cta, s, 7] = start + 100, start + 850  # globaltimer, ns
    read = _probe_tool().read_trace(tr, part, cfg, 1.98, "b2t256u16wbeis2")
    assert read["clock_ghz"] == pytest.approx(1.5) and read["clock_ghz_nominal"] == 1.98
    phases = read["layers"][0]
    want = {"wait": 100, "first_slab_ready": 50, "mma": 500, "partials": 50, "gates": 150,
            "signal": 50, "y_stores": 20, "fetch_next": 30, "to_next_step": 100,
            "step_total": 1000}
    assert {k: pytest.approx(v) for k, v in want.items()} == {k: phases[k] for k in want}
    assert sum(phases[k] for k in want if k not in ("first_slab_ready", "step_total")) \
        == pytest.approx(phases["step_total"])

