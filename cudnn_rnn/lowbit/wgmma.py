"""Hopper's warpgroup MMA (``wgmma.mma_async``, sm_90a only) for the persistent kernel's
products: the shared-memory layout its operands take, their 64-bit descriptors, and the
instruction as inline PTX per operand format and width N.

Why: the persistent kernel multiplies with ``mma.sync`` (``HMMA``/``IMMA`` in SASS), one
warp at a time, each fragment loaded by ``ldmatrix`` first; on Hopper that is the slower
path (the device tool's HOPPER.md). One ``wgmma`` takes a 64-row A (the weight rows) and an
N-row B (the state's batch rows), 32 bytes of K each (k16 in 16 bits, k32 in 8), from
shared memory (A also from registers, in the same per-warp fragments as ``mma.sync``'s A:
rows 16w..16w+15 for warp w of the warpgroup), and the four warps' accumulators come back
in ``mma.sync``'s layout, one 16 x 8 tile per 8 columns.

The layout the PTX ISA names canonical, without swizzling (its INTERLEAVE mode), K-major
(each row's K contiguous in the source; the only layout 8-bit operands may take): *core
matrices* of 8 rows x 16 bytes, each stored as 128 contiguous bytes (row r at 16 r); the
descriptor gives the byte distance between core matrices adjacent along K (the *leading
dimension byte offset*, LBO) and along the rows (the *stride dimension byte offset*,
SBO). :func:`offset` is where a byte of such an operand lives; :func:`pack` lays a whole
operand out. Which of the two fields the hardware reads along K is what the PTX ISA says
and what ``tools/wgmma_probe.py`` checks on the GPU (both assignments, two layouts).
"""
from __future__ import annotations

import numpy as np

# operand format (persistent.cu's codes: 0 fp16, 1 bf16, 2 int8, 3 e4m3) -> (PTX type of A
# and B, K elements per instruction, PTX type of the accumulators)
FORMATS = {"fp16": ("f16", 16, "f32"), "bf16": ("bf16", 16, "f32"), "int8": ("s8", 32, "s32"),
           "e4m3": ("e4m3", 32, "f32")}
K_BYTES = 32      # bytes of K one instruction takes, in every format
M = 64            # A's rows per instruction (the warpgroup's four warps, 16 rows each)
CORE_ROWS, CORE_BYTES = 8, 16
WIDTHS = tuple(range(8, 257, 8))  # N the instruction takes in 16 bits and E4M3 (ptxas)
# ... and with integer operands: 8, 16, 24, then multiples of 16 (ptxas refuses m64n40k32 s8)
INT_WIDTHS = (8, 16, 24) + tuple(range(32, 257, 16))


def widths(fmt: str) -> tuple:
    """The widths N the instruction takes for operand format ``fmt``."""
    return INT_WIDTHS if FORMATS[fmt][0] == "s8" else WIDTHS


def width(fmt: str, rows: int) -> int:
    """The least width N of ``fmt``'s instruction that holds ``rows`` batch rows (the rows
    past them staged as zeros); ValueError past 256."""
    for n in widths(fmt):
        if n >= rows:
            return n
    raise ValueError(f"wgmma takes at most 256 batch rows, {rows} given")
_FIELD = (1 << 14) - 1  # the descriptor's address, LBO and SBO: 14 bits of (bytes >> 4)


def descriptor(address: int, lbo: int, sbo: int) -> int:
    """The 64-bit shared-memory matrix descriptor of an operand at ``address`` (a shared
    memory byte address) with core matrices ``lbo`` bytes apart along K and ``sbo`` apart
    along the rows, no swizzling (bits 0-13 address >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4,
    49-51 base offset 0, 62-63 swizzle 0). ValueError where a field is not a multiple of
    16 or does not fit its 14 bits (the kernel builds the same bits: ``wg_desc``)."""
    fields = {"address": address & 0x3FFFF, "lbo": lbo, "sbo": sbo}
    for name, value in fields.items():
        if value % 16 or not 0 <= value >> 4 <= _FIELD:
            raise ValueError(f"wgmma descriptor: {name} {value} is not a multiple of 16 below "
                             f"{(_FIELD + 1) * 16}")
    return (fields["address"] >> 4) | (lbo >> 4) << 16 | (sbo >> 4) << 32


