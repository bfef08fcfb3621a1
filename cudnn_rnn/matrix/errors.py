"""The two errors of bad input, at the bottom of the harness so every layer can raise them
and the commands (:func:`cudnn_rnn.cli.run_main`) turn them into one line and exit 2."""


class BadInput(Exception):
    """Wrong arguments or files: printed as one line, exit code 2."""


class MalformedResults(ValueError):
    """A results file whose records cannot be read (not a torn last line)."""
