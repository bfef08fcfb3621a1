"""What this GPU gives a persistent launch (multiprocessors, shared memory a block and a
multiprocessor, cooperative launch, the operand formats its tensor cores take), as
:func:`cudnn_rnn.lowbit.persistent.layout` plans with it, and the refusals that need no
partition."""
from __future__ import annotations

from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit.engine import Unsupported, capability, check_supported

# cudaDeviceAttr values (driver_types.h)
ATTR_SM_COUNT, ATTR_COOPERATIVE, ATTR_SMEM_OPTIN = 16, 95, 97
ATTR_SMEM_PER_SM, ATTR_SMEM_RESERVED = 81, 111  # a multiprocessor's; each block's reserve
ATTR_L2_SIZE = 38  # bytes of L2
ATTR_REGS_PER_SM = 82  # 32-bit registers of a multiprocessor
STATIC_SMEM = 1024  # what the kernel's own __shared__ variables may take
# compute capability each operand format's mma.sync needs (m16n8k16 f16/bf16, m16n8k32 s8/e4m3)
MIN_CAPABILITY = {"fp16": (8, 0), "bf16": (8, 0), "int8": (8, 0), "e4m3": (8, 9)}


def device_limits(cp) -> dict:
    """This GPU's multiprocessors, shared memory a block may take, cooperative launch."""
    dev = cp.cuda.Device().id
    attr = lambda a: cp.cuda.runtime.deviceGetAttribute(a, dev)  # noqa: E731
    return {"sm_count": attr(ATTR_SM_COUNT), "cooperative": bool(attr(ATTR_COOPERATIVE)),
            "smem_per_block": attr(ATTR_SMEM_OPTIN) - STATIC_SMEM, "capability": capability(cp),
            "smem_per_sm": attr(ATTR_SMEM_PER_SM), "smem_reserved": attr(ATTR_SMEM_RESERVED),
            "l2_bytes": attr(ATTR_L2_SIZE)}


def projection_streams(cfg: RNNConfig, part, limits: dict) -> bool:
    """Whether layer 0's input projection, staged in shared memory step by step by a kernel
    with wgmma (partition ``part``: not computed in the kernel, not read from global memory
    by the gate math), is too large to stay in L2 between the input GEMM that writes it
    and the kernel's copies: more than half of this GPU's L2 (:func:`device_limits`), every
    step and direction in FP32 or INT32. The kernel then brings each step's into L2 a step
    ahead (GXL2). Measured on an H100 (50 MB of L2; LSTM INT8, launch shapes 'wbe' and
    'wbes2', one process against the kernel without it): 6 % slower at the seed's 10 MB
    (what the prefetch costs where the projection is still in L2), 3.5 % faster at LSTM
    50/1/1024/64's 52 MB, 2.8 % at 50/1/2048/128's 210 MB; the threshold between them is
    not tuned further."""
    if part.input_inside or part.gx_global or not part.wg_slabs:
        return False
    size = cfg.seq_length * cfg.mini_batch * cfg.gates * cfg.hidden_size * cfg.dirs * 4
    return size > limits["l2_bytes"] // 2


def smem_share(limits: dict, per_sm: int) -> int:
    """Dynamic shared memory a CTA may take where ``per_sm`` CTAs share a multiprocessor
    (:func:`device_limits`): the block's limit, or its share of the multiprocessor's less
    each block's reserve and the kernel's own variables."""
    if per_sm == 1:
        return limits["smem_per_block"]
    share = limits["smem_per_sm"] // per_sm - limits["smem_reserved"] - STATIC_SMEM
    return min(limits["smem_per_block"], share)


def check_formats(fx: str | None, fh: str, cap: tuple[int, int]) -> None:
    for f in {fh} | ({fx} if fx else set()):
        if f not in MIN_CAPABILITY:
            raise Unsupported(f"the persistent kernel multiplies in {', '.join(MIN_CAPABILITY)} "
                              f"(tensor cores), not {f}")
        need = MIN_CAPABILITY[f]
        if tuple(cap) < need:
            raise Unsupported(f"{f} mma.sync needs compute capability {need[0]}.{need[1]}+, "
                              f"this GPU has {cap[0]}.{cap[1]}")


def check_device(cfg: RNNConfig, fx, fh, limits: dict, precisions=frozenset(),
                 cooperative: bool = True) -> None:
    """:class:`Unsupported` for what this GPU lacks (the refusals that need no partition),
    ``precisions`` the GEMM precisions of the input GEMM before the launch; ``cooperative``:
    the kernel needs every CTA resident at once (the resident kernel, in clusters, does not)."""
    check_supported(cfg, set(precisions), limits["capability"])
    check_formats(fx, fh, limits["capability"])
    if cooperative and not limits["cooperative"]:
        raise Unsupported("this GPU has no cooperative launch: the persistent kernel needs "
                          "every CTA resident at once")