def fields(desc: int) -> dict:
    """A descriptor's fields in bytes (``address``, ``lbo``, ``sbo``) and its
    ``base_offset`` and ``swizzle`` codes: :func:`descriptor` read back."""
    return {"address": (desc & _FIELD) << 4, "lbo": (desc >> 16 & _FIELD) << 4,
            "sbo": (desc >> 32 & _FIELD) << 4, "base_offset": desc >> 49 & 7,
            "swizzle": desc >> 62 & 3}


def strides(rows: int, kbytes: int, layout: str) -> tuple[int, int]:
    """(bytes between core matrices along K, along the rows) of a ``rows`` x ``kbytes``
    operand laid out ``"k"`` (an 8-row group's core matrices one after another along K:
    the group is one contiguous 8 x ``kbytes`` block) or ``"rows"`` (a 16-byte column of K's
    core matrices one after another down the rows)."""
    if rows % CORE_ROWS or kbytes % K_BYTES:
        raise ValueError(f"a wgmma operand is whole core matrices and instructions: rows "
                         f"{rows} a multiple of {CORE_ROWS}, K bytes {kbytes} of {K_BYTES}")
    if layout == "k":
        return 128, CORE_ROWS * kbytes
    if layout == "rows":
        return rows * CORE_BYTES, 128
    raise ValueError(f"no wgmma operand layout {layout!r}: 'k' or 'rows'")


