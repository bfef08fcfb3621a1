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
STATIC_SMEM = 1024  # what the kernel's own __shared__ variables may take
# compute capability each operand format's mma.sync needs (m16n8k16 f16/bf16, m16n8k32 s8/e4m3)
MIN_CAPABILITY = {"fp16": (8, 0), "bf16": (8, 0), "int8": (8, 0), "e4m3": (8, 9)}


def device_limits(cp) -> dict:
    """This GPU's multiprocessors, shared memory a block may take, cooperative launch."""
    dev = cp.cuda.Device().id
    attr = lambda a: cp.cuda.runtime.deviceGetAttribute(a, dev)  # noqa: E731
    return {"sm_count": attr(ATTR_SM_COUNT), "cooperative": bool(attr(ATTR_COOPERATIVE)),
            "smem_per_block": attr(ATTR_SMEM_OPTIN) - STATIC_SMEM, "capability": capability(cp),
            "smem_per_sm": attr(ATTR_SMEM_PER_SM), "smem_reserved": attr(ATTR_SMEM_RESERVED)}


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


def check_device(cfg: RNNConfig, fx, fh, limits: dict, precisions=frozenset()) -> None:
    """:class:`Unsupported` for what this GPU lacks (the refusals that need no partition),
    ``precisions`` the GEMM precisions of the input GEMM before the launch."""
    check_supported(cfg, set(precisions), limits["capability"])
    check_formats(fx, fh, limits["capability"])
    if not limits["cooperative"]:
        raise Unsupported("this GPU has no cooperative launch: the persistent kernel needs "
                          "every CTA resident at once")
