"""engine.gpu.follow: a forward moving to another stream is ordered after the calls on the one
before (they share its buffers), except across a CUDA graph capture's edge, where the event
would break the capture (the engines' and cuDNN runners' one rule). Streams here record
what is asked of them; no GPU."""
import pytest

from cudnn_rnn.engine.gpu import follow


class Stream:
    def __init__(self, capturing=False):
        self.capturing, self.waited, self.recorded = capturing, [], 0

    def is_capturing(self):
        return self.capturing

    def record(self):
        self.recorded += 1
        return ("event", id(self), self.recorded)

    def wait_event(self, event):
        self.waited.append(event)


def test_a_new_stream_waits_for_the_event_recorded_on_the_old_one():
    old, new = Stream(), Stream()
    follow(new, old)
    assert old.recorded == 1 and new.waited == [("event", id(old), 1)]


@pytest.mark.parametrize("new_capturing,old_capturing", [(True, False), (False, True),
                                                         (True, True)])
def test_no_event_crosses_a_captures_edge(new_capturing, old_capturing):
    old, new = Stream(old_capturing), Stream(new_capturing)
    follow(new, old)
    assert old.recorded == 0 and new.waited == []
