"""The persistent engine: the whole RNN forward (inference) in one cooperative launch, each
thread block's slice of the weights in shared memory for the whole sequence, on tensor cores
in FP16, BF16, INT8 or FP8 E4M3.

The arithmetic is the GEMM engine's (:mod:`cudnn_rnn.lowbit.engine`), so both compute one
function and share one float64 twin (:mod:`cudnn_rnn.lowbit.model`): the same operands
(:func:`cudnn_rnn.lowbit.operands.prepare`: codes, per-row dequantization, activation
scales), the same input GEMM for layer 0 (cuBLASLt over all steps, before the launch), the
same rounding rules and FP32 gate math (in faster, coarser forms:
:data:`cudnn_rnn.lowbit.kernels.PERSISTENT_PREAMBLE`). What differs is where the recurrence
runs: ``persistent.cu``, one launch per forward, with the partition, the shared-memory
layout and the wait table decided by :mod:`cudnn_rnn.lowbit.partition`.

Refused before any launch, with the reason (:class:`~cudnn_rnn.lowbit.engine.Unsupported`):
what the GEMM engine refuses; FP32/TF32; a GPU below compute capability 8.0 (8.9 for E4M3)
or without cooperative launch; a partition that does not fit (bytes needed against bytes
available). A wait that would spin for seconds sets a status flag, the CTAs that gave up
write NaN for their outputs and the launch ends; :meth:`PersistentEngine.outputs` then
raises :class:`Stalled` (a bug, never a measurement).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.engine import walk
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit import cubin, fits, kernels, partition, tables, wgmma
from cudnn_rnn.lowbit.engine import WORKSPACE_BYTES, Forward, Unsupported, check_supported
from cudnn_rnn.lowbit.gemm import LtHandle, Matmul, rnn_shapes
from cudnn_rnn.lowbit.launch import SETTINGS, Settings, not_tried, tried  # noqa: F401 (its API)
from cudnn_rnn.lowbit.limits import (ATTR_COOPERATIVE, ATTR_SM_COUNT,  # noqa: F401 (its API)
                                     ATTR_SMEM_OPTIN, ATTR_SMEM_PER_SM, ATTR_SMEM_RESERVED,
                                     MIN_CAPABILITY, STATIC_SMEM, check_device, check_formats,
                                     device_limits, projection_streams, smem_share)
from cudnn_rnn.lowbit.operands import eight_bit_precisions, precisions, prepare
from cudnn_rnn.lowbit.tables import LAYER, SLICE  # noqa: F401 (the kernel's structs)

SOURCE = Path(__file__).with_name("persistent.cu")
HELPERS = Path(__file__).with_name("device.cuh")
CELLS = Path(__file__).with_name("cells.cuh")  # a code's bits and a cell's step, both kernels'
FORMAT_CODE = {"fp16": 0, "bf16": 1, "int8": 2, "e4m3": 3}
CELL_CODE = {RNNMode.RNN_RELU: 0, RNNMode.RNN_TANH: 1, RNNMode.LSTM: 2, RNNMode.GRU: 3}
FLOAT_PRECISIONS = ("fp16", "bf16")
# POLL: the byte every state slot starts as, one no rounding of a value makes (INT8 clips to
# +-127; E4M3's largest code is 0x7E and its NaN 0x7F; FP16's NaN is 0x7FFF; BF16 keeps a
# NaN's sign and top bits, so only a NaN can make its 0xFFFF)
SENTINEL = {"fp16": 0xFF, "bf16": 0xFF, "int8": 0x80, "e4m3": 0xFF}
SPIN_LIMIT = 1 << 24  # polls of one counter before the kernel gives up (seconds)
OPTIONS = ("--std=c++17", "-lineinfo")  # NVRTC's; line info costs nothing at run time (ncu reads it)

# the kernel's parameters, in persistent_rnn's order (a CPU test reads them from its source)
ARGS = ("layers", "slices", "waits", "blob", "counters", "status", "trace", "xq", "hx", "cx",
        "y", "hy", "cy", "T", "B", "H", "D", "hrowb", "xrowb")


class Stalled(RuntimeError):
    """A wait of the kernel gave up: the launch ended without computing the outputs."""


def formats(gemms: list, inside: bool = False) -> tuple[str | None, str, str]:
    """(input-part format of the layers above the first, and with ``inside`` of layer 0's
    too, or None; recurrent format; layer 0's input GEMM precision) of the GEMMs'
    precisions, ``(input, recurrent)`` per pseudo-layer (:func:`operands.precisions`)."""
    fh = {kernels.OPERANDS[r] for _, r in gemms}
    fx = {kernels.OPERANDS[i] for i, _ in (gemms if inside else gemms[1:])}
    if len(fh) != 1 or len(fx) > 1:
        raise Unsupported("the persistent kernel takes one format per GEMM kind across layers")
    return (fx.pop() if fx else None), fh.pop(), gemms[0][0]


def defines(cfg: RNNConfig, part: partition.Partition, gx_int: bool,
            spin_limit: int = SPIN_LIMIT, trace: bool = False, poll: bool = False,
            gx_l2: bool = False) -> dict:
    """The compile-time constants of one kernel (persistent.cu's header lists them);
    ``gx_l2``: :func:`limits.projection_streams` on the GPU it runs on."""
    fx = part.fx or part.fh
    return {"CELL": CELL_CODE[cfg.mode], "GATES": cfg.gates, "FX": FORMAT_CODE[fx],
            "FH": FORMAT_CODE[part.fh], "HASX": int(part.fx is not None),
            "GXINT": int(gx_int and not part.input_inside), "THREADS": part.threads,
            "MT": part.mt_max, "NTW": part.ntw,
            "SLAB": part.slab, "STAGES": part.stages, "PAD": partition.PAD,
            "STRADDLE": int(part.straddles), "EXACT": int(part.exact),
            "MAXW": partition.MAX_WAITS, "SPIN_LIMIT": f"{int(spin_limit)}LL",
            "TRACE": int(trace), "POLL": int(poll), "AREG": int(part.areg_slabs > 0),
            "NSLAB": max(1, part.areg_slabs, part.wg_slabs), "CLUSTER": part.cluster,
            # wgmma's only where it runs: the other kernels' sources stay as they were
            **({"WG": 2 if part.wg_shared else 1, "WGN": part.slices[0].npad,
                "WGM": part.wg_blocks, "WGZ": fits.wg_zero(part.slices[0].npad)}
               if part.wg_slabs else {}),
            **({"WGB": 1, "WGS": part.batch_slices} if part.wg_bulk else {}),
            **({"MCAST": part.mcast} if part.mcast else
               {"XE": 1} if part.wg_bulk and part.fx else {}),  # each warpgroup's own wait
            **({"GXG": 1} if part.gx_global else {}), **({"GR": 1} if part.reg_gates else {}),
            **({"PREX": 1} if part.prefetch else {}), **({"GXL2": 1} if gx_l2 else {}),
            **({"STAGES0": part.stages0} if part.stages0 else {}),
            **({"XQ": part.xq} if part.xq else {}),
            "KS": _agreed(part, "ks"), "TS": _agreed(part, "ts"),
            **({"MINB": part.per_sm} if part.per_sm > 1 else {})}


def _agreed(part: partition.Partition, field: str) -> int:
    """Every slice's ``field`` where all agree (a compile-time constant), else 0."""
    values = {getattr(s, field) for s in part.slices}
    return values.pop() if len(values) == 1 else 0


def source(consts: dict) -> str:
    """The kernel's CUDA source with ``consts`` defined and the rounding helpers prepended."""
    head = "".join(f"#define {k} {v}\n" for k, v in consts.items())
    fh = {code: name for name, code in FORMAT_CODE.items()}.get(consts.get("FH"))
    wg = wgmma.source(fh, consts["WGN"]) if consts.get("WG") else ""  # its helpers, its width
    return (head + kernels.PERSISTENT_PREAMBLE + HELPERS.read_text() + CELLS.read_text() + wg
            + SOURCE.read_text())


def gemm_precisions(cp, cfg: RNNConfig, stacked, float_precision: str, plan) -> tuple:
    """(this GPU's :func:`device_limits`, ``plan``'s GEMM precisions per pseudo-layer:
    nothing converted); what the GPU lacks for ``cfg`` is :class:`Unsupported` first."""
    limits = device_limits(cp)
    check_supported(cfg, set(), limits["capability"])
    return limits, precisions(stacked, float_precision, plan)


def layout(cfg: RNNConfig, gemms: list, plan, settings: Settings, limits: dict) -> tuple:
    """(partition, layer 0's input GEMM precision) of ``plan``'s GEMMs (``gemms``: their
    precisions, :func:`gemm_precisions`) on this GPU (``limits``: :func:`device_limits`);
    :class:`Unsupported` with the reason otherwise."""
    fx, fh, gx_precision = formats(gemms, settings.input_inside)
    check_device(cfg, fx, fh, limits, {gx_precision} | eight_bit_precisions(plan))
    if settings.cluster:
        from cudnn_rnn.lowbit import clusters
        clusters.check_settings(settings, limits["capability"])
    if settings.wg:
        cubin.require(limits["capability"], f"the launch shape {settings.name}")
    try:
        part = partition.plan(
            cfg, fx, fh, sm_count=limits["sm_count"],
            smem_per_block=smem_share(limits, settings.per_sm), **settings.partition_args())
    except partition.DoesNotFit as exc:
        raise Unsupported(f"does not fit on this GPU: {exc}") from None
    return part, gx_precision


def compiled(cp, consts: dict):
    """The kernel of ``consts``: compiled by NVRTC through CuPy (which keeps the module by
    its source, in memory and in its disk cache), or taken from CuPy's memo."""
    # a kernel in clusters is launched plainly (clusters.check_resident checks residency first)
    if consts.get("WG"):  # wgmma: sm_90a, which RawModule does not compile for
        return cubin.load(cp, source(consts), "persistent_rnn",
                          cooperative=not consts.get("MCAST"))
    module = cp.RawModule(code=source(consts), options=OPTIONS,
                          enable_cooperative_groups=not consts.get("CLUSTER"))
    return module, module.get_function("persistent_rnn")


def precompile(cp, cfg: RNNConfig, stacked, float_precision: str, plan, shapes) -> int:
    """Compile, side by side in threads (NVRTC releases the GIL), the kernels the launch
    ``shapes`` of one configuration will load (not those the tuner will skip,
    :func:`~cudnn_rnn.lowbit.launch.not_tried`), so that trying each in turn costs one compile's
    wall time. Nothing here is a verdict: whatever fails (a refusal, a CUDA error, a kernel
    that does not compile) is left to building that shape's engine, which meets it again and
    records or raises it. The number of distinct kernels now compiled (or in CuPy's memo)."""
    try:
        limits, gemms = gemm_precisions(cp, cfg, stacked, float_precision, plan)
    except Exception:  # met again, and judged, when an engine is built
        return 0
    sources, fitting = {}, []
    for settings in shapes:
        if settings.resident or not_tried(settings, fitting, shapes, cfg):  # (resident.py's
            continue  # kernel is not this file's; one that fits stands for a verified one)
        try:
            part, gx_precision = layout(cfg, gemms, plan, settings, limits)
        except Exception:  # met again, and judged, when this shape's engine is built
            continue
        fitting.append(settings)
        consts = defines(cfg, part, kernels.int32_output(gx_precision), poll=settings.poll,
                         gx_l2=projection_streams(cfg, part, limits))
        sources[source(consts)] = consts
    device = cp.cuda.Device().id

    def one(consts) -> bool:
        try:
            with cp.cuda.Device(device):
                compiled(cp, consts)
            return True
        except Exception:  # met again, and judged, when this kernel's engine is built
            return False
    with ThreadPoolExecutor(max(1, len(sources))) as pool:  # a few kernels: one thread each
        return sum(pool.map(one, sources.values()))


class PersistentEngine(Forward):
    """An inference forward of ``cfg`` on float64 ``stacked`` weights, ``plan``'s GEMMs in
    8 bits and the rest in ``float_precision`` (fp16 or bf16), launched as one persistent
    kernel shaped by ``settings``. The same interface as the GEMM engine's
    :class:`~cudnn_rnn.lowbit.engine.GemmEngine`: :meth:`set_inputs`, :meth:`forward` (enqueued
    on :attr:`stream`, capturable), :attr:`buf`, :meth:`outputs`, :meth:`close`."""

    def __init__(self, cfg: RNNConfig, stacked, float_precision: str, plan=None,
                 settings: Settings = Settings(), stream=None, lt=None,
                 spin_limit: int = SPIN_LIMIT, trace: bool = False):
        from cudnn_rnn.engine.gpu import cupy_or_raise
        cp = self.cp = cupy_or_raise()
        if float_precision not in FLOAT_PRECISIONS:
            raise Unsupported(f"the persistent kernel runs {' or '.join(FLOAT_PRECISIONS)} "
                              f"beside 8 bits, not {float_precision}")
        if settings.resident:
            raise ValueError(f"launch shape {settings.name} is the resident kernel's: "
                             "resident.ResidentEngine (candidates.build picks it)")
        self.cfg, self.plan, self.settings = cfg, plan, settings
        self.limits, gemms = gemm_precisions(cp, cfg, stacked, float_precision, plan)
        self.part, gx_precision = layout(cfg, gemms, plan, settings, self.limits)
        self.operands = prepare(stacked, float_precision, plan, xp=cp)
        self.stream = stream or cp.cuda.Stream(non_blocking=True)
        self.handle = LtHandle(lt)
        self._matmuls: list = []
        try:
            self._upload(gx_precision)
            self._compile(kernels.int32_output(gx_precision), spin_limit, trace)
            self._set_up()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------------ set-up
    def _upload(self, gx_precision: str) -> None:
        cp, c, part, ops = self.cp, self.cfg, self.part, self.operands
        T = c.seq_length
        self._io()
        self.vectors = [{n: cp.asarray(v) for n, v in (
            ("dqx", o.input.dq), ("dqh", o.recurrent.dq), ("bW", o.bW), ("bR", o.bR))}
            for o in ops]
        self.hq = [cp.zeros(part.state_bytes(T + 1, part.hrowb), cp.uint8) for _ in ops]
        pls, inside = walk.pseudo_layers(c), part.input_inside
        self.xin = {p.index: cp.zeros(part.state_bytes(T, part.xrowb), cp.uint8) for p in pls
                    if p.layer > 0 or inside}
        self._first_layer(gx_precision, part)
        table = tables.layers(part, self.vectors, ops, self.hq, self.xin, self.gx)
        self.tables = {"layers": cp.asarray(table.view(np.uint8)),
                       "slices": cp.asarray(tables.slices(part).view(np.uint8)),
                       "waits": cp.asarray(tables.waits(part)),
                       "blob": cp.asarray(tables.blob(
                           part, [o.input.codes for o in ops],
                           [o.recurrent.codes for o in ops]))}
        self.counters = cp.zeros(len(part.groups), cp.uint32)
        self.status = cp.zeros(1, cp.int32)

    def _first_layer(self, gx_precision: str, part=None) -> None:
        """Layer 0's input GEMMs (cuBLASLt), as the GEMM engine runs them, into :attr:`gx`
        (one a direction); or, with ``part.input_inside``, its input codes, in the layout
        the kernel's bulk copies read, for its own products (:attr:`inside`)."""
        cp, c, ops = self.cp, self.cfg, self.operands
        T, B, H, g = c.seq_length, c.mini_batch, c.hidden_size, c.gates
        inside = part is not None and part.input_inside
        shape = rnn_shapes(c)[0]
        self.gx, self.first, self.inside = [], [], []
        out_dtype = kernels.OUTPUT_DTYPE[gx_precision]
        fmt0 = kernels.OPERANDS[gx_precision]
        if inside and not part.xq:  # (part.xq: the kernel writes them)
            s0 = part.slices[0]  # of batch slice 0: a whole slice's rows
            code = kernels.wgmma_quantizer(fmt0, T, B, c.input_size, part.xrowb, s0.nb,
                                           s0.npad, part.batch_slices)
            self.inside = [(code, np.float32(ops[p.index].input.act_scale), self.xin[p.index])
                           for p in walk.layers(c)[0]]
        self.x_op = cp.empty((0 if inside else T * B, c.input_size), kernels.FORMATS[fmt0][0])
        self.workspace = cp.empty(WORKSPACE_BYTES, dtype=cp.uint8)
        for p in [] if inside else walk.layers(c)[0]:
            m = Matmul(gx_precision, shape, self.handle.lt)
            self._matmuls.append(m)
            m.choose(self.handle, WORKSPACE_BYTES)
            self.first.append((p.index, m, cp.asarray(ops[p.index].input.codes),
                               np.float32(ops[p.index].input.act_scale), fmt0))
            self.gx.append(cp.empty((T * B, g * H), out_dtype))

    def _compile(self, gx_int: bool, spin_limit: int, trace: bool) -> None:
        consts = defines(self.cfg, self.part, gx_int, spin_limit, trace, self.settings.poll,
                         projection_streams(self.cfg, self.part, self.limits))
        self.trace = (self.cp.zeros((self.part.grid, self.cfg.seq_length, 12), self.cp.int64)
                      if trace else None)
        self.module, self.kernel = compiled(self.cp, consts)
        held = self.part.areg_slabs or self.part.wg_slabs and not self.part.wg_shared
        spilled = self.kernel.local_size_bytes if held else 0
        if spilled:  # registers where they fit: a kernel that spills them is not that
            raise Unsupported(f"weights in registers spill: the kernel takes {spilled} bytes "
                              f"of local memory a thread ({self.kernel.num_regs} registers); "
                              f"the launch shapes without 'r' or 'w' keep them in shared memory")
        # engines whose constants agree share one memoized CUfunction, whatever their shared
        # memory (H and the layers are launch arguments): each one's own size would cap the
        # others' launches (a cooperative launch then finds 0 CTAs per SM). Every engine sets
        # the most this GPU lets a block take; each launch asks for its own size.
        self.kernel.max_dynamic_shared_size_bytes = self.limits["smem_per_block"]
        if self.part.per_sm > 1:  # the whole of the unified memory as shared: room for all
            self.kernel.preferred_shared_memory_carveout = 100
        self.consts = consts
        if self.part.cluster_size:
            from cudnn_rnn.lowbit import clusters
            clusters.check_resident(self.kernel, self.part)

    # ------------------------------------------------------------------------ use
    def set_inputs(self, x, hx, cx=None) -> None:
        """Upload the inputs (:meth:`Forward.set_inputs`) and clear the kernel's status."""
        super().set_inputs(x, hx, cx)
        with self.stream:
            self.status.fill(0)

    def forward(self) -> None:
        """Enqueue the forward on :attr:`stream`: layer 0's input GEMMs (or its input codes),
        then the launch."""
        with self.stream:
            for code, scale, xin in self.inside:
                code(self.x, scale, xin)
            for (k, m, w, scale, fmt), gx in zip(self.first, self.gx):
                kernels.quantizer(fmt)(self.x, scale, self.x_op, size=self.x_op.size)
                m.run(w.data.ptr, self.x_op.data.ptr, gx.data.ptr, self.workspace.data.ptr,
                      self.workspace.nbytes, self.stream.ptr)
            self.launch()

    def launch(self) -> None:
        """Enqueue the kernel's launch alone (its counters reset first) on :attr:`stream`:
        what :meth:`forward` does after layer 0's input GEMMs or codes."""
        c, i32, null = self.cfg, np.int32, np.uint64(0)
        with self.stream:
            self.counters.fill(0)
            if self.settings.poll:  # every slot unwritten: what a consumer polls for
                self._unwrite()
            given = {**self.tables, "counters": self.counters, "status": self.status,
                     "trace": null if self.trace is None else self.trace,
                     "xq": self.x if self.part.xq else null, "hx": self.hx,
                     "cx": null if self.cx is None else self.cx, "y": self.y, "hy": self.hy,
                     "cy": null if self.cy is None else self.cy, "T": i32(c.seq_length),
                     "B": i32(c.mini_batch), "H": i32(c.hidden_size), "D": i32(c.dirs),
                     "hrowb": i32(self.part.hrowb), "xrowb": i32(self.part.xrowb)}
            self.kernel((self.part.grid,), (self.part.threads,),
                        tuple(given[n] for n in ARGS), shared_mem=self.part.smem)

    def _unwrite(self) -> None:
        """POLL: every state slot's codes the sentinel, a row's padding past its codes left
        zero (it meets zero weights; a sentinel there would be a NaN in 16 bits and in E4M3,
        and no producer writes it)."""
        c, part = self.cfg, self.part
        for hq in self.hq:
            width = c.hidden_size * partition.FORMAT_BYTES[part.fh]
            hq.reshape(-1, part.hrowb)[:, :width].fill(SENTINEL[part.fh])
        for xin in self.xin.values():
            width = c.dirs * c.hidden_size * partition.FORMAT_BYTES[part.fx]
            xin.reshape(-1, part.xrowb)[:, :width].fill(SENTINEL[part.fx])

    def check(self) -> None:
        """:class:`Stalled` if a launch since :meth:`set_inputs` gave up a wait."""
        self.stream.synchronize()
        if int(self.status.get()[0]):
            raise Stalled("a wait of the persistent kernel gave up (a counter never reached "
                          "its target, or with POLL a state piece never lost its sentinel): "
                          "its outputs are not a result")

    def outputs(self) -> dict:
        """Copies of y, hy and (LSTM) cy after the forward; :class:`Stalled` if it gave up."""
        out = super().outputs()
        self.check()
        return out

    def describe(self) -> dict:
        """The launch: grid, threads, batch slices, shared memory, weights on chip, GEMMs."""
        p = self.part
        return {"kernel": "persistent", "settings": self.settings.name, "grid": p.grid,
                "threads": p.threads, "batch_slices": p.batch_slices, "cluster": p.cluster,
                "ctas_per_multiprocessor": p.per_sm,
                "smem_per_cta": p.smem, "weight_bytes_on_chip": p.weight_bytes(),
                "formats": {"input": p.fx, "recurrent": p.fh},
                "m_tiles": p.mt_max, "n_tiles_per_warp": p.ntw, **p.step_bytes(),
                "ring_stages": p.stages, "ring_stages_group0": p.stages0 or p.stages,
                "bulk_staging": p.wg_bulk, "copy_shared_by": p.mcast,
                "slabs_per_step": p.wg_slabs, "chunks_per_slab": p.slab,
                # the input part's first stages of the next step copied ahead (PREX)
                "input_stages_ahead": min(p.stages, p.wg_slabs) if p.prefetch else 0,
                # layer 0's input codes quantized by the kernel, units a thread (0: before)
                "input_codes_by_kernel": p.xq,
                "input_projection_from": "kernel" if p.input_inside else
                                         "global" if p.gx_global else "shared",
                "gate_sums_in": "registers" if p.reg_gates else "shared",
                "products": "wgmma" if self.consts.get("WG") else "mma.sync",
                # slabs of weight fragments each warp holds in registers, as compiled (AREG, WG)
                "register_slabs": (self.consts["NSLAB"]
                                   if self.consts["AREG"] or self.consts.get("WG") == 1 else 0)}

    def algorithms(self) -> list[dict]:
        """Layer 0's input GEMM (precision, M, N, K, workspace) and the launch."""
        out = [{"precision": m.precision, "M": m.shape.M, "N": m.shape.N, "K": m.shape.K,
                "workspace_bytes": m.workspace_needed} for m in self._matmuls[:1]]
        return out + [self.describe()]

    def close(self) -> None:
        for m in self._matmuls:
            m.close()
        self._matmuls = []
        self.handle.close()
