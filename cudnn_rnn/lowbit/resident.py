"""The resident engine: a one-layer RNN forward (inference) whose layer (each direction) stays
in one thread-block cluster for the whole sequence (``resident.cu``): each warp's 16
recurrent weight rows as mma.sync fragments in registers, h pushed to every CTA of the
cluster through distributed shared memory, the cluster's hardware barrier between steps.

It is for the small batches where :class:`~cudnn_rnn.lowbit.persistent.PersistentEngine`'s
step is its synchronization, not its products: at LSTM 50/1/512/16 its traced step took
2.3-2.6 us, 1.2 us of it the counter's round trip and the first copy of h from L2, where
cuDNN's PERSIST_STATIC takes 1.6 us in all (docs/lowbit.md). A cluster barrier costs about
0.23 us and a push of 0.5-2 KB a CTA 0.1-0.6 us more (``tools/cluster_probe.py``).

The operands, layer 0's input GEMM (cuBLASLt, before the launch), the rounding rules and the
FP32 gate math are the persistent engine's (``cells.cuh``), so both compute the function of
one float64 twin. Refused before any launch, with the reason (:class:`Unsupported`): what
the persistent engine refuses for the GPU and formats; more than one layer; a batch above
:data:`MAX_BATCH`; a hidden size the launch shape's warps do not split into a cluster of at
most :data:`fits.MAX_CLUSTER` CTAs; weight fragments above :data:`MAX_REGS` registers a
thread; a GPU without clusters; a kernel that spills its fragments."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit import clusters, fits, kernels
from cudnn_rnn.lowbit.engine import Forward, Unsupported
from cudnn_rnn.lowbit.launch import Settings
from cudnn_rnn.lowbit.limits import check_device
from cudnn_rnn.lowbit.operands import eight_bit_precisions, prepare
from cudnn_rnn.lowbit.partition import FORMAT_BYTES
from cudnn_rnn.lowbit.persistent import (CELL_CODE, CELLS, FLOAT_PRECISIONS, FORMAT_CODE,
                                         HELPERS, OPTIONS, PersistentEngine, formats,
                                         gemm_precisions)
from cudnn_rnn.lowbit.gemm import LtHandle

SOURCE = Path(__file__).with_name("resident.cu")
MAX_BATCH = 32  # four n-tiles of 8 batch rows a warp
MAX_REGS = 128  # registers a thread gives its weight fragments: H 512 in 16 bits, 1024 in 8
OTHER_REGS = 80  # ... and what the rest of the kernel takes besides (75-80 at H 512, B 16;
                 # a thread's registers are 65536 / threads at most)
CHUNK = 32  # bytes of K one fragment covers (m16n8k16 in 16 bits, m16n8k32 in 8)
ROWS = 16  # weight rows a warp holds: one m-tile
BULK = True  # h handed on by the copy engine on mbarriers where a CTA's codes fill 32-byte
             # chunks (else by 16-byte stores and the cluster barrier): Shape.bulk
# the kernel's parameters, in resident_rnn's order (a CPU test reads them from its source)
ARGS = ("frags", "rowf", "gx0", "gx1", "hx", "cx", "y", "hy", "cy", "hscale0", "hscale1",
        "T", "D")


@dataclass(frozen=True)
class Shape:
    """How one layer lies in a cluster: ``warps`` a CTA, ``units`` of H a CTA, ``cluster``
    CTAs (units x cluster = H), ``chunks`` of K (32 bytes each: a warp's fragments, four
    registers a chunk) in format ``fmt``."""
    warps: int
    units: int
    cluster: int
    chunks: int
    fmt: str
    bulk: bool  # each CTA's h block taken to every mate by one bulk copy a step (BULK)


def shape(cfg: RNNConfig, fh: str, threads: int) -> Shape:
    """The layout of ``cfg``'s layer with recurrent format ``fh`` and ``threads`` a CTA;
    :class:`Unsupported` with the reason where the kernel cannot hold it."""
    H, B = cfg.hidden_size, cfg.mini_batch
    if cfg.num_layers != 1:
        raise Unsupported(f"the resident kernel keeps one layer in a cluster, not "
                          f"{cfg.num_layers}: the persistent kernel's other launch shapes run "
                          "more")
    if B > MAX_BATCH:
        raise Unsupported(f"the resident kernel takes a batch of at most {MAX_BATCH} (four "
                          f"n-tiles a warp), not {B}")
    if threads % 32 or not 32 <= threads <= 1024:
        raise Unsupported(f"{threads} threads a CTA: a multiple of 32 up to 1024")
    warps = threads // 32
    units = warps * (ROWS if cfg.gates == 1 else ROWS // 4)
    bpe = FORMAT_BYTES[fh]
    if H % units or H // units > fits.MAX_CLUSTER:
        raise Unsupported(f"hidden size {H} in a cluster of CTAs of {units} units "
                          f"({threads} threads): a multiple of {units} up to "
                          f"{units * fits.MAX_CLUSTER}")
    if H * bpe % CHUNK or units * bpe % 16:
        raise Unsupported(f"hidden size {H} in {fh}: its codes in 32-byte chunks and a CTA's "
                          f"in 16-byte pieces ({units} units of {bpe} bytes)")
    chunks = H * bpe // CHUNK
    limit = min(MAX_REGS, 65536 // threads - OTHER_REGS)
    if 4 * chunks > limit:
        raise Unsupported(f"{4 * chunks} registers of weight fragments a thread (hidden size "
                          f"{H} in {fh}): the resident kernel gives them {limit} at most at "
                          f"{threads} threads")
    return Shape(warps, units, H // units, chunks, fh, BULK and units * bpe % CHUNK == 0)


def warp_rows(cfg: RNNConfig, sh: Shape, rank: int, warp: int) -> np.ndarray:
    """The 16 rows (of the ``gates * H`` recurrent rows, gate-major; -1 where a GRU's
    fourth gate leaves zeros) that warp ``warp`` of CTA ``rank`` holds, as resident.cu's
    header lays them: an LSTM's or GRU's row i gate ((i >> 2) & 1) + 2 (i >> 3) of unit
    i & 3 of the warp's four; an RNN's row i its unit i."""
    i = np.arange(ROWS)
    first = rank * sh.units + warp * (ROWS if cfg.gates == 1 else ROWS // 4)
    if cfg.gates == 1:
        return first + i
    gate = ((i >> 2) & 1) + 2 * (i >> 3)
    return np.where(gate < cfg.gates, gate * cfg.hidden_size + first + (i & 3), -1)


def fragments(cfg: RNNConfig, sh: Shape, codes: list) -> np.ndarray:
    """uint8: every warp's A fragments, [direction][CTA][warp][chunk][lane] 16 bytes, from
    each direction's recurrent ``codes`` ((gates * H, H), the operand dtype): register j
    of lane 4 g + t holds bytes 16 (j >> 1) + 4 t .. + 3 of the chunk in row g + 8 (j & 1)
    of the warp's 16 (mma.sync's A layout, the same in bytes for m16n8k16 and m16n8k32)."""
    out = np.zeros((len(codes), sh.cluster, sh.warps, sh.chunks, 32, 16), np.uint8)
    for d, code in enumerate(codes):
        rows = np.ascontiguousarray(code).view(np.uint8).reshape(code.shape[0], -1)
        rows = np.vstack([rows, np.zeros((1, rows.shape[1]), np.uint8)])  # row -1: zeros
        for r in range(sh.cluster):
            for w in range(sh.warps):
                a = rows[warp_rows(cfg, sh, r, w)]  # (16, H bytes)
                # (row half, g, chunk, byte half, t, 4) -> (chunk, g, t, byte half, row half, 4)
                a = a.reshape(2, 8, sh.chunks, 2, 4, 4).transpose(2, 1, 4, 3, 0, 5)
                out[d, r, w] = a.reshape(sh.chunks, 32, 16)
    return out.reshape(-1)


def smem_bytes(cfg: RNNConfig, sh: Shape) -> int:
    """A CTA's dynamic shared memory: two buffers of every batch row's h codes (rows padded
    to pairs of n-tiles, 16 bytes past each row; with ``sh.bulk`` a block of rows a CTA,
    each row 16 bytes past its codes) and its own stage (two with ``sh.bulk``)."""
    bpe = FORMAT_BYTES[sh.fmt]
    nt = -(-cfg.mini_batch // 8)
    rows = 16 * -(-nt // 2)
    if sh.bulk:
        rb = sh.units * bpe + 16
        return 2 * sh.cluster * rows * rb + 2 * cfg.mini_batch * rb
    return 2 * rows * (cfg.hidden_size * bpe + 16) + cfg.mini_batch * sh.units * bpe


def defines(cfg: RNNConfig, sh: Shape, gx_int: bool) -> dict:
    """The compile-time constants of one kernel (resident.cu's header lists them)."""
    return {"CELL": CELL_CODE[cfg.mode], "GATES": cfg.gates, "FH": FORMAT_CODE[sh.fmt],
            "GXINT": int(gx_int), "H": cfg.hidden_size, "B": cfg.mini_batch,
            "WARPS": sh.warps, "CL": sh.cluster, "KT": sh.chunks, "BULK": int(sh.bulk)}


def source(consts: dict) -> str:
    """The kernel's CUDA source with ``consts`` defined and the helpers prepended."""
    head = "".join(f"#define {k} {v}\n" for k, v in consts.items())
    return (head + kernels.PERSISTENT_PREAMBLE + HELPERS.read_text() + CELLS.read_text()
            + SOURCE.read_text())


class ResidentEngine(PersistentEngine):
    """An inference forward of a one-layer ``cfg`` on float64 ``stacked`` weights,
    ``plan``'s GEMMs in 8 bits and the rest in ``float_precision`` (fp16 or bf16), launched
    as one cluster a direction (``settings``: a launch shape with 'd'). The persistent
    engine's interface. Its waits do not give up (none has a spin limit: a CTA waits only for
    what every mate hands on at every step), so :meth:`check` only surfaces an asynchronous
    CUDA error."""

    def __init__(self, cfg: RNNConfig, stacked, float_precision: str, plan=None,
                 settings: Settings = Settings(resident=True), stream=None, lt=None):
        from cudnn_rnn.engine.gpu import cupy_or_raise
        cp = self.cp = cupy_or_raise()
        if float_precision not in FLOAT_PRECISIONS:
            raise Unsupported(f"the resident kernel runs {' or '.join(FLOAT_PRECISIONS)} "
                              f"beside 8 bits, not {float_precision}")
        if not settings.resident:
            raise ValueError(f"launch shape {settings.name} is not the resident kernel's ('d')")
        self.cfg, self.plan, self.settings, self.trace, self.status = (
            cfg, plan, settings, None, None)
        self.limits, gemms = gemm_precisions(cp, cfg, stacked, float_precision, plan)
        fx, fh, gx_precision = formats(gemms)
        check_device(cfg, fx, fh, self.limits, {gx_precision} | eight_bit_precisions(plan),
                     cooperative=False)
        clusters.check_settings(settings, self.limits["capability"])
        self.shape = shape(cfg, fh, settings.threads)
        self.smem = smem_bytes(cfg, self.shape)
        if self.smem > self.limits["smem_per_block"]:
            raise Unsupported(f"{self.smem} bytes of shared memory a CTA, this GPU lets a "
                              f"block take {self.limits['smem_per_block']}")
        self.operands = prepare(stacked, float_precision, plan, xp=cp)
        self.stream = stream or cp.cuda.Stream(non_blocking=True)
        self.handle = LtHandle(lt)
        self._matmuls: list = []
        try:
            self._io()
            self._first_layer(gx_precision)
            ops = self.operands
            self.frags = cp.asarray(fragments(cfg, self.shape, [o.recurrent.codes for o in ops]))
            self.rowf = cp.asarray(np.stack([np.stack([o.input.dq, o.recurrent.dq, o.bW, o.bR])
                                             for o in ops]).astype(np.float32))
            self.hscales = [np.float32(o.recurrent.act_scale) for o in ops]
            self._build(kernels.int32_output(gx_precision))
            self._set_up()  # the uploads above land before the first launch reads them
        except BaseException:
            self.close()
            raise

    def _build(self, gx_int: bool) -> None:
        self.consts = defines(self.cfg, self.shape, gx_int)
        self.module = self.cp.RawModule(code=source(self.consts), options=OPTIONS)
        self.kernel = self.module.get_function("resident_rnn")
        if self.kernel.local_size_bytes:  # registers where they fit: one that spills is not
            raise Unsupported(f"the resident kernel's weight fragments spill: "
                              f"{self.kernel.local_size_bytes} bytes of local memory a thread "
                              f"({self.kernel.num_regs} registers)")
        self.kernel.max_dynamic_shared_size_bytes = self.limits["smem_per_block"]
        if self.shape.cluster > clusters.PORTABLE:
            clusters.allow_non_portable(self.kernel)
        threads = self.shape.warps * 32
        if clusters.max_active(self.kernel, self.shape.cluster, threads, self.smem) < 1:
            raise Unsupported(f"a cluster of {self.shape.cluster} CTAs of {threads} threads "
                              f"and {self.smem} bytes of shared memory: this GPU runs none")

    def set_inputs(self, x, hx, cx=None) -> None:
        Forward.set_inputs(self, x, hx, cx)

    def launch(self) -> None:
        """Enqueue the kernel's launch alone on :attr:`stream`: one cluster a direction."""
        c, null = self.cfg, np.uint64(0)
        given = {"frags": self.frags, "rowf": self.rowf, "gx0": self.gx[0], "gx1": self.gx[-1],
                 "hx": self.hx, "cx": null if self.cx is None else self.cx, "y": self.y,
                 "hy": self.hy, "cy": null if self.cy is None else self.cy,
                 "hscale0": self.hscales[0], "hscale1": self.hscales[-1],
                 "T": np.int32(c.seq_length), "D": np.int32(c.dirs)}
        with self.stream:
            self.kernel((self.shape.cluster * c.dirs,), (self.shape.warps * 32,),
                        tuple(given[n] for n in ARGS), shared_mem=self.smem)

    def check(self) -> None:
        """Wait for the stream: an asynchronous CUDA error of the launch is raised here."""
        self.stream.synchronize()

    def describe(self) -> dict:
        """The launch: clusters, threads, shared memory, registers, weights on chip."""
        sh, c = self.shape, self.cfg
        return {"kernel": "resident", "settings": self.settings.name,
                "grid": sh.cluster * c.dirs, "threads": sh.warps * 32, "cluster": sh.cluster,
                "smem_per_cta": self.smem, "registers_per_thread": self.kernel.num_regs,
                "weight_bytes_on_chip": int(self.frags.nbytes),
                "formats": {"input": None, "recurrent": sh.fmt}, "weights_in": "registers",
                "state_handed_through": "distributed shared memory",
                "handed_by": "bulk copies" if sh.bulk else "stores", "products": "mma.sync"}