def offset(row, kbyte, along_k: int, along_rows: int):
    """Where byte ``kbyte`` of row ``row`` lives (numpy arrays or ints), core matrices
    ``along_k`` and ``along_rows`` bytes apart: the kernel's ``wg_place``."""
    return ((row // CORE_ROWS) * along_rows + (kbyte // CORE_BYTES) * along_k
            + (row % CORE_ROWS) * CORE_BYTES + kbyte % CORE_BYTES)


def pack(matrix: np.ndarray, layout: str) -> np.ndarray:
    """A ``rows`` x ``kbytes`` uint8 matrix (row-major codes) in the canonical layout
    ``layout`` (:func:`strides`), as the flat bytes shared memory holds."""
    rows, kbytes = matrix.shape
    along_k, along_rows = strides(rows, kbytes, layout)
    r, k = np.meshgrid(np.arange(rows), np.arange(kbytes), indexing="ij")
    out = np.zeros(rows * kbytes, np.uint8)
    out[offset(r, k, along_k, along_rows)] = matrix
    return out


def chunk_descriptor(address: int, chunk: int, rows: int, kbytes: int, layout: str,
                     swapped: bool = False) -> int:
    """The descriptor of instruction ``chunk`` (bytes 32 ``chunk`` .. +31 of K) of an
    operand at ``address``; ``swapped``: the two strides in each other's fields (what the
    probe tries beside the PTX ISA's assignment)."""
    along_k, along_rows = strides(rows, kbytes, layout)
    start = address + chunk * (K_BYTES // CORE_BYTES) * along_k
    return descriptor(start, along_rows, along_k) if swapped else \
        descriptor(start, along_k, along_rows)


def _regs(first: int, count: int) -> str:
    return ",".join(f"%{i}" for i in range(first, first + count))


def instruction(fmt: str, n: int, a_in_registers: bool) -> str:
    """The CUDA device function ``wg_mma_<r|s>`` for ``fmt`` (:data:`FORMATS`) and width
    ``n``: ``d`` (``n / 2`` accumulators a thread: float, or int for int8) ``+=`` A x B,
    A from ``a`` (four registers: this warp's fragment of the chunk) or from descriptor
    ``a``, B from descriptor ``b``; ``accumulate`` 0 ignores d's values (the chunk that
    starts a sum). Asynchronous: the caller fences before (``wg_fence``), commits after
    and waits before it reads d."""
    if fmt not in FORMATS or n not in widths(fmt):
        raise ValueError(f"no wgmma for format {fmt!r} and N {n}: formats {sorted(FORMATS)}, "
                         f"N a multiple of 8 up to 256 (int8: 8, 16, 24, then of 16)")
    ab, k, acc = FORMATS[fmt]
    count = n // 2
    ctype, constraint = ("int", "r") if acc == "s32" else ("float", "f")
    outs = ", ".join(f'"+{constraint}"(d[{i}])' for i in range(count))
    if a_in_registers:
        a_ops, a_arg = _regs(count, 4), "const unsigned (&a)[4]"
        ins = ", ".join(f'"r"(a[{i}])' for i in range(4))
        nxt = count + 4
    else:
        a_ops, a_arg, ins, nxt = f"%{count}", "unsigned long long a", '"l"(a)', count + 1
    b_op, flag = f"%{nxt}", f"%{nxt + 1}"
    a_text = f"{{{a_ops}}}" if a_in_registers else a_ops
    if acc == "s32":
        tail = ""  # integer types take no scale or transpose immediates
    elif ab in ("f16", "bf16"):
        tail = ", 1, 1, 0" if a_in_registers else ", 1, 1, 0, 0"
    else:
        tail = ", 1, 1"  # 8-bit floats: scales only (K-major, no transpose)
    name = "wg_mma_r" if a_in_registers else "wg_mma_s"
    return (f"__device__ __forceinline__ void {name}({ctype} (&d)[{count}], {a_arg}, "
            f"unsigned long long b, int accumulate) {{\n"
            f"    asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, {flag}, 0;\\n\"\n"
            f"                 \"wgmma.mma_async.sync.aligned.m{M}n{n}k{k}.{acc}.{ab}.{ab} "
            f"{{{_regs(0, count)}}}, {a_text}, {b_op}, p{tail};\\n}}\\n\"\n"
            f"                 : {outs}\n"
            f"                 : {ins}, \"l\"(b), \"r\"(accumulate));\n"
            f"}}\n")


HELPERS = r"""
// wgmma's shared-memory operand descriptor, no swizzling (cudnn_rnn/lowbit/wgmma.py's
// descriptor): address, then the byte distances of core matrices along K and along the rows
__device__ __forceinline__ unsigned long long wg_desc(const void* p, unsigned lbo, unsigned sbo) {
    const unsigned a = smem_addr(p);
    return (unsigned long long)((a & 0x3FFFFu) >> 4) | ((unsigned long long)(lbo >> 4) << 16)
           | ((unsigned long long)(sbo >> 4) << 32);
}
// where byte kb of row `row` lives in a canonical operand (wgmma.py's offset)
__device__ __forceinline__ unsigned wg_place(int row, int kb, unsigned along_k, unsigned along_rows) {
    return (unsigned)(row >> 3) * along_rows + (unsigned)(kb >> 4) * along_k + (row & 7) * 16
           + (kb & 15);
}
// before the first wgmma of a sum: the accumulators' and A's registers written by other
// instructions are ordered before the asynchronous reads
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// the 128 threads of warpgroup g (named barrier g + 1; 0 is __syncthreads')
__device__ __forceinline__ void wg_bar(int g) {
    asm volatile("bar.sync %0, 128;" :: "r"(g + 1) : "memory");
}
template <int N> __device__ __forceinline__ void wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}
// `bytes` from global `src` to shared `dst` by the copy engine (cp.async.bulk), counted
// against the mbarrier `bar`'s phase (arms no barrier: mbar_expect)
__device__ __forceinline__ void bulk_copy(unsigned bar, unsigned dst, const void* src,
                                          unsigned bytes) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1], %2, [%3];" :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
// ... completing the mbarrier's phase, whose one arrival (this thread's) expects them
__device__ __forceinline__ void bulk_load(unsigned bar, unsigned dst, const void* src,
                                          unsigned bytes) {
    mbar_expect(bar, bytes);
    bulk_copy(bar, dst, src, bytes);
}
// `bytes` from global `src` (16-byte aligned, a multiple of 16) brought into L2 by the copy
// engine (cp.async.bulk.prefetch): one instruction, no register or load slot held for them
__device__ __forceinline__ void l2_prefetch(const void* src, unsigned bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(src), "r"(bytes) : "memory");
}
// `bytes` from global `src` into shared `dst` of every CTA of the cluster in `mask` (ranks),
// completing each one's mbarrier at `bar`'s offset (the same CTA-relative offsets in each);
// arms no barrier (mbar_expect)
__device__ __forceinline__ void bulk_load_mc(unsigned bar, unsigned dst, const void* src,
                                             unsigned bytes, unsigned mask) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1], %2, [%3], %4;"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar), "h"((unsigned short)mask)
                 : "memory");
}
"""


def source(fmt: str, n: int) -> str:
    """The wgmma helpers and both forms of the instruction for ``fmt`` and width ``n``
    (compiles for sm_90a only: ``--gpu-architecture=sm_90a``); after device.cuh, whose
    ``smem_addr`` they use."""
    return HELPERS + instruction(fmt, n, True) + instruction(fmt, n, False)
