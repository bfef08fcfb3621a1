"""Exceptions generated from cudnnStatus_t, and the checker that raises them."""
import ctypes
import pickle

import pytest

from cudnn_rnn.bindings import ctypes_types as T
from cudnn_rnn.bindings import errors
from cudnn_rnn.bindings.enums import StatusV8, StatusV9


def test_one_class_per_status_with_v9_categories_as_bases():
    for member in StatusV9:
        if member.value == 0:
            continue
        cls = errors.ERROR_CLASSES[member.name]
        assert issubclass(cls, errors.CudnnError)
        category = member.value // 1000 * 1000
        if category in (2000, 3000, 4000, 5000) and member.value != category:
            assert issubclass(cls, errors.ERROR_CLASSES[StatusV9(category).name])
    assert issubclass(errors.NotSupportedDataType, errors.NotSupported)
    assert issubclass(errors.BadParamNullPointer, errors.BadParam)
    assert not issubclass(errors.NotSupported, errors.BadParam)


def test_codes_map_by_library_version():
    assert type(errors.error_for("f", 3000, 91900)) is errors.NotSupported
    assert type(errors.error_for("f", 9, 8907)) is errors.NotSupported
    assert type(errors.error_for("f", 3, 8907)) is errors.BadParam
    assert type(errors.error_for("f", 2002, 91900)) is errors.BadParamNullPointer
    assert errors.error_for("f", 4003, 91900).status_name == "INTERNAL_ERROR_HOST_ALLOCATION_FAILED"
    unknown = errors.error_for("f", 9999, 91900)
    assert type(unknown) is errors.CudnnError and unknown.status_name == "UNKNOWN_9999"
    assert {m.name for m in StatusV8 if m.value} <= set(errors.ERROR_CLASSES)


def test_error_carries_call_status_and_reason_and_pickles():
    e = errors.error_for("cudnnSetRNNDescriptor_v8", 3000, 91900, "mathPrec != CUDNN_DATA_FLOAT")
    assert (e.call, e.code, e.status_name) == ("cudnnSetRNNDescriptor_v8", 3000, "NOT_SUPPORTED")
    assert str(e) == ("cudnnSetRNNDescriptor_v8 failed: CUDNN_STATUS_NOT_SUPPORTED (3000): "
                      "mathPrec != CUDNN_DATA_FLOAT")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is errors.NotSupported and back.reason == e.reason and back.call == e.call


def test_checker_names_the_call_and_captures_cudnns_reason(lib):
    rnn = T.cudnnRNNDescriptor_t()
    lib.cudnnCreateRNNDescriptor(ctypes.byref(rnn))
    try:
        with pytest.raises(errors.NotSupported) as info:
            # HALF data, HALF math precision, PERSIST_STATIC: cuDNN logs why it refuses.
            lib.cudnnSetRNNDescriptor_v8(rnn, 1, 2, 2, 0, 0, 2, 2, 0, 64, 64, 64, 1, None, 0)
        e = info.value
        assert e.call == "cudnnSetRNNDescriptor_v8"
        assert e.reason and "CUDNN_DATA_HALF" in e.reason, e.log
        # the next, successful call must not inherit the old messages
        lib.cudnnSetRNNDescriptor_v8(rnn, 0, 2, 2, 0, 0, 0, 0, 0, 64, 64, 64, 1, None, 0)
    finally:
        lib.cudnnDestroyRNNDescriptor(rnn)


def test_opaque_types_are_distinct(lib):
    tensor = T.cudnnTensorDescriptor_t()
    lib.cudnnCreateTensorDescriptor(ctypes.byref(tensor))
    try:
        with pytest.raises(ctypes.ArgumentError):
            lib.cudnnDestroyRNNDescriptor(tensor)  # a tensor descriptor is not an RNN descriptor
    finally:
        lib.cudnnDestroyTensorDescriptor(tensor)


def test_a_stale_last_error_string_is_not_attributed_to_a_later_call(lib):
    """cudnnGetLastErrorString still holds an earlier failure's text; a later refusal that
    logs no reason of its own must not inherit it."""
    rnn = T.cudnnRNNDescriptor_t()
    lib.cudnnCreateRNNDescriptor(ctypes.byref(rnn))
    try:
        size = ctypes.c_size_t(0)
        with pytest.raises(errors.BadParam) as first:
            lib.cudnnGetRNNWeightSpaceSize(None, rnn, ctypes.byref(size))  # no handle
        assert first.value.reason
        with pytest.raises(errors.NotSupported) as second:  # INT8: cuDNN logs nothing
            lib.cudnnSetRNNDescriptor_v8(rnn, 0, 0, 2, 0, 0, 3, 3, 0, 64, 64, 64, 1, None, 0)
        assert second.value.reason is None
    finally:
        lib.cudnnDestroyRNNDescriptor(rnn)
