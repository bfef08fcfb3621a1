"""Launch one persistent configuration a few times, for Nsight Compute to sample
(``ncu --kernel-name persistent_rnn ... python tools/ncu_persistent.py NAME SETTINGS SHAPE``).
A diagnostic (not part of the package)."""
import sys

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit import candidates as C, model
from cudnn_rnn.lowbit.persistent import PersistentEngine, Settings


USAGE = ("usage: python tools/ncu_persistent.py NAME SETTINGS CELL:T:L:H:B "
         "(e.g. persistent:int8/both b1t256 LSTM:20:2:512:64)")


def main() -> int:
    try:
        name, settings, shape = sys.argv[1:4]
        cell, T, L, H, B = shape.split(":")
        cfg = RNNConfig(seq_length=int(T), num_layers=int(L), hidden_size=int(H),
                        mini_batch=int(B), mode=RNNMode[cell])
        config = C.parse(name)
        shape_ = Settings.parse(settings)
    except KeyError as exc:
        print(f"ncu_persistent.py: unknown cell {exc} (one of "
              f"{', '.join(m.name for m in RNNMode)}); {USAGE}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"ncu_persistent.py: {exc}; {USAGE}", file=sys.stderr)
        return 2
    values = C.draw(cfg, 0)
    plan = None
    if config.fmt:
        plan = model.plan(cfg, values["stacked"],
                          model.calibrate(cfg, values["stacked"], **values["calibration"]),
                          config.fmt, config.parts)
    with PersistentEngine(cfg, values["stacked"], config.precision, plan, shape_) as e:
        io = values["io"]
        e.set_inputs(io["x"], io["hx"], io["cx"])
        for _ in range(4):
            e.forward()
        e.outputs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
