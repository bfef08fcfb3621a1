"""cudnn-rnn: which cuDNN RNN configurations work on this GPU, how fast and how accurate.

The tree, top to bottom (imports point down only; ``tests/test_layers.py`` checks it):

* ``cudnn_rnn/*.py``: the commands (``example``, ``probe``, ``report``, ``tune``, ``bench``,
  ``overhead``, and ``cudnn-rnn`` / ``python -m cudnn_rnn`` with them as subcommands);
* :mod:`.reporting`: reports of recorded runs;
* :mod:`.matrix`: specs, a cell's life, the worker, the record and its one reader/writer;
  :mod:`.compare`: PyTorch, cuDNN's API log, GEMM rates, the overhead measurement;
* :mod:`.check`: the float64 reference, tolerances, NVIDIA's golden checksums;
* :mod:`.engine`: the RNN_example flow over cuDNN (config, descriptors, stages, values);
* :mod:`.bindings`: the ctypes mirror of libcudnn.

The ctypes mirror is the top-level folder ``bindings/`` of the checkout. It is installed as
``cudnn_rnn.bindings`` (``package_dir`` in setup.cfg), so the generic name ``bindings``
stays free for the programs of whoever installs this project; in a checkout that is not
installed (the Makefile's ``VENV=``), the same folder is mounted under that name here.
"""
import importlib.util as _util
import os as _os
import sys as _sys

__version__ = "0.5.0"


def _mount_bindings() -> None:
    name = __name__ + ".bindings"
    if name in _sys.modules or _os.path.isdir(_os.path.join(__path__[0], "bindings")):
        return  # already imported, or installed in place
    source = _os.path.join(_os.path.dirname(__path__[0]), "bindings")
    if not _os.path.isfile(_os.path.join(source, "__init__.py")):
        return  # a broken install: `import cudnn_rnn.bindings` then says what is missing
    spec = _util.spec_from_file_location(name, _os.path.join(source, "__init__.py"),
                                         submodule_search_locations=[source])
    module = _util.module_from_spec(spec)
    _sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del _sys.modules[name]
        raise



REQUIRED = ("numpy", "tabulate")  # setup.cfg's install_requires, by the names they import as


def _refuse_without_requirements() -> None:
    """``python -m cudnn_rnn.X`` from a Python that lacks the packages this project installs:
    one line saying what to do and exit 2, before an import fails with a traceback. (While
    ``-m`` looks for the module, which imports this package first, ``sys.argv[0]`` is
    ``"-m"``, as Python documents; importing the package from a program checks nothing.)"""
    if _sys.argv[:1] != ["-m"]:
        return
    missing = [name for name in REQUIRED if _util.find_spec(name) is None]
    if missing:
        _sys.stderr.write(
            f"cudnn_rnn: error: this Python ({_sys.executable}) lacks {' and '.join(missing)}: "
            "run the commands with the project's environment (make install creates .venv: "
            ".venv/bin/python -m cudnn_rnn..., or . .venv/bin/activate first), or install the "
            "project into this Python: pip install -e '.[cuda12]'\n")
        raise SystemExit(2)


_refuse_without_requirements()
_mount_bindings()
